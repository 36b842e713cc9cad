#!/usr/bin/env bash
# Install vally with its dev dependencies and the example plugins into a virtual
# environment, then run every check: ruff, mypy (strict) on the packages, the
# import-linter contracts and the test suite. Arguments are passed to pytest.
#
# The environment is the active one ($VIRTUAL_ENV) when there is one, else .venv in the
# repository (created on first use, with access to the system's packages so that what is
# already installed is not downloaded again). Nothing is installed anywhere else.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${VIRTUAL_ENV:-}" ]; then
  venv="$VIRTUAL_ENV"
else
  venv="${VALLY_TEST_VENV:-.venv}"
  if [ ! -x "$venv/bin/python" ]; then
    if ! python3 -m venv --system-site-packages "$venv"; then
      rm -rf "$venv"
      echo "error: cannot create a virtual environment in $venv with python3 -m venv." >&2
      echo "  On Debian or Ubuntu install it with: sudo apt-get install python3-venv" >&2
      echo "  or activate a virtual environment of your own and run this script again." >&2
      exit 1
    fi
  fi
fi
venv="$(cd "$venv" && pwd)"  # absolute: PATH entries are read from every working folder
python="$venv/bin/python"
export PATH="$venv/bin:$PATH"
"$python" -m pip install -q -e '.[dev,mcp,copilot,serve]'
for example in plugins/examples/*/; do
  if [ -f "$example/pyproject.toml" ]; then
    "$python" -m pip install -q --no-deps -e "$example"
  fi
done
"$python" -m ruff check .
# mypy --strict over the kernel, the built-ins, the history package, the comparison package,
# the authoring commands, vally grade, vally experiment, the backends and the Ray runner (source roots in
# pyproject).
"$python" -m mypy -p vally -p vally_builtin -p vally_serve -p vally_compare -p vally_authoring \
  -p vally_regrade -p vally_experiment -p vally_backends -p vally_ray
"$python" -c "from importlinter.cli import lint_imports_command as c; c()"
"$python" -m pytest "$@"
