"""Which packages the inspector needs and how to install them.

They are plain dependencies of the package, but an install can still lack them (a wheel installed
with `--no-deps`, a vendored copy): this module is importable without them, so the CLI and
`/tdai-memory-ui` name the install command instead of failing with an ImportError. Keep
`UI_REQUIREMENTS` in step with pyproject's dependencies (a test checks it).
"""

from __future__ import annotations

import importlib.util
import shlex
import sys

# import name -> requirement as in pyproject's dependencies
UI_REQUIREMENTS: dict[str, str] = {
    "starlette": "starlette>=0.46",
    "uvicorn": "uvicorn>=0.34",
    "jinja2": "jinja2>=3.1",
    "python_multipart": "python-multipart>=0.0.20",
}


def missing_packages() -> list[str]:
    """Requirements of the inspector whose package cannot be imported here."""
    return [req for module, req in UI_REQUIREMENTS.items() if importlib.util.find_spec(module) is None]


def install_command() -> str:
    """The command that installs them into the interpreter running this code."""
    reqs = " ".join(shlex.quote(r) for r in UI_REQUIREMENTS.values())
    return f"{shlex.quote(sys.executable)} -m pip install {reqs}"


def missing_message() -> str | None:
    missing = missing_packages()
    if not missing:
        return None
    return (
        "the memory inspector needs packages that this install of pi-memory-bridge lacks "
        f"({', '.join(missing)}). Install them with:\n  {install_command()}"
    )
