#!/usr/bin/env bash
# The Nagle timing of docs/benchmarks.md ("Found on the way: sqlx 0.9.0 left Nagle's algorithm
# on"): one file created, then INSERTS `insert` commands into it (the file grows a line each,
# so each write's batch to PostgreSQL grows past one socket buffer), through
# `contextq-memory exec --timing` against a separate `contextq-server serve` on a fresh database
# of the given PostgreSQL server (loopback). A statement that waits for PostgreSQL's delayed ACK
# shows as several times the total. CONTEXTQ_BENCH_SERVER_BIN picks another server binary (for
# example one built with `cargo update -p sqlx --precise 0.9.0`), to compare in turn.
#
#   bash bench/nagle.sh POSTGRES_ADMIN_URL [INSERTS]
#   e.g. bash bench/nagle.sh postgres://postgres:postgres@127.0.0.1:5432/postgres 800
set -euo pipefail
inserts=${2:-800}
source "$(dirname "$0")/lib.sh"
scratch_database "${1:?usage: bash bench/nagle.sh POSTGRES_ADMIN_URL [INSERTS]}" cqbench_nagle

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-memory-cli -p contextq-server
bin="$root/target/release"
server_bin=${CONTEXTQ_BENCH_SERVER_BIN:-$bin/contextq-server}
key=$("$server_bin" admin --database-url "$url" bootstrap --tenant nagle --plan unlimited --workspace ws 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
serve "$server_bin" serve --database-url "$url" --listen 127.0.0.1:0
python3 -c "
import json
print(json.dumps({'command': 'create', 'path': '/memories/log.md', 'file_text': 'log\n'}))
for i in range($inserts):
    print(json.dumps({'command': 'insert', 'path': '/memories/log.md', 'insert_line': i + 1,
                      'insert_text': f'line {i}: something that happened during the session, worth keeping.'}))
" > "$work/trace.jsonl"
CONTEXT_API_URL="$server" CONTEXT_API_KEY="$key" "$bin/contextq-memory" exec --timing --workspace ws \
  < "$work/trace.jsonl" > "$work/out.jsonl" 2> "$work/timing"
errors=$(grep -c '"is_error":true' "$work/out.jsonl" || true)
python3 - "$work/timing" "$inserts" "$errors" "$server_bin" <<'EOF'
import json, sys
t = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(f"{sys.argv[4]}: create + {sys.argv[2]} inserts into one file: {t['seconds']:.2f} s ({sys.argv[3]} errors)")
EOF
