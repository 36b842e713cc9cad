#!/usr/bin/env bash
# Install the GitHub Copilot CLI (npm @github/copilot, pinned) and its Python SDK
# (github-copilot-sdk, pinned, through the 'copilot' extra), then print the CLI's path.
#
#   export COPILOT_CLI_PATH="$(bash scripts/install-copilot.sh)"
#
# The CLI goes to $VALLY_TOOLS_DIR/copilot-<version> (default ~/.cache/vally-tools) with
# npm's download cache in $VALLY_TOOLS_DIR/npm-cache; a second run finds both installed
# and only prints the path. Node/npm are needed for the install only.
set -euo pipefail
CLI_VERSION="1.0.102"
SDK_VERSION="1.0.27"
cd "$(dirname "$0")/.."
tools="${VALLY_TOOLS_DIR:-$HOME/.cache/vally-tools}"
prefix="$tools/copilot-$CLI_VERSION"
loader="$prefix/node_modules/@github/copilot/npm-loader.js"
if [ ! -f "$loader" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
    else
      echo "install-copilot: npm is needed to install the CLI (e.g. apt-get install nodejs npm)" >&2
      exit 1
    fi
  fi
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --cache "$tools/npm-cache" --no-audit --no-fund --loglevel=error \
    "@github/copilot@$CLI_VERSION" >&2
fi
if ! python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('github-copilot-sdk') != '$SDK_VERSION')" 2>/dev/null; then
  python3 -m pip install -q "github-copilot-sdk==$SDK_VERSION" >&2
fi
native="$(ls -d "$prefix"/node_modules/@github/copilot-*/copilot 2>/dev/null | head -n1 || true)"
if [ -z "$native" ] || [ ! -x "$native" ]; then
  echo "install-copilot: no native Copilot CLI for this platform under $prefix" >&2
  exit 1
fi
echo "$native"
