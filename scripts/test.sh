#!/usr/bin/env bash
# Install vally with its dev dependencies and the example plugins, then run every check:
# ruff, mypy on core/, the import-linter contracts and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[dev,mcp]'
for example in plugins/examples/*/; do
  if [ -f "$example/pyproject.toml" ]; then
    python3 -m pip install -q --no-deps -e "$example"
  fi
done
python3 -m ruff check .
# mypy checks the kernel under its import name (core/ installs as the package vally).
mkdir -p build/mypy && ln -sfn ../../core build/mypy/vally
MYPYPATH=build/mypy python3 -m mypy -p vally
lint-imports
python3 -m pytest "$@"
