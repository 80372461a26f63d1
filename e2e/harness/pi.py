"""Real Pi processes in a throw-away home, pointed at the fake model.

`PiInstall` says where one Pi version and Node 22 are (from scripts/versions.sh); `PiEnv` owns a
temporary HOME / agent dir / work dir with `models.json` (provider `fake`) and `settings.json`,
and starts Pi in print mode (`run_print`) or RPC mode (`start_rpc`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .paths import REPO_ROOT, SETUP_HINT, VERSIONS_SH
from .procs import RUN_MARKER_VAR, find_pids_by_env, kill_pids, wait_until_gone
from .rpc import PiRpcSession
from .ui import DialogPolicy

MODEL_ARG: Final = "fake/fake-model"
API_KEY: Final = "dummy-key"  # Pi only counts a provider's models as available with some key.

# Agent-level retry backs off 2 s, 4 s, 8 s by default; keep the count, shrink the waits.
DEFAULT_SETTINGS: Final[Mapping[str, Any]] = {"retry": {"baseDelayMs": 20}}


class PiNotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class PiInstall:
    version: str
    node: Path
    cli: Path

    @property
    def label(self) -> str:
        """ "pi0.84" for 0.84.4, "pi1.6" for 1.6.0 (the pytest ids)."""
        return "pi" + ".".join(self.version.split(".")[:2])

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    def missing(self) -> list[str]:
        return [
            f"{what} {path}"
            for what, path in (("node", self.node), ("pi cli", self.cli))
            if not path.is_file()
        ]

    def require(self) -> None:
        """PiNotInstalled (with the setup hint) unless both files exist."""
        missing = self.missing()
        if missing:
            raise PiNotInstalled(
                f"Pi {self.version} is not installed (missing {', '.join(missing)}); {SETUP_HINT}"
            )


@functools.cache
def pi_installs(root: Path = REPO_ROOT) -> tuple[PiInstall, ...]:
    """Every Pi version the E2E drives, with paths resolved by scripts/versions.sh itself."""
    script = (
        'source "$1" && echo "$NODE22_BIN" && for v in "${PI_VERSIONS[@]}"; do echo "$v"; pi_cli "$v"; done'
    )
    versions_sh = root / VERSIONS_SH.relative_to(REPO_ROOT)
    proc = subprocess.run(
        ["bash", "-c", script, "versions", str(versions_sh)],
        capture_output=True,
        text=True,
        env={**os.environ, "ROOT": str(root)},
        check=False,
    )
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) < 3 or len(lines) % 2 != 1:
        raise PiNotInstalled(f"cannot read {versions_sh}: rc={proc.returncode} {proc.stderr.strip()}")
    node = Path(lines[0])
    pairs = zip(lines[1::2], lines[2::2], strict=True)
    return tuple(PiInstall(version, node, Path(cli)) for version, cli in pairs)


@dataclass(frozen=True)
class PiRun:
    argv: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    wall_s: float


def _scrubbed_environ(base: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment minus provider keys and anything Pi reads or marks (PI_*, AI_AGENT)."""
    drop_exact = {"AI_AGENT", "NODE_OPTIONS", "OPENAI_BASE_URL"}
    return {
        k: v
        for k, v in base.items()
        if not (k.endswith("_API_KEY") or k.startswith("PI_") or k in drop_exact or k == RUN_MARKER_VAR)
    }


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """A JSONL file (a Pi session file, a transcript) as a list of objects."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class PiEnv:
    """A throw-away Pi home under `root` (usually pytest's tmp_path), wired to the fake model.

    Layout: `root/home` (HOME), `root/home/.pi/agent` (PI_CODING_AGENT_DIR), `root/work` (cwd),
    `root/logs` (RPC transcripts, print-run outputs).
    """

    def __init__(
        self,
        install: PiInstall,
        root: Path,
        model_base_url: str,
        *,
        extra_env: Mapping[str, str] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        install.require()
        self.install = install
        self.root = root
        self.home = root / "home"
        self.agent_dir = self.home / ".pi" / "agent"
        self.work_dir = root / "work"
        self.logs_dir = root / "logs"
        for d in (self.agent_dir, self.work_dir, self.logs_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.run_token = uuid.uuid4().hex
        # Per-test additions to every Pi's environment; a None value removes the variable.
        self.extra_env: dict[str, str | None] = dict(extra_env or {})
        self.sessions: list[PiRpcSession] = []
        self._seq = itertools.count(1)
        self._base_env = self._build_base_env()
        self.write_models(model_base_url)
        self._settings: dict[str, Any] = {}
        self.write_settings(_deep_merge(dict(DEFAULT_SETTINGS), settings or {}))

    # ---- configuration ---------------------------------------------------------------------

    def _build_base_env(self) -> dict[str, str]:
        env = _scrubbed_environ(os.environ)
        env.update(
            {
                "HOME": str(self.home),
                "PI_CODING_AGENT_DIR": str(self.agent_dir),
                "PI_OFFLINE": "1",
                "PI_SKIP_VERSION_CHECK": "1",
                "PI_TELEMETRY": "0",
                "XDG_CONFIG_HOME": str(self.home / ".config"),
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                "XDG_STATE_HOME": str(self.home / ".local" / "state"),
                "PATH": os.pathsep.join([str(self.install.node.parent), env.get("PATH", "/usr/bin:/bin")]),
                RUN_MARKER_VAR: self.run_token,
                # a background sidecar (the default without PI_MEMORY_BRIDGE_CMD) leaves soon after
                # its last Pi, so no test leaves one behind
                "PI_MEMORY_BRIDGE_DAEMON_IDLE_S": "3",
                # the decoded embedding model, built once and shared by every test's sidecar
                "PI_MEMORY_BRIDGE_CACHE_DIR": os.environ.get("PI_MEMORY_BRIDGE_CACHE_DIR")
                or str(Path(tempfile.gettempdir()) / f"pi-memory-bridge-model-cache-{os.getuid()}"),
            }
        )
        return env

    def write_models(self, base_url: str, *, cost: Mapping[str, float] | None = None) -> Path:
        """`models.json` with provider `fake`; `cost` ($ per million tokens) is Pi's catalog price."""
        price = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, **(cost or {})}
        model = {
            "id": "fake-model",
            "name": "Fake Model",
            "reasoning": False,
            "input": ["text"],
            "contextWindow": 32000,
            "maxTokens": 1024,
            "cost": price,
        }
        provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": API_KEY, "models": [model]}
        path = self.agent_dir / "models.json"
        path.write_text(json.dumps({"providers": {"fake": provider}}, indent=2), encoding="utf-8")
        return path

    def write_settings(self, settings: Mapping[str, Any]) -> Path:
        """Deep-merge into `<agent-dir>/settings.json` (read by Pi at start)."""
        self._settings = _deep_merge(self._settings, settings)
        path = self.agent_dir / "settings.json"
        path.write_text(json.dumps(self._settings, indent=2), encoding="utf-8")
        return path

    @property
    def sessions_dir(self) -> Path:
        return self.agent_dir / "sessions"

    def session_files(self) -> list[Path]:
        """Pi's session files, oldest first."""
        if not self.sessions_dir.exists():
            return []
        return sorted(self.sessions_dir.glob("*/*.jsonl"), key=lambda p: p.stat().st_mtime_ns)

    def environ(self, env: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The environment a Pi gets: base, then `extra_env`, then `env` (None removes a name)."""
        out = dict(self._base_env)
        for layer in (self.extra_env, env or {}):
            for k, v in layer.items():
                if v is None:
                    out.pop(k, None)
                else:
                    out[k] = v
        return out

    def argv(self, *args: str, extensions: Sequence[Path] = ()) -> list[str]:
        argv = [str(self.install.node), str(self.install.cli), "--model", MODEL_ARG]
        for ext in extensions:
            argv += ["-e", str(ext)]
        return argv + list(args)

    # ---- running ---------------------------------------------------------------------------

    def run_print(
        self,
        prompts: Sequence[str],
        *,
        extensions: Sequence[Path] = (),
        extra_args: Sequence[str] = (),
        timeout: float = 60.0,
        env: Mapping[str, str | None] | None = None,
    ) -> PiRun:
        """`pi --model fake/fake-model [-e ext]... [extra_args] -p <prompt>...`, stdin closed.

        Several prompts run in order in one process (`/commands` included)."""
        argv = self.argv(*extra_args, "-p", *prompts, extensions=extensions)
        t0 = time.monotonic()
        proc = subprocess.run(
            argv,
            cwd=self.work_dir,
            env=self.environ(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        run = PiRun(tuple(argv), proc.stdout, proc.stderr, proc.returncode, time.monotonic() - t0)
        log = self.logs_dir / f"print-{next(self._seq)}.json"
        log.write_text(json.dumps(dataclasses.asdict(run), indent=2), encoding="utf-8")
        return run

    def start_rpc(
        self,
        *,
        extensions: Sequence[Path] = (),
        extra_args: Sequence[str] = (),
        env: Mapping[str, str | None] | None = None,
        dialogs: DialogPolicy | None = None,
        name: str | None = None,
    ) -> PiRpcSession:
        """Start `pi --mode rpc`; it is closed (or killed) by `close()` if the test does not.

        `dialogs` answers `extension_ui_request` dialogs; default: a fresh `ScriptedDialogs`
        (script it with `session.scripted.confirm(True)`; unscripted dialogs are cancelled)."""
        label = name or f"rpc-{next(self._seq)}"
        session = PiRpcSession(
            self.argv("--mode", "rpc", *extra_args, extensions=extensions),
            env=self.environ(env),
            cwd=self.work_dir,
            pi_version=self.install.version,
            transcript=self.logs_dir / f"{label}.jsonl",
            dialogs=dialogs,
        )
        self.sessions.append(session)
        return session

    def marked_pids(self) -> list[int]:
        """Live processes started by this env's Pis (Pi itself and anything it spawned)."""
        return find_pids_by_env(RUN_MARKER_VAR, self.run_token)

    def close(self) -> None:
        """Close RPC sessions still running, then SIGKILL anything left carrying our marker."""
        errors: list[str] = []
        for session in self.sessions:
            if session.returncode is None:
                try:
                    session.close(timeout=10)
                except AssertionError as exc:
                    errors.append(str(exc))
        # a sidecar finishes on its own after its Pi exits (bounded by its exit watchdog, 5 s)
        leftovers = kill_pids(wait_until_gone(self.marked_pids(), timeout=6))
        if leftovers:
            wait_until_gone(leftovers, timeout=5)
            warnings.warn(f"killed processes left behind by Pi: {leftovers}", stacklevel=2)
        if errors:
            raise AssertionError("; ".join(errors))
