"""The optional `ui` extra: which packages the inspector needs and how to install them.

Importable without them, so the CLI and `/tdai-memory-ui` can name the install command instead of
failing with an ImportError. Keep `UI_REQUIREMENTS` in step with pyproject's `ui` extra (a test
checks that they agree).
"""

from __future__ import annotations

import importlib.util
import shlex
import sys

# import name -> requirement as in pyproject's `ui` extra
UI_REQUIREMENTS: dict[str, str] = {
    "starlette": "starlette>=0.46",
    "uvicorn": "uvicorn>=0.34",
    "jinja2": "jinja2>=3.1",
    "python_multipart": "python-multipart>=0.0.20",
}


def missing_packages() -> list[str]:
    """Requirements of the extra whose package cannot be imported here."""
    return [req for module, req in UI_REQUIREMENTS.items() if importlib.util.find_spec(module) is None]


def install_command() -> str:
    """The command that installs the extra into the interpreter running this code."""
    reqs = " ".join(shlex.quote(r) for r in UI_REQUIREMENTS.values())
    return f"{shlex.quote(sys.executable)} -m pip install {reqs}"


def missing_message() -> str | None:
    missing = missing_packages()
    if not missing:
        return None
    return (
        "the memory inspector needs the optional 'ui' packages, which are not installed "
        f"({', '.join(missing)}). Install them with:\n  {install_command()}\n"
        "(or install pi-memory-bridge with its extra: pip install 'pi-memory-bridge[ui]')"
    )
