#!/usr/bin/env bash
# The import and export benchmark of docs/benchmarks.md ("Import and export of a large memory
# directory"): writes FILES memory files in the SDKs' layout (DIR/memories/dNN/fN.md, FOLDERS
# folders, one line of about 50 bytes each), imports them into a fresh embedded store, imports
# them again (everything identical), and exports them to an empty directory, each timed with
# /usr/bin/time (release binary).
#
#   bash bench/import-tree.sh [FILES] [FOLDERS]     e.g. bash bench/import-tree.sh 100000 100
set -euo pipefail
files=${1:-20000}
folders=${2:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-memory-cli
bin="$root/target/release/contextq-memory"
python3 - "$work/tree" "$files" "$folders" <<'EOF'
import os, sys
tree, files, folders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(folders):
    os.makedirs(f"{tree}/memories/d{d:02}", exist_ok=True)
for i in range(files):
    with open(f"{tree}/memories/d{i % folders:02}/f{i}.md", "w") as f:
        f.write(f"note {i}: a fact worth keeping across sessions.\n")
EOF
export CONTEXTQ_MEMORY_DATA_DIR="$work/data"
unset CONTEXT_API_URL CONTEXT_API_KEY
timed() { # LABEL COMMAND...
  /usr/bin/time -f "$1: %e s" "${@:2}" > /dev/null
}
timed "import of $files files in $folders folders" "$bin" import "$work/tree"
timed "re-import (everything identical)" "$bin" import "$work/tree"
timed "export" "$bin" export --out "$work/out"
