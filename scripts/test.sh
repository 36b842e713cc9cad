#!/usr/bin/env bash
# Install vally with its dev dependencies and the example plugins, then run every check:
# ruff, mypy (strict) on the three packages, the import-linter contracts and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[dev,mcp]'
for example in plugins/examples/*/; do
  if [ -f "$example/pyproject.toml" ]; then
    python3 -m pip install -q --no-deps -e "$example"
  fi
done
python3 -m ruff check .
# mypy --strict over the kernel, the built-ins and the backends (source roots in pyproject).
python3 -m mypy -p vally -p vally_builtin -p vally_backends -p vally_ray
lint-imports
python3 -m pytest "$@"
