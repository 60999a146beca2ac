#!/usr/bin/env bash
# The reference comparison on PostgreSQL: one command trace (default 5,000 commands) through
# Anthropic's Python SDK memory tool (local files) and through `contextq-memory exec` against a
# separate `contextq-server serve` on PostgreSQL (a fresh database on the given server, loopback,
# `synchronous_commit` as the server has it), at two tenant sizes: an empty tenant, and one that
# already holds PRELOAD files (default 10,000) in another of its workspaces (so that the trace's
# directory views show the same entries). The database is measured as the server leaves it: no
# VACUUM, ANALYZE or CHECKPOINT of the script's own (autovacuum and PostgreSQL's checkpoints
# run when they would in production). Prints a Markdown table (seconds and ratio to Python,
# each loop alone) and the time per command.
#
#   bash bench/references-postgres.sh POSTGRES_ADMIN_URL [COMMANDS] [PRELOAD]
#   e.g. bash bench/references-postgres.sh postgres://postgres:postgres@127.0.0.1:5432/postgres
set -euo pipefail
n=${2:-5000}
preload=${3:-10000}
source "$(dirname "$0")/lib.sh"
scratch_database "${1:?usage: bash bench/references-postgres.sh POSTGRES_ADMIN_URL [COMMANDS] [PRELOAD]}" cqbench_refs

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-bench -p contextq-memory-cli -p contextq-server
bin="$root/target/release"
"$bin/contextq-bench" trace --commands "$n" --out "$work/trace.jsonl"

echo "installing the Python SDK into $work (throwaway)" >&2
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q anthropic
cp "$root/bench/ref_python.py" "$work/"
"$work/venv/bin/python" "$work/ref_python.py" "$work/trace.jsonl" "$work/py" "$work/python.out" > "$work/python.timing"

# One tenant per size, each with its own key and workspace `ws`.
boot() { # NAME: prints "KEY TENANT_ID"
  "$bin/contextq-server" admin --database-url "$url" bootstrap --tenant "$1" --plan unlimited --workspace ws |
    python3 -c 'import json,sys; b=json.load(sys.stdin); print(b["apiKey"], b["tenantId"])'
}
read -r empty_key _ <<< "$(boot empty)"
read -r large_key large_tenant <<< "$(boot large)"
read -r after_key _ <<< "$(boot after)"
"$bin/contextq-server" admin --database-url "$url" create-workspace --tenant-id "$large_tenant" --slug bulk > /dev/null
serve "$bin/contextq-server" serve --database-url "$url" --listen 127.0.0.1:0
run() { # KEY NAME: the trace through the server as that tenant
  CONTEXT_API_URL="$server" CONTEXT_API_KEY="$1" "$bin/contextq-memory" exec --timing --workspace ws \
    < "$work/trace.jsonl" > "$work/$2.out" 2> "$work/$2.timing"
}
run "$empty_key" empty
echo "preloading $preload files into the second tenant" >&2
python3 -c "
import json
for i in range($preload):
    print(json.dumps({'command': 'create', 'path': f'/memories/bulk/d{i % 100}/f{i}.md', 'file_text': f'preloaded note {i}\n'}))
" | CONTEXT_API_URL="$server" CONTEXT_API_KEY="$large_key" "$bin/contextq-memory" exec --workspace bulk > /dev/null
run "$large_key" large
# A third tenant, empty, run after the load: tells the tenant's size from the database's.
run "$after_key" after

python3 "$root/bench/compare.py" "$work" \
  "python=Python SDK \`BetaLocalFilesystemMemoryTool\` (local files)" \
  "empty=\`ContextQStore\` on contextq-server/PostgreSQL, an empty tenant" \
  "large=\`ContextQStore\` on contextq-server/PostgreSQL, a tenant with $preload files in another workspace" \
  "after=\`ContextQStore\` on contextq-server/PostgreSQL, an empty tenant, after that load"
