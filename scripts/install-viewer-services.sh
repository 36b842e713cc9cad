#!/usr/bin/env bash
# Install and start what the history store and dashboard tests need: a PostgreSQL server on
# 127.0.0.1 (run as the unprivileged postgres user, trust auth on loopback, a fresh cluster
# in a temp folder) and Debian's Chromium with its ChromeDriver for the browser tests.
#
# Tests find the server through VALLY_TEST_POSTGRES_URL; the defaults below match what
# .ci/run exports. Re-running is safe: a server already answering is kept.
set -euo pipefail
PORT="${VALLY_TEST_POSTGRES_PORT:-55432}"
DB="${VALLY_TEST_POSTGRES_DB:-vally_test}"
DATA="${VALLY_TEST_POSTGRES_DATA:-/tmp/vally-test-postgres}"

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

BIN="$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")"
as_postgres() { runuser -u postgres -- "$@"; }

if as_postgres "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
  echo "PostgreSQL already answers on 127.0.0.1:$PORT"
else
  rm -rf "$DATA"
  install -d -o postgres -g postgres -m 700 "$DATA"
  as_postgres "$BIN/initdb" -D "$DATA" -U postgres --auth=trust >/dev/null
  as_postgres "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 start \
    -o "-h 127.0.0.1 -p $PORT -k $DATA -c max_connections=100 -c fsync=off" >/dev/null
fi
if ! as_postgres "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
  as_postgres "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB"
fi
echo "PostgreSQL ready: postgresql://postgres@127.0.0.1:$PORT/$DB"
chromium --version
chromedriver --version
