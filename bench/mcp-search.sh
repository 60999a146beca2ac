#!/usr/bin/env bash
# memory_search as Claude reaches it over MCP (stdio) on the embedded default: FILES generated
# notes (40 words each from a vocabulary of 5,000 drawn log-uniformly, a ticket id and a version,
# as `contextq-bench search` writes them) imported into a fresh data directory, then QUERIES
# `tools/call memory_search` of each kind, one at a time, timed from the request line written
# to the answer line read. The database is as `import` and the server leave it: nothing else
# runs on it. Usage: bash bench/mcp-search.sh [FILES] [QUERIES] (defaults 20000 and 200); it
# uses target/release/contextq-memory (cargo build --release -p contextq-memory-cli).
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-20000}
queries=${2:-200}
bin=target/release/contextq-memory
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The vocabulary, shared by the two programs below.
cat > "$work/vocabulary.py" <<'EOF'
C = "b d f g k l m n p r s t v z".split()
V = "a e i o u".split()


def word(k):
    out, k = "", k + 70
    while k > 0:
        out += C[k % len(C)]; k //= len(C)
        out += V[k % len(V)]; k //= len(V)
    return out
EOF
export PYTHONPATH="$work"
python3 - "$work/tree" "$files" <<'EOF'
import os, random, sys
from vocabulary import word
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    rng = random.Random(i)
    words = [word(max(int(5000 ** rng.random()) - 1, 0)) for _ in range(40)]
    d = os.path.join(root, "memories", "notes", f"d{i % 500:03}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"n{i:06}.md"), "w") as f:
        f.write(f"# Note {i}\n{' '.join(words[:20])}\nTicket TICKET-{i} shipped in v1.{i % 50}.{i % 7}.\n{' '.join(words[20:])}\n")
EOF
start=$(date +%s.%N)
"$bin" --data-dir "$work/data" import "$work/tree" > /dev/null
echo "imported $files files in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
python3 - "$bin" "$work/data" "$files" "$queries" <<'EOF'
import json, random, subprocess, sys, time
bin, data, n, queries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = subprocess.Popen([bin, "--data-dir", data, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
ids = iter(range(1, 10**9))
def call(method, params, notify=False):
    msg = {"jsonrpc": "2.0", "method": method, "params": params}
    if not notify:
        msg["id"] = next(ids)
    p.stdin.write(json.dumps(msg) + "\n"); p.stdin.flush()
    if notify:
        return None
    while True:
        line = json.loads(p.stdout.readline())
        if line.get("id") == msg["id"]:
            return line
call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
call("notifications/initialized", {}, notify=True)
from vocabulary import word
rng = random.Random(7)
kinds = [
    ("an identifier (1 hit)", lambda: f"TICKET-{rng.randrange(n)}"),
    ("two words", lambda: f"{word(rng.randrange(20, 200))} {word(rng.randrange(20, 200))}"),
    ("a common word", lambda: word(rng.randrange(5))),
    ("a prefix*", lambda: word(rng.randrange(50, 500))[:3] + "*"),
    ("a word in no file", lambda: f"zq{rng.randrange(10**6)}"),
]
print(f"\nmemory_search over MCP stdio, embedded default, {n} files: p50 / p99 ms over {queries} calls of each kind\n")
print("| " + " | ".join(k for k, _ in kinds) + " |")
print("|" + "---|" * len(kinds))
cells = []
for _, make in kinds:
    lat = []
    for _ in range(queries):
        q = make()
        s = time.perf_counter()
        r = call("tools/call", {"name": "memory_search", "arguments": {"query": q}})
        lat.append((time.perf_counter() - s) * 1000)
        assert "result" in r, r
    lat.sort()
    cells.append(f"{lat[len(lat) // 2]:.2f} / {lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.2f}")
print("| " + " | ".join(cells) + " |")
p.stdin.close(); p.wait(timeout=30)
EOF
