"""`doctor`'s view of Pi: is `pi` on PATH (which version), and will Pi load this extension?

Pi loads extensions from `packages` and `extensions` in `<agent-dir>/settings.json` and in the
project's `.pi/settings.json`, and from `<agent-dir>/extensions/`. A package lives where `pi
install` put it: `npm:NAME` under `<root>/npm/node_modules/NAME`, a git source under
`<root>/git/<host>/<path>`, a local path where it is (relative to the settings file). Each place
that holds this extension is checked for the files its manifest names.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pi_memory_bridge.config import expand_home

PACKAGE_NAMES = frozenset({"pi-memory-bridge", "pi-memory-bridge-shim"})
MIN_PI = (0, 80, 4)  # agent_settled, the capture point
INSTALL_HINT = "pi install npm:pi-memory-bridge"
_GIT_SOURCE = re.compile(
    r"^(?:git:)?(?:(?:https?|ssh|git)://)?(?:[^@/]+@)?(?P<host>[^/:]+)[/:](?P<path>[^@#]+?)(?:\.git)?(?:[@#].*)?$"
)


@dataclass(frozen=True, slots=True)
class PiCheck:
    """What `doctor` turns into a `Check` line (kept apart so this module needs nothing of doctor)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False


@dataclass(frozen=True, slots=True)
class Declared:
    source: str  # as written in settings.json
    settings: Path  # the file that says it
    path: Path  # where it is on disk
    package: bool = True  # from `packages` (else from `extensions`: a path, never a package source)


