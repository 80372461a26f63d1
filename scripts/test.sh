#!/usr/bin/env bash
# One command runs every check: lint + types (Python and the shim against both Pi versions),
# the shim's own tests, then pytest (unit tests and the real-Pi E2E). Needs scripts/setup.sh first.
#
# Most of the suite waits on processes (Pi, sidecars, timers), so it runs in parallel:
#   1. the static checks in the background (one at a time), beside
#   2. pytest's parallel phase (pytest-xdist, PYTEST_WORKERS processes, work stealing), then
#   3. the shim's own tests (node --test), then
#   4. pytest's serial phase: the tests marked `serial` (they compare a Pi run's wall time with
#      and without memory, so they run alone on the machine).
# Coverage (line and branch) of the test processes is printed at the end. Arguments go to both
# pytest phases (`scripts/test.sh e2e/test_e2e_recall.py -x`).
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
# one more worker than cores: the tests mostly wait, and more made real-Pi recall miss its deadline
WORKERS=${PYTEST_WORKERS:-$(($(nproc) + 1))}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/pmb-test.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

# One after another, beside pytest (which takes far longer). The shim's own tests time child
# processes: they run after the parallel phase, on a machine they do not share with it.
static_checks() {
  local failed=0
  run_check() { # name command...
    local name=$1
    shift
    if "$@" >"$OUT/$name.log" 2>&1; then
      echo "ok     $name" >>"$OUT/static.summary"
    else
      echo "FAILED $name" >>"$OUT/static.summary"
      failed=1
    fi
  }
  run_check ruff ruff check src tests e2e bench
  run_check mypy mypy src
  for v in "${PI_VERSIONS[@]}"; do
    run_check "tsc-pi-$v" node extension-shim/node_modules/typescript/bin/tsc -p "extension-shim/tsconfig.pi-$v.json"
  done
  return $failed
}

echo "== static checks (ruff, mypy --strict src/, tsc against each Pi version) in the background"
static_checks &
STATIC_PID=$!

# Coverage nearly doubles the CPU time of the in-process unit tests (measured: 24 -> 43 s user for
# 552 of them); SUITE_COVERAGE=0 skips it for a quicker loop.
COV=()
if [ "${SUITE_COVERAGE:-1}" != 0 ]; then
  COV=(--cov=pi_memory_bridge --cov-branch --cov-report=)
fi
run_phase() { # name, pytest args...
  local name=$1 rc=0
  shift
  COVERAGE_FILE="$OUT/coverage.$name" python -m pytest -q -p no:cacheprovider ${COV[@]+"${COV[@]}"} \
    --junitxml="$OUT/junit.$name.xml" "$@" || rc=$?
  echo "$rc" >"$OUT/rc.$name"
}

echo "== pytest, parallel phase ($WORKERS workers)"
run_phase parallel -n "$WORKERS" --dist worksteal -m "not serial" "$@"

STATIC_RC=0
wait "$STATIC_PID" || STATIC_RC=$?
echo "== static checks"
cat "$OUT/static.summary"
for log in "$OUT"/*.log; do
  name=$(basename "$log" .log)
  if grep -q "^FAILED $name\$" "$OUT/static.summary"; then
    echo "--- $name"
    cat "$log"
  fi
done

echo "== shim: unit tests"
SHIM_RC=0
node --test 'extension-shim/test/*.test.ts' >"$OUT/shim-tests.log" 2>&1 || SHIM_RC=$?
grep -E '^# (tests|pass|fail)' "$OUT/shim-tests.log" || true
if [ "$SHIM_RC" -ne 0 ]; then
  cat "$OUT/shim-tests.log"
  STATIC_RC=1
fi

echo "== pytest, serial phase (wall-time comparisons, alone on the machine)"
run_phase serial -n 0 -m serial "$@"

python scripts/suite_summary.py "$OUT" "$STATIC_RC"
