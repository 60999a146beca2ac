#!/usr/bin/env bash
# The backup benchmark of docs/benchmarks.md ("Backup and restore"): FILES memory files imported
# into a fresh embedded store (release binaries), then `contextq-server admin backup` of its
# SQLite database and `admin restore` of that backup into a new one (which verifies the audit
# log with its key), each timed, with the sizes of the database and the backup. The database
# as the import left it: nothing tuned, nothing vacuumed beforehand.
#
#   bash bench/backup.sh [FILES] [FOLDERS]     e.g. bash bench/backup.sh 100000 100
set -euo pipefail
files=${1:-20000}
folders=${2:-100}
source "$(dirname "$0")/lib.sh"

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-server
server_bin="$root/target/release/contextq-server"
imported_tree "$files" "$folders"
db="sqlite:$work/data/contextq.db"
key="$work/data/audit.key"
timed "backup of $files files" "$server_bin" admin --database-url "$db" --audit-key-file "$key" \
  backup --out "$work/store.backup"
timed "restore (and verify) of $files files" "$server_bin" admin \
  --database-url "sqlite:$work/restored.db" --audit-key-file "$key" restore "$work/store.backup"
du -b "$work/data/contextq.db" "$work/store.backup" "$work/restored.db" |
  awk '{printf "%s: %.1f MB\n", $2, $1 / 1e6}' | sed "s|$work/||"
