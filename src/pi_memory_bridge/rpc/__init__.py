"""The shim<->sidecar transport: JSON-RPC 2.0, one object per `\\n`-terminated line."""

from pi_memory_bridge.rpc.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    MethodNotFound,
    ParseError,
    ProtocolVersionMismatch,
    ServerNotInitialized,
)
from pi_memory_bridge.rpc.server import PeerError, PeerGone, RpcEndpoint
from pi_memory_bridge.rpc.stdio import open_stdio

__all__ = [
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "JsonRpcError",
    "MethodNotFound",
    "ParseError",
    "PeerError",
    "PeerGone",
    "ProtocolVersionMismatch",
    "RpcEndpoint",
    "ServerNotInitialized",
    "open_stdio",
]
