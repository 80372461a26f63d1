"""Build what a user installs (the wheel, the npm tarball) and install it offline into a throw-away home.

- `build_wheel`: `pip wheel --no-deps --no-build-isolation` of the checkout (setuptools and wheel
  come with the dev venv, so no index is needed).
- `wheelhouse`: our wheel plus the wheels of its dependencies, repacked from the dev venv's
  installed files (same interpreter, same platform): `pip install --no-index --find-links` then
  installs exactly what `uv tool install pi-memory-bridge` would, without a network.
- `npm_pack`: `npm pack` of the repository root, the file the npm registry would serve.
- `tool_install`: what pipx does: a venv under `~/.local/share/pipx/venvs/pi-memory-bridge` and a
  link in `~/.local/bin`, which is not on PATH (the extension must find it there by itself).
- `npm_wrapper`: Pi's `npmCommand` setting pointed at a script that hands npm the built tarball
  where Pi asks for `pi-memory-bridge` from the registry, offline.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from harness import REPO_ROOT

PACKAGE = "pi-memory-bridge"
OFFLINE_PIP = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"{argv} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def source_copy(out: Path) -> Path:
    """The repository's files (tracked and new, not ignored) copied to `out`: a clean checkout of
    the working tree, so builds leave nothing behind in the repository."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT)
    for rel in filter(None, listed.split("\0")):
        src = REPO_ROOT / rel
        if src.is_file() and not src.is_symlink():
            dst = out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return out


def build_wheel(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    source = source_copy(out / "source")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _run([*pip, "-w", str(out), str(source)], env=OFFLINE_PIP)
    [wheel] = out.glob("pi_memory_bridge-*.whl")
    return wheel


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(dist: importlib.metadata.Distribution, out: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists inside site-packages."""
    meta = next(f for f in dist.files or [] if f.name == "METADATA" and f.parent.name.endswith(".dist-info"))
    info = Path(str(dist.locate_file(meta))).parent
    site = Path(str(dist.locate_file("")))
    wheel_meta = (info / "WHEEL").read_text(encoding="utf-8")
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
    name = re.sub(r"[-.]+", "_", dist.metadata["Name"])
    parts = [t.split("-") for t in tags]  # "py2-none-any", "py3-none-any" -> "py2.py3-none-any"
    tag = "-".join(".".join(dict.fromkeys(p[i] for p in parts)) for i in range(3))
    target = out / f"{name}-{dist.version}-{tag}.whl"
    records: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in dist.files or []:
            rel = file.as_posix()
            if (
                rel.startswith("..")
                or "__pycache__" in rel
                or rel.endswith(("RECORD", "INSTALLER", "REQUESTED"))
            ):
                continue  # scripts (regenerated from entry_points.txt), bytecode, install-time files
            full = site / rel
            if not full.is_file() or rel.endswith("direct_url.json"):
                continue
            data = full.read_bytes()
            zf.writestr(rel, data)
            records.append((rel, _record_hash(data), str(len(data))))
        record_name = f"{info.name}/RECORD"
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*records, (record_name, "", "")])
        zf.writestr(record_name, buf.getvalue())
    return target


def _closure(root: str) -> list[importlib.metadata.Distribution]:
    """Every distribution `root` needs, the extras its requirements name included (`mcp` needs
    `pyjwt[crypto]`, hence `cryptography`)."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo: list[tuple[str, str]] = [(root, "")]
    while todo:
        name, extra = todo.pop()
        dist = importlib.metadata.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if (key, extra) in done:
            continue
        done.add((key, extra))
        seen[key] = dist
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(req.name, wanted) for wanted in ("", *sorted(req.extras))]
    return [d for k, d in seen.items() if k != root]


def wheelhouse(out: Path) -> Path:
    """Our wheel and every runtime dependency's, for `pip install --no-index --find-links out`."""
    build_wheel(out)
    for dist in _closure(PACKAGE):
        repack(dist, out)
    return out


def npm_pack(out: Path, npm_env: dict[str, str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    _run(["npm", "pack", "--ignore-scripts", "--pack-destination", str(out)], cwd=REPO_ROOT, env=npm_env)
    [tarball] = out.glob(f"{PACKAGE}-*.tgz")
    return tarball


def tool_install(home: Path, wheels: Path) -> Path:
    """Install the wheel the way pipx does; returns the program's link in ~/.local/bin."""
    venv = home / ".local" / "share" / "pipx" / "venvs" / PACKAGE
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)])
    _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--find-links", str(wheels), PACKAGE],
        env=OFFLINE_PIP,
    )
    link = home / ".local" / "bin" / PACKAGE
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(venv / "bin" / PACKAGE)
    return link


def npm_wrapper(folder: Path, tarball: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "npm-with-local-tarball"
    npm = shutil.which("npm")
    assert npm, "npm is not on PATH"
    script.write_text(
        "#!/usr/bin/env bash\n"
        "# npm as Pi runs it, with the built tarball where the registry's pi-memory-bridge would come from\n"
        "args=()\n"
        'for a in "$@"; do case "$a" in\n'
        f'  {PACKAGE}|{PACKAGE}@*) args+=("{tarball}");;\n'
        '  *) args+=("$a");;\n'
        "esac; done\n"
        f'exec "{npm}" "${{args[@]}}" --offline\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script
