#!/usr/bin/env bash
# Two builds of `contextq-server` compared on PostgreSQL, or on SQLite when the first argument
# is `sqlite`, in turn: one command trace (default 5,000 commands) through `contextq-memory exec`
# against each build's `serve` on a fresh database of the given server (loopback) or a fresh
# SQLite file, ROUNDS times each (default 2). Prints one line per
# run: the build, the loop's seconds, and µs per command by command. A server given as
# `BINARY?QUERY` gets `?QUERY` on its database URL (e.g. `...?sslmode=disable` against the same
# binary without it: what TLS to the database costs). Build the two servers
# first (e.g. `git stash; cargo build --release -p contextq-server; cp target/release/contextq-server
# /tmp/server-a; git stash pop; ...`).
#
#   bash bench/server-ab.sh POSTGRES_ADMIN_URL|sqlite SERVER_A SERVER_B [COMMANDS] [ROUNDS]
set -euo pipefail
admin_url=${1:?usage: bash bench/server-ab.sh POSTGRES_ADMIN_URL|sqlite SERVER_A SERVER_B [COMMANDS] [ROUNDS]}
servers=("${2:?a server binary}" "${3:?a second server binary}")
n=${4:-5000}
rounds=${5:-2}
source "$(dirname "$0")/lib.sh"

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-bench -p contextq-memory-cli
bin="$root/target/release"
"$bin/contextq-bench" trace --commands "$n" --out "$work/trace.jsonl" 2> /dev/null

summary='
import json, sys
t = json.load(sys.stdin)
per = " ".join("%s %.0f" % (k, v["seconds"] / v["count"] * 1e6) for k, v in sorted(t["by_command"].items()))
print("%s: %.3f s; µs a command: %s" % (sys.argv[1], t["seconds"], per))'
for round in $(seq 1 "$rounds"); do
  for s in "${servers[@]}"; do
    binary=${s%%\?*}
    query=${s#"$binary"}
    if [ "$admin_url" = sqlite ]; then
      rm -rf "$work/ab.db"*
      url="sqlite:$work/ab.db"
    else
      scratch_database "$admin_url" "cqab_${round}"
    fi
    url="$url$query"
    key=$("$binary" admin --database-url "$url" bootstrap --tenant t --plan unlimited --workspace ws 2> /dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')
    serve "$binary" serve --database-url "$url" --listen 127.0.0.1:0
    CONTEXT_API_URL="$server" CONTEXT_API_KEY="$key" "$bin/contextq-memory" exec --timing --workspace ws \
      < "$work/trace.jsonl" > /dev/null 2> "$work/timing"
    kill "$server_pid"
    wait "$server_pid" 2> /dev/null || true
    server_pid=""
    if [ -n "$scratch_db" ]; then
      psql -q "$admin" -c "DROP DATABASE $scratch_db WITH (FORCE)" > /dev/null
      scratch_db=""
    fi
    tail -n 1 "$work/timing" | python3 -c "$summary" "$s"
  done
done
