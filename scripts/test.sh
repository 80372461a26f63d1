#!/usr/bin/env bash
# One command runs every check: lint + types (Python and the shim against both Pi versions),
# the shim's own tests, then pytest (unit tests and the real-Pi E2E). Needs scripts/setup.sh first.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/versions.sh
source scripts/versions.sh
if [ ! -x .venv/bin/python ] || [ ! -x "$NODE22_BIN" ]; then
  echo "missing tools: run scripts/setup.sh first" >&2
  exit 1
fi
export PATH="$ROOT/.venv/bin:$(dirname "$NODE22_BIN"):$PATH"

echo "== ruff"
ruff check src tests e2e bench
echo "== mypy (strict) src/"
mypy src
echo "== shim: typecheck against each Pi version"
for v in "${PI_VERSIONS[@]}"; do
  echo "   pi $v"
  (cd extension-shim && node node_modules/typescript/bin/tsc -p "tsconfig.pi-$v.json")
done
echo "== shim: unit tests"
node --test 'extension-shim/test/*.test.ts'
echo "== pytest"
# exit code 5 (no tests collected) is a failure like any other non-zero code
python -m pytest -q -p no:cacheprovider "$@"
