#!/usr/bin/env bash
# Install and start the services the tests need: a Docker engine, a static busybox (tests
# build their images FROM scratch with it; no registry is reachable), and the distribution's
# own python3 with venv (the README's set-up is tested with it).
set -euo pipefail
if ! command -v dockerd >/dev/null 2>&1 || [ ! -x /bin/busybox ] \
  || ! /usr/bin/python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    docker.io busybox-static python3 python3-venv >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  (dockerd >/tmp/dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
fi
docker info >/dev/null 2>&1 || { echo "dockerd did not start"; tail -50 /tmp/dockerd.log; exit 1; }
