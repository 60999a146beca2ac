# shellcheck shell=bash
# Steps the bench scripts share (sourced, not run): a scratch directory, and a scratch
# database and a server when asked for, all removed on exit; a tree of memory files; a timed
# command. Sets $root (the repository) and $work (the scratch directory).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
server_pid=""
scratch_db=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$scratch_db" ]; then
    psql -q "$admin" -c "DROP DATABASE IF EXISTS $scratch_db WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# scratch_database ADMIN_URL PREFIX: a fresh database on that server, dropped on exit; sets
# $admin and $url (the new database's URL).
scratch_database() {
  admin=$1
  scratch_db="${2}_$$"
  url="${admin%/*}/$scratch_db"
  psql -q "$admin" -c "CREATE DATABASE $scratch_db" >/dev/null
}

# serve COMMAND...: starts a server that prints its URL on its first line, stopped on exit;
# sets $server (the URL).
serve() {
  "$@" > "$work/serve.out" 2>/dev/null &
  server_pid=$!
  for _ in $(seq 1 100); do
    [ -s "$work/serve.out" ] && break
    sleep 0.1
  done
  server=$(head -n 1 "$work/serve.out" | tr -d '[:space:]')
}

# write_tree DIR FILES FOLDERS [SUBDIR]: FILES memory files in the SDKs' layout,
# DIR/memories/[SUBDIR/]dNN/fN.md, spread over FOLDERS folders, one line of about 50 bytes each,
# or, with $TREE_BYTES set, about that many bytes of prose each (words drawn from a vocabulary
# of 5,000, seeded: the same tree every run), so that the search index has real work.
write_tree() {
  python3 - "$@" <<'EOF'
import os, random, sys
tree, files, folders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = int(os.environ.get("TREE_BYTES", "0"))
base = os.path.join(tree, "memories", *sys.argv[4:5])
rng = random.Random(7)
letters = "abcdefghijklmnopqrstuvwxyz"
vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(5000)]
for d in range(folders):
    os.makedirs(f"{base}/d{d:02}", exist_ok=True)
for i in range(files):
    text = f"note {i}: a fact worth keeping across sessions.\n"
    while len(text) < size:
        line = " ".join(rng.choice(vocabulary) for _ in range(12))
        text += line[: max(1, size - len(text) - 1)] + "\n"
    with open(f"{base}/d{i % folders:02}/f{i}.md", "w") as f:
        f.write(text)
EOF
}

# embedded_tree FILES FOLDERS [SUBDIR]: the release CLI built ($bin), a memory tree written in
# $work/tree (write_tree), and a fresh embedded store chosen for it ($work/data).
embedded_tree() {
  cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-memory-cli
  bin="$root/target/release/contextq-memory"
  write_tree "$work/tree" "$@"
  export CONTEXTQ_MEMORY_DATA_DIR="$work/data"
  unset CONTEXT_API_URL CONTEXT_API_KEY
}

# imported_tree FILES FOLDERS: embedded_tree, then the tree imported into the fresh store, timed.
imported_tree() {
  embedded_tree "$1" "$2"
  timed "import of $1 files in $2 folders" "$bin" import "$work/tree"
}

# timed LABEL COMMAND...: runs COMMAND, its output discarded, and prints "LABEL: N s".
timed() {
  /usr/bin/time -f "$1: %e s" "${@:2}" > /dev/null
}
