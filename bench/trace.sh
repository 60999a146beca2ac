#!/usr/bin/env bash
# The trace benchmark (issue 52): one command trace (default 5,000 commands) through, in one run,
# Anthropic's Python SDK memory tool (local files; when its package installs), and this
# project's `contextq-memory exec` on the local store, on the embedded default, on a separate
# `contextq-server serve` on SQLite and, given a PostgreSQL admin URL, on PostgreSQL (a fresh
# database, loopback). Every store at its default durability, `synced`, named in each row. Then
# the floor of a durable write on each database in the same run (`contextq-bench floor`), and
# each store's writes as a ratio to it. The databases are measured as the server leaves them
# (no VACUUM, ANALYZE or checkpoint of the script's own). Prints Markdown tables.
#
#   bash bench/trace.sh [POSTGRES_ADMIN_URL|-] [COMMANDS]
#   e.g. bash bench/trace.sh postgres://postgres:postgres@127.0.0.1:5432/postgres
set -euo pipefail
pg=${1:--}
n=${2:-5000}
source "$(dirname "$0")/lib.sh"

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-bench -p contextq-memory-cli -p contextq-server
bin="$root/target/release"
"$bin/contextq-bench" trace --commands "$n" --out "$work/trace.jsonl"
stores=()

echo "installing the Python SDK into $work (throwaway)" >&2
if python3 -m venv "$work/venv" && "$work/venv/bin/pip" install -q anthropic; then
  cp "$root/bench/ref_python.py" "$work/"
  "$work/venv/bin/python" "$work/ref_python.py" "$work/trace.jsonl" "$work/py" "$work/python.out" > "$work/python.timing"
  stores+=("python=Python SDK \`BetaLocalFilesystemMemoryTool\` (local files)=as the SDK writes (no fsync)=")
else
  echo "the Python SDK did not install: its row is left out, and so are the ratios to it" >&2
fi

"$bin/contextq-memory" exec --timing --store "local:$work/local" < "$work/trace.jsonl" > "$work/local.out" 2> "$work/local.timing"
stores+=("local=\`LocalStore\` (\`--store local:DIR\`)=synced=")
CONTEXTQ_MEMORY_DATA_DIR="$work/data" env -u CONTEXT_API_URL "$bin/contextq-memory" exec --timing < "$work/trace.jsonl" > "$work/embedded.out" 2> "$work/embedded.timing"
stores+=("embedded=embedded default (contextq-server in process, SQLite)=synced=sqlite")

boot() { # DATABASE_URL: prints the key of a new tenant with workspace `ws`
  "$bin/contextq-server" admin --database-url "$1" bootstrap --tenant trace --plan unlimited --workspace ws |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])'
}
through_server() { # DATABASE_URL NAME: a server on that database, the trace through it
  local key
  key=$(boot "$1")
  serve "$bin/contextq-server" serve --database-url "$1" --listen 127.0.0.1:0
  CONTEXT_API_URL="$server" CONTEXT_API_KEY="$key" "$bin/contextq-memory" exec --timing --workspace ws \
    < "$work/trace.jsonl" > "$work/$2.out" 2> "$work/$2.timing"
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
through_server "sqlite:$work/server.db" server-sqlite
stores+=("server-sqlite=\`contextq-server\` on SQLite (a separate process, loopback HTTP)=synced=sqlite")

floor_args=()
if [ "$pg" != "-" ]; then
  scratch_database "$pg" cqbench_trace
  through_server "$url" server-postgres
  stores+=("server-postgres=\`contextq-server\` on PostgreSQL (loopback)=synced (synchronous_commit on)=postgres")
  floor_args=(--postgres-url "$pg")
fi

"$bin/contextq-bench" floor --writes 2000 "${floor_args[@]}" > "$work/floor.md"
python3 "$root/bench/trace.py" "$work" "${stores[@]}"