def _settings(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _package_path(source: str, root: Path, settings_dir: Path, env: Mapping[str, str]) -> Path | None:
    if source.startswith("npm:"):
        spec = source[4:].strip()
        name = re.match(r"^(@?[^@]+(?:/[^@]+)?)", spec)
        return root / "npm" / "node_modules" / name.group(1) if name else None
    if _is_git(source):
        found = _GIT_SOURCE.match(source)
        return root / "git" / found.group("host") / found.group("path") if found else None
    path = expand_home(source, env)
    return path if path.is_absolute() else (settings_dir / path).resolve()


def declared(agent_dir: Path, cwd: Path, env: Mapping[str, str]) -> Iterator[Declared]:
    """Every package and extension the user and project settings declare, with its place on disk."""
    for settings, root in (
        (agent_dir / "settings.json", agent_dir),
        (cwd / ".pi" / "settings.json", cwd / ".pi"),
    ):
        data = _settings(settings)
        for key in ("packages", "extensions"):
            entries = data.get(key)
            for entry in entries if isinstance(entries, list) else []:
                source = entry.get("source") if isinstance(entry, dict) else entry
                if not isinstance(source, str) or not source.strip():
                    continue
                if key == "extensions":
                    path = expand_home(source, env)
                    where: Path | None = path if path.is_absolute() else (settings.parent / path).resolve()
                else:
                    where = _package_path(source.strip(), root, settings.parent, env)
                if where is not None:
                    yield Declared(source, settings, where, package=key == "packages")


def _manifest(folder: Path) -> dict[str, object] | None:
    data = _settings(folder / "package.json")
    return data if data.get("name") in PACKAGE_NAMES else None


def shown_as(source: str | None, folder: Path, entry: str) -> str:
    """The name Pi's start-up box gives this extension, worked out the way Pi does it.

    npm and git packages are named by their source; anything else (a local path, an `extensions`
    entry, an auto-discovered folder) by the last folder of its entry file, `index.ts` left out.
    """
    entry_path = PurePosixPath(entry)
    inner = "" if entry_path.stem == "index" and str(entry_path.parent) == "." else f":{entry_path}"
    if source is not None and source.startswith("npm:"):
        return (source[4:].strip() or source) + inner
    found = _GIT_SOURCE.match(source) if source is not None and _is_git(source) else None
    if found is not None:
        return found.group("path") + inner
    file = (folder / entry).resolve()
    return file.parent.name if file.stem == "index" else file.name


def _is_git(source: str) -> bool:
    return source.startswith(("git:", "http://", "https://", "ssh://", "git://"))


def _check_folder(folder: Path, said_by: str, source: str | None = None) -> PiCheck:
    manifest = _manifest(folder) or {}
    pi = manifest.get("pi")
    entries = pi.get("extensions", []) if isinstance(pi, dict) else []
    names = [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []
    missing = [e for e in names if not (folder / e).is_file()]
    if not names or missing:
        return PiCheck(
            "extension",
            False,
            f"{folder}: pi.extensions names missing files {missing or names}",
            f"reinstall it: {INSTALL_HINT}",
        )
    shown = shown_as(source, folder, names[0])
    # a local install is named after its folder: say so where that is not the package's own name
    why = (
        " (Pi names a local install after its folder)"
        if shown != manifest.get("name") and source is None
        else ""
    )
    return PiCheck("extension", True, f"{folder} ({said_by}); Pi shows it as {shown}{why}")


def extension_checks(
    agent_dir: Path, cwd: Path, env: Mapping[str, str], checkout: Path | None
) -> list[PiCheck]:
    """One check per place Pi will load this extension from; a failing one when there is none."""
    checks: list[PiCheck] = []
    seen: set[Path] = set()
    for item in declared(agent_dir, cwd, env):
        folder = item.path if item.path.is_dir() else item.path.parent
        if folder in seen or _manifest(folder) is None:
            continue
        seen.add(folder)
        package = (
            item.source if item.package and (item.source.startswith("npm:") or _is_git(item.source)) else None
        )
        checks.append(_check_folder(folder, f"{item.source} in {item.settings}", package))
    ext_dir = agent_dir / "extensions"
    if ext_dir.is_dir():
        for folder in sorted(p for p in ext_dir.iterdir() if p.is_dir()):
            if folder not in seen and _manifest(folder) is not None:
                seen.add(folder)
                checks.append(_check_folder(folder, "auto-discovered"))
    if checks:
        return checks
    if checkout is not None and _manifest(checkout) is not None:
        return [
            PiCheck(
                "extension",
                True,
                f"not installed in Pi; start it from this checkout: pi -e {checkout}",
                f"or install it: pi install {checkout}",
                warning=True,
            )
        ]
    return [
        PiCheck(
            "extension",
            False,
            "Pi does not load pi-memory-bridge (not in its settings' packages or extensions)",
            f"install it: {INSTALL_HINT}",
        )
    ]


def _version(text: str) -> tuple[int, ...] | None:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in found.groups()) if found else None


def pi_check(env: Mapping[str, str]) -> PiCheck:
    pi = shutil.which("pi", path=env.get("PATH"))
    if pi is None:
        return PiCheck(
            "pi",
            False,
            "`pi` is not on PATH",
            "install Pi: npm install -g @earendil-works/pi-coding-agent",
            warning=True,
        )
    run_env = {**env, "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"}
    try:
        out = subprocess.run([pi, "--version"], capture_output=True, text=True, timeout=30, env=run_env)
    except (OSError, subprocess.SubprocessError) as exc:
        return PiCheck(
            "pi", False, f"{pi} --version failed: {exc}", "check the Pi installation", warning=True
        )
    version = _version(out.stdout + out.stderr)
    if out.returncode != 0 or version is None:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        return PiCheck(
            "pi",
            False,
            f"{pi} --version failed: {tail[0][:200]}",
            "Pi needs Node >= 22.19 on PATH",
            warning=True,
        )
    shown = ".".join(map(str, version))
    if version < MIN_PI:
        return PiCheck(
            "pi",
            False,
            f"{pi} is Pi {shown}; memory needs >= {'.'.join(map(str, MIN_PI))}",
            "update Pi: pi update --self",
            warning=True,
        )
    return PiCheck("pi", True, f"{pi} (Pi {shown})")
