"""JSON-RPC errors, one exception type per error code (the shape pygls uses).

JsonRpcError
├── ParseError                -32700  the line is not JSON
├── InvalidRequest            -32600  JSON, but not a JSON-RPC 2.0 request (or a line over the size cap)
├── MethodNotFound            -32601
├── InvalidParams             -32602  params fail strict validation; `data` lists the fields
├── InternalError             -32603  a handler raised something unexpected
├── ServerNotInitialized      -32002  a method other than `initialize` before the handshake
└── ProtocolVersionMismatch   -32003  the shim speaks another major protocol version
"""

from __future__ import annotations

from typing import Any, ClassVar


class JsonRpcError(Exception):
    CODE: ClassVar[int] = -32603
    MESSAGE: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        self.message = message or self.MESSAGE
        self.data = data
        super().__init__(self.message)

    @property
    def code(self) -> int:
        return self.CODE

    def to_wire(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.CODE, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class ParseError(JsonRpcError):
    CODE = -32700
    MESSAGE = "Parse error"


class InvalidRequest(JsonRpcError):
    CODE = -32600
    MESSAGE = "Invalid request"


class MethodNotFound(JsonRpcError):
    CODE = -32601
    MESSAGE = "Method not found"


class InvalidParams(JsonRpcError):
    CODE = -32602
    MESSAGE = "Invalid params"


class InternalError(JsonRpcError):
    CODE = -32603
    MESSAGE = "Internal error"


class ServerNotInitialized(JsonRpcError):
    CODE = -32002
    MESSAGE = "Server not initialized"


class ProtocolVersionMismatch(JsonRpcError):
    CODE = -32003
    MESSAGE = "Protocol version mismatch"
