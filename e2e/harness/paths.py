"""Where the repository, the E2E fixtures and the installed tools live."""

from __future__ import annotations

from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
E2E_DIR: Final = REPO_ROOT / "e2e"
FIXTURES_DIR: Final = E2E_DIR / "fixtures"
# A directory whose package.json lists index.ts under "pi.extensions" (loaded with `-e <dir>`).
MARKER_EXT: Final = FIXTURES_DIR / "marker-ext"
VERSIONS_SH: Final = REPO_ROOT / "scripts" / "versions.sh"
SETUP_HINT: Final = "run scripts/setup.sh to install Node 22 and the Pi versions the E2E drives"
