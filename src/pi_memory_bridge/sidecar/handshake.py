"""The `initialize` handshake, answered from the configuration alone.

It needs nothing but the config loader, so the sidecar can answer it within a few tens of
milliseconds of starting; the memory engine (`engine`) loads right after, in the background.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pi_memory_bridge._version import PROTOCOL_VERSION, __version__
from pi_memory_bridge.config import LoadedConfig, default_agent_dir, load_config
from pi_memory_bridge.footer import initial
from pi_memory_bridge.rpc.errors import ProtocolVersionMismatch
from pi_memory_bridge.sidecar.versions import UPGRADE_HINT, version_mismatch
from pi_memory_bridge.wire import (
    ConfigState,
    Footer,
    InitializeParams,
    InitializeResult,
    RecallLimits,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Handshake:
    loaded: LoadedConfig
    agent_dir: Path
    cwd: Path
    result: InitializeResult
    has_ui: bool = False  # an interactive session, where a question may be asked


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def handshake(p: InitializeParams, env: Mapping[str, str]) -> Handshake:
    if _major(p.protocol_version) != _major(PROTOCOL_VERSION):
        raise ProtocolVersionMismatch(
            f"the Pi extension speaks protocol {p.protocol_version}, this sidecar speaks "
            f"{PROTOCOL_VERSION}; {UPGRADE_HINT}",
            {"expected": PROTOCOL_VERSION, "got": p.protocol_version},
        )
    mismatch = version_mismatch(p.client.name, p.client.version, __version__)
    if mismatch is not None:
        raise ProtocolVersionMismatch(mismatch, {"extension": p.client.version, "sidecar": __version__})
    agent_dir = Path(p.agent_dir) if p.agent_dir else default_agent_dir(env)
    loaded = load_config(agent_dir=agent_dir, cwd=Path(p.cwd), project_trusted=p.project_trusted, env=env)
    for problem in loaded.problems:
        log.warning("config: %s", problem)
    cfg = loaded.config
    result = InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        server_version=__version__,
        config=ConfigState(
            ok=loaded.ok,
            backend=cfg.backend,
            enabled=cfg.enabled,
            problems=[str(p) for p in loaded.problems],
            sources=[s.path or s.kind for s in loaded.sources],
        ),
        recall=RecallLimits(deadline_ms=cfg.recall.deadline_ms, enabled=cfg.enabled and cfg.recall.enabled),
        footer=Footer.of(initial(loaded)),
    )
    return Handshake(loaded, agent_dir, Path(p.cwd), result, has_ui=p.has_ui)
