"""`initialize` answered before the heavy imports, from the answer a previous sidecar gave.

The handshake's answer depends only on its params, the config files, a few environment
variables and this code; the same Pi in the same project asks the same question at every
`pi -p`. Importing what computes it (pydantic, asyncio, the config models) takes 250-400 ms of a
sidecar's start on a loaded 2-core machine, so every full handshake stores its answer under a
fingerprint of all of those inputs (`handshake-answers.json` in the data dir, 0600), and the
next sidecar reads its first line with nothing but the standard library, answers from that file
when the fingerprint matches, and only then imports the rest. The full handshake still runs
right after (the engine needs its config); if its answer differs from the one given (an input
the fingerprint missed), the shim gets the real footer at once and the entry is replaced.

Anything unexpected (not an `initialize` first, no agent dir in the params, an unreadable or
foreign file, a miss) hands the bytes read so far to the ordinary endpoint untouched. MemoryCore
configurations are never stored: their answer also depends on key files.
This module imports only the standard library (and `surrogates`, which does too), except in
`start_model_early`, which runs once the answer is out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import sys
import threading
import time
from typing import TYPE_CHECKING

from pi_memory_bridge import daemon_contract, surrogates
from pi_memory_bridge._version import PROTOCOL_VERSION, __version__

if TYPE_CHECKING:  # not imported at run time: dataclasses, pathlib and typing's helpers cost
    # 20-60 ms of a start on a loaded machine, and this runs before the answer
    from collections.abc import Callable, Mapping
    from typing import Any

ANSWERS_FILE = "handshake-answers.json"
DATA_DIR_NAME = "memory-bridge"  # config._paths.DATA_DIR_NAME (a test keeps them equal)
GLOBAL_CONFIG_NAME = "config.json"  # config._paths.GLOBAL_CONFIG_NAME
PROJECT_CONFIG = os.path.join(".pi", "memory-bridge.json")  # config._paths.project_config_path
MAX_ANSWERS = 32  # one per project and agent dir in use; the oldest goes first
MAX_FIRST_LINE = 64 * 1024  # an `initialize` line is a few hundred bytes
MAX_FILE_BYTES = 1 << 20
IDLE_S = 0.01  # no first line this long: the shim spawned us early, the imports start meanwhile
# What the answer may read from the environment (daemon_contract: a part of what keys the shim's
# background sidecar), less the shim's own per-run variables.
_ENV_PREFIXES = daemon_contract.ANSWER_ENV_PREFIXES
_ENV_NAMES = daemon_contract.ANSWER_ENV_NAMES
_ENV_IGNORED = frozenset(daemon_contract.PER_RUN_VARS)
# The code that computes the answer: a change to any of it (an edit, an upgrade) is a miss.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CODE = ("config", "sidecar/handshake.py", "wire.py", "sidecar/quick_start.py", "footer.py")


class Prelude:
    """What was read before the endpoint existed, and what was answered from it."""

    __slots__ = ("answer", "fingerprint", "params", "unread")

    def __init__(
        self,
        unread: bytes = b"",
        fingerprint: str | None = None,
        params: dict[str, Any] | None = None,
        answer: dict[str, Any] | None = None,
    ) -> None:
        self.unread = unread  # bytes for the endpoint to read first (all, when nothing was answered)
        self.fingerprint = fingerprint  # the first line was an `initialize` with these inputs
        self.params = params  # that `initialize`'s params, as the endpoint decodes them
        self.answer = answer  # the result sent, when one was

    @property
    def answered(self) -> bool:
        return self.answer is not None


def canonical(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def _file_part(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return "absent" if not os.path.lexists(path) else "dangling"
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return hashlib.sha256(data).hexdigest()


def _code_stamp() -> list[str]:
    stamps = []
    for name in _CODE:
        target = os.path.join(_PACKAGE, name)
        if os.path.isdir(target):
            paths = sorted(os.path.join(target, n) for n in os.listdir(target) if n.endswith(".py"))
        else:
            paths = [target]
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                continue
            stamps.append(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns}")
    return stamps


def agent_dir_of(params: Mapping[str, Any]) -> str | None:
    raw = params.get("agentDir")
    return raw if isinstance(raw, str) and raw else None


def fingerprint(params: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """The hash of every input of the handshake's answer; None when it cannot be stored."""
    agent_dir = agent_dir_of(params)
    cwd = params.get("cwd")
    if agent_dir is None or not isinstance(cwd, str):
        return None
    relevant = sorted(
        (k, v)
        for k, v in env.items()
        if k not in _ENV_IGNORED and (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES))
    )
    inputs = {
        "version": [__version__, PROTOCOL_VERSION],
        "code": _code_stamp(),
        "params": canonical(params),
        "env": relevant,
        "global": _file_part(os.path.join(agent_dir, DATA_DIR_NAME, GLOBAL_CONFIG_NAME)),
        "project": _file_part(os.path.join(cwd, PROJECT_CONFIG)),
    }
    return hashlib.sha256(canonical(inputs).encode()).hexdigest()


