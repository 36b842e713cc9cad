#!/usr/bin/env bash
# Install the Ray runner's extra (vally[ray], a pinned Ray) for the distributed-runner tests;
# quick when it is already installed (pip keeps its download cache in ~/.cache/pip). The
# tests run the cluster inside a network namespace, so they also need `ip` (iproute2).
set -euo pipefail
cd "$(dirname "$0")/.."
RAY_VERSION="2.60.0"
if ! python3 -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  python3 -m pip install -q -e '.[ray]'
fi
if ! command -v ip >/dev/null 2>&1; then
  apt-get install -y -qq iproute2 >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
fi
python3 -c "import ray; print('ray', ray.__version__)"
