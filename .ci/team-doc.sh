#!/usr/bin/env bash
# Runs docs/team.md as its reader would, top to bottom: every block fenced as ```sh, in order,
# in this one shell (set -euo pipefail), with this checkout's binaries first on PATH, against
# the PostgreSQL on 127.0.0.1 whose superuser password is in PGPASSWORD (CI's: postgres). The
# database and role get names of this script's own, dropped before and after, so that it never
# touches a database of yours; its files go to a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CONTEXTQ_BIN_DIR:-$PWD/target/debug}
if [ ! -x "$bin/contextq-server" ] || [ ! -x "$bin/contextq-memory" ]; then
  cargo build -p contextq-server -p contextq-memory-cli --all-features
fi
export PATH="$bin:$PATH"
export PGPASSWORD=${PGPASSWORD:-postgres}
export DB_NAME=cqdoc_team DB_ROLE=cqdoc_team DB_HOST=127.0.0.1
CONF=$(mktemp -d)
export CONF
superuser() { PGHOST=$DB_HOST PGUSER=postgres psql -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
drop_all() {
  superuser -c "DROP DATABASE IF EXISTS ${DB_NAME}_restored WITH (FORCE)" \
    -c "DROP DATABASE IF EXISTS $DB_NAME WITH (FORCE)" -c "DROP ROLE IF EXISTS $DB_ROLE"
}
cleanup() {
  local status=$?
  # shellcheck disable=SC2046
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    echo "docs/team.md failed (exit $status); the servers' logs:" >&2
    tail -n 20 "$CONF"/*.log >&2 2>/dev/null || true
  fi
  drop_all >/dev/null 2>&1 || true
  rm -rf "$CONF"
  exit "$status"
}
trap cleanup EXIT
drop_all
script=$CONF/team.sh
# Each block announced by the heading it is under (never echoed itself: it handles keys).
awk '/^## / {section = $0} /^```sh$/ {on = 1; n++; printf "echo \"== block %d (%s)\"\n", n, substr(section, 4); next} /^```/ {on = 0} on' docs/team.md > "$script"
blocks=$(grep -c '^```sh$' docs/team.md)
echo "docs/team.md: running its $blocks sh blocks ($(wc -l < "$script") lines)"
# shellcheck disable=SC1090
source "$script"
echo "docs/team.md: every block ran"