def answers_path(agent_dir: str) -> str:
    return os.path.join(agent_dir, DATA_DIR_NAME, ANSWERS_FILE)


def read_answers(agent_dir: str) -> dict[str, Any]:
    try:
        with open(answers_path(agent_dir), "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        answers = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
    except (OSError, ValueError):
        return {}
    return answers if isinstance(answers, dict) else {}


def store_answer(agent_dir: str, key: str, result: dict[str, Any] | None) -> None:
    """Keep `result` under `key`, or forget `key` for None (atomically; a lost race or a failure
    only costs a later miss). Nothing is written where the data dir does not exist yet (the
    engine creates it)."""
    if result is not None and result.get("config", {}).get("backend") == "memorycore":
        result = None
    path = answers_path(agent_dir)
    if not os.path.isdir(os.path.dirname(path)):
        return
    answers = read_answers(agent_dir)
    if answers.get(key) == result:
        return
    answers.pop(key, None)
    if result is not None:
        answers[key] = result
    while len(answers) > MAX_ANSWERS:
        answers.pop(next(iter(answers)))
    tmp = os.path.join(os.path.dirname(path), f".{ANSWERS_FILE}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(answers, ensure_ascii=True, separators=(",", ":")).encode())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


class BackgroundImports:
    """The heavy modules, imported in a thread once the first line keeps us waiting.

    The shim spawns the sidecar when Pi loads the extension and sends `initialize` only once
    Pi's session starts: the imports use that wait. When the line is there at once they are not
    started (they would take the GIL from the answer), and the caller imports them itself. The
    caller imports nothing of them until `wait` returns (two threads importing modules that
    import each other can deadlock: a submodule's lock is taken before its package's), except
    the first module once `wait_first` returned. `add` queues more while the thread runs.
    numpy's thread counts are pinned first (before its import)."""

    def __init__(self, *modules: str) -> None:
        self._queue = list(modules)
        self._lock = threading.Lock()
        self._first = threading.Event()
        self._finished = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="sidecar-imports", daemon=True)
            self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def wait_first(self) -> None:
        """Until the first module is imported (or failed to), when the thread runs."""
        if self._thread is not None:
            self._first.wait()

    def add(self, *modules: str) -> bool:
        """Import these too, after the others, when the thread still runs (False: it does not,
        the caller imports them itself when it needs them)."""
        with self._lock:
            if self._thread is None or self._finished:
                return False
            self._queue.extend(modules)
            return True

    def _load(self) -> None:
        import importlib

        try:
            from pi_memory_bridge.embeddings.threads import pin_environment

            pin_environment()
            while True:
                with self._lock:
                    if not self._queue:
                        return
                    name = self._queue.pop(0)
                try:
                    importlib.import_module(name)
                except Exception:  # the caller's own import raises it again, where it is reported
                    return
                finally:
                    self._first.set()
        finally:
            with self._lock:
                self._finished = True
            self._first.set()


def wait_readable(fd: int, timeout_s: float | None, on_idle: Callable[[], None] | None) -> bool:
    """Whether `fd` became readable within `timeout_s` (None: no limit); `on_idle` is called
    once nothing came for `IDLE_S`."""
    started = time.monotonic()
    if on_idle is not None:
        if select.select([fd], [], [], IDLE_S if timeout_s is None else min(IDLE_S, timeout_s))[0]:
            return True
        on_idle()
    left = None if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))
    return bool(select.select([fd], [], [], left)[0])


