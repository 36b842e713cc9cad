#!/usr/bin/env bash
# Print the commands of the first ```bash block under the heading "## HEADING ..." of
# README.md, one a line (a line ending in a backslash joined with the next, as the shell
# reads them). .ci/run runs the README's commands through it, so CI runs what the README
# says, word for word.
#
#   bash scripts/readme-block.sh Quickstart
#   bash scripts/readme-block.sh 'Run the tests'
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -ne 1 ]; then
  echo "usage: bash scripts/readme-block.sh HEADING  (a '## HEADING' line of README.md)" >&2
  exit 2
fi
block="$(awk -v heading="## $1" '
  !found && ($0 == heading || index($0, heading " ") == 1) { found = 1; next }
  found && !inside && /^## / { exit }
  found && !inside && /^```bash$/ { inside = 1; next }
  inside && /^```$/ { exit }
  inside { print }
' README.md)"
if [ -z "$block" ]; then
  echo "error: README.md has no \`\`\`bash block under a '## $1' heading (before the next" >&2
  echo "  '## ' heading); .ci/run runs that block. Put the commands back, or change the" >&2
  echo "  heading .ci/run asks for." >&2
  exit 1
fi
printf '%s\n' "$block" | sed -e ':join' -e '/\\$/{N;s/\\\n//;b join' -e '}'
