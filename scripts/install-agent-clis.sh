#!/usr/bin/env bash
# Install the agent CLIs that the executor tests run for real (pinned npm versions) into a
# cache folder (npm's download cache inside it); quick and quiet when they are already
# there. The folder is $VALLY_AGENT_CLIS_DIR, else ~/.cache/vally/agent-clis, where
# tests/agents/clis.py looks too. Prints the folder holding the `claude` and `codex`
# programs.
set -euo pipefail
CLAUDE_CODE_VERSION="2.1.332"
CODEX_VERSION="0.171.0"
prefix="${VALLY_AGENT_CLIS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vally/agent-clis}"
command -v npm >/dev/null 2>&1 || { echo "install-agent-clis: npm (Node.js 18+) is needed" >&2; exit 1; }
installed() {  # installed PACKAGE VERSION: is exactly that version in the prefix?
  local manifest="$prefix/node_modules/$1/package.json"
  [ -f "$manifest" ] && node -e "process.exit(require('$manifest').version === '$2' ? 0 : 1)"
}
if ! installed @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" \
  || ! installed @openai/codex "$CODEX_VERSION"; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --cache "$prefix/.npm-cache" --no-audit --no-fund \
    --loglevel=error --save-exact \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2
fi
"$prefix/node_modules/.bin/claude" --version >/dev/null
"$prefix/node_modules/.bin/codex" --version >/dev/null
echo "$prefix/node_modules/.bin"
