#!/usr/bin/env bash
# Install the Ray runner's extra (vally[ray], a pinned Ray) for the distributed-runner tests
# into the Python environment of $PYTHON (default: python3 on PATH, the active virtual
# environment's when there is one); quick when it is already installed (pip keeps its
# download cache in ~/.cache/pip). The tests run the cluster inside a network namespace, so
# they also need `ip` (iproute2).
set -euo pipefail
cd "$(dirname "$0")/.."
RAY_VERSION="2.60.0"
python="${PYTHON:-python3}"
if ! "$python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  "$python" -m pip install -q -e '.[ray]'
fi
if ! command -v ip >/dev/null 2>&1; then
  apt-get install -y -qq iproute2 >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
fi
"$python" -c "import ray; print('ray', ray.__version__)"
