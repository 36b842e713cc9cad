#!/usr/bin/env bash
# Install vally with its dev dependencies and the example plugins into a virtual
# environment, then run every check: ruff, mypy (strict) on the packages, the
# import-linter contracts and the test suite. Arguments are passed to pytest.
#
# The environment is the active one ($VIRTUAL_ENV) when there is one, else $VALLY_TEST_VENV,
# else .venv in the repository (created with `python3 -m venv` on first use). It is
# hermetic: it must not see the system's site-packages, so a module the code imports but
# no extra declares fails here as it would on a new machine, instead of being found among
# what the system happens to have; the script refuses an environment that sees them.
# Nothing is installed anywhere else.
#
# Reruns are fast: once the installs succeed, the script records a hash of what it
# installed from (pyproject.toml, setup.py, the example plugins' pyproject.toml, the extras
# and the Python version) in the environment, and skips the installs while it matches. pip
# keeps its downloads and built wheels in $PIP_CACHE_DIR (default ~/.cache/pip), so a new
# environment is filled from there instead of the network.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="dev,mcp,copilot,serve"
STAMP_NAME="vally-test-requirements.sha256"
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

sees_system_packages() {  # sees_system_packages VENV: does its pyvenv.cfg include them?
  grep -Eiq '^[[:space:]]*include-system-site-packages[[:space:]]*=[[:space:]]*true' \
    "$1/pyvenv.cfg"
}

if [ -n "${VIRTUAL_ENV:-}" ]; then
  venv="$VIRTUAL_ENV"
  origin="the active virtual environment (\$VIRTUAL_ENV)"
else
  venv="${VALLY_TEST_VENV:-.venv}"
  origin="the test environment"
  if [ ! -e "$venv" ]; then
    if ! python3 -m venv "$venv"; then
      rm -rf "$venv"
      echo "error: cannot create a virtual environment in $venv with python3 -m venv." >&2
      echo "  On Debian or Ubuntu install it with: sudo apt-get install python3-venv" >&2
      echo "  or activate a virtual environment of your own and run this script again." >&2
      exit 1
    fi
  fi
fi
if [ ! -f "$venv/pyvenv.cfg" ] || [ ! -x "$venv/bin/python" ]; then
  echo "error: $origin $venv is not a virtual environment (no pyvenv.cfg or bin/python)." >&2
  echo "  Remove it, or point VALLY_TEST_VENV at another folder, and run this script again." >&2
  exit 1
fi
if sees_system_packages "$venv"; then
  echo "error: $origin $venv sees the system's site-packages" >&2
  echo "  (include-system-site-packages = true in $venv/pyvenv.cfg), so a module the code" >&2
  echo "  imports but no extra declares would pass here and fail on a new machine." >&2
  echo "  Deactivate it, or remove it (rm -rf $venv) and run this script again: it makes a" >&2
  echo "  new one without them (pip's cache makes the reinstall quick)." >&2
  exit 1
fi
venv="$(cd "$venv" && pwd)"  # absolute: PATH entries are read from every working folder
python="$venv/bin/python"
export PATH="$venv/bin:$PATH"

examples=()
for example in plugins/examples/*/; do
  if [ -f "$example/pyproject.toml" ]; then
    examples+=("$example")
  fi
done
requirements_hash() {  # what the installs below depend on, hashed
  {
    echo "extras: $EXTRAS"
    "$python" -c "import sys; print(sys.version)"
    for file in pyproject.toml setup.py "${examples[@]/%/pyproject.toml}"; do
      echo "== $file"
      cat "$file"
    done
  } | sha256sum | cut -d' ' -f1
}
stamp="$venv/$STAMP_NAME"
wanted="$(requirements_hash)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$wanted" ]; then
  rm -f "$stamp"  # written again only once every install below has succeeded
  "$python" -m pip install -q -e ".[$EXTRAS]"
  editable=()
  for example in "${examples[@]}"; do
    editable+=(-e "$example")
  done
  "$python" -m pip install -q --no-deps "${editable[@]}"
  echo "$wanted" >"$stamp"
fi

"$python" -m ruff check .
# mypy --strict over the kernel, the built-ins, the history package, the comparison package,
# the authoring commands, vally grade, vally experiment, the backends and the Ray runner (source roots in
# pyproject).
"$python" -m mypy -p vally -p vally_builtin -p vally_serve -p vally_compare -p vally_authoring \
  -p vally_regrade -p vally_experiment -p vally_backends -p vally_ray
"$python" -c "from importlinter.cli import lint_imports_command as c; c()"
"$python" -m pytest "$@"