def _first_line(fd: int, timeout_s: float | None, on_idle: Callable[[], None] | None) -> bytes:
    """Up to the first newline; what came by `timeout_s` (None: no limit) when none came."""
    data = b""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    if not wait_readable(fd, timeout_s, on_idle):
        return data
    while b"\n" not in data and len(data) < MAX_FIRST_LINE:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def _initialize_request(line: bytes) -> tuple[int | str, dict[str, Any]] | None:
    try:
        raw = surrogates.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(raw, dict) or set(raw) != {"jsonrpc", "id", "method", "params"}:
        return None
    req_id, params = raw["id"], raw["params"]
    if raw["jsonrpc"] != "2.0" or raw["method"] != "initialize" or not isinstance(params, dict):
        return None
    if isinstance(req_id, bool) or not isinstance(req_id, int | str):
        return None
    return req_id, params


def answer_first(
    env: Mapping[str, str],
    fd_in: int = 0,
    fd_out: int = 1,
    timeout_s: float | None = None,
    on_idle: Callable[[], None] | None = None,
) -> Prelude:
    """Read the first line; answer it on `fd_out` when it is an `initialize` answered before.
    `on_idle` (e.g. `BackgroundImports.start`) runs once the line keeps us waiting."""
    # Every system call below gives up the GIL, and getting it back from a thread that imports
    # takes up to the switch interval (5 ms): a few dozen of them would add ~100 ms.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        return _answer_first(env, fd_in, fd_out, timeout_s, on_idle)
    finally:
        sys.setswitchinterval(interval)


def _answer_first(
    env: Mapping[str, str],
    fd_in: int,
    fd_out: int,
    timeout_s: float | None,
    on_idle: Callable[[], None] | None,
) -> Prelude:
    data = _first_line(fd_in, timeout_s, on_idle)
    line, newline, rest = data.partition(b"\n")
    request = _initialize_request(line) if newline else None
    if request is None:
        return Prelude(unread=data)
    req_id, params = request
    key = fingerprint(params, env)
    agent_dir = agent_dir_of(params)
    if key is None or agent_dir is None:
        return Prelude(unread=data)
    answer = read_answers(agent_dir).get(key)
    if not isinstance(answer, dict):
        return Prelude(unread=data, fingerprint=key, params=params)
    reply = json.dumps(
        {"jsonrpc": "2.0", "id": req_id, "result": answer}, ensure_ascii=True, separators=(",", ":")
    )
    out = reply.encode() + b"\n"
    while out:
        out = out[os.write(fd_out, out) :]
    return Prelude(unread=rest, fingerprint=key, params=params, answer=answer)


def model_wanted(prelude: Prelude) -> bool:
    """Whether the answered configuration loads the embedding model: memory on, local backend
    (the condition of `embeddings.loader.start_early`, read from the stored answer)."""
    config = prelude.answer.get("config") if prelude.answer is not None else None
    return isinstance(config, dict) and config.get("backend") == "local" and config.get("enabled") is True


# The import thread's first module: the embeddings package, whole, before the model's hash check
# starts from this thread (see `start_model_early`).
EARLY_MODULE = "pi_memory_bridge.embeddings.cache_check"
MODEL_MODULES = ("pi_memory_bridge.embeddings.cache", "pi_memory_bridge.embeddings.use_model")


def start_model_early(prelude: Prelude, imports: BackgroundImports) -> None:
    """When the stored answer says the embedding model will load: begin its cache's hash check
    now, and have the import thread (when it runs) import the model's code and numpy too.

    The first recall of a fresh `pi -p` waits for the model. Its load starts from the handshake,
    after the endpoint's imports (200-400 ms on a loaded machine); the hash check (~85 MB, GIL
    released) then ran on that recall's path. Begun here it runs beside those imports. Only the
    standard library and the embeddings package are imported here, once the import thread has
    imported that package whole (`EARLY_MODULE` first in its list)."""
    if not model_wanted(prelude):
        return
    imports.wait_first()
    from pi_memory_bridge.embeddings.cache_check import start_early
    from pi_memory_bridge.embeddings.cache_dir import default_cache_root
    from pi_memory_bridge.embeddings.loader import turned_off

    if not turned_off(os.environ):
        start_early(default_cache_root(os.environ))
        imports.add(*MODEL_MODULES)
