"""`python -m pi_memory_bridge.cli`: the same entry as the console script."""

import sys

from pi_memory_bridge.cli._main import main

sys.exit(main())
