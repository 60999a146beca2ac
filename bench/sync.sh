#!/usr/bin/env bash
# The sync benchmark of docs/benchmarks.md ("Sync"): a folder of FILES memory files (the SDKs'
# layout, FOLDERS folders, ~50 bytes each) synced with a fresh embedded store (release binary,
# /usr/bin/time): the first sync, a pass over the unchanged folder (no file read: size, time and
# inode against the baseline), one changed file, 1,000 changed files, and a second machine's
# first sync (a fresh folder pulling everything).
#
#   bash bench/sync.sh [FILES] [FOLDERS]     e.g. bash bench/sync.sh 20000 100
set -euo pipefail
files=${1:-20000}
folders=${2:-100}
source "$(dirname "$0")/lib.sh"

embedded_tree "$files" "$folders"
dir="$work/tree/memories"
timed "first sync of $files files" "$bin" sync "$dir"
timed "the next pass (reads back the files the first one wrote)" "$bin" sync "$dir"
timed "unchanged pass" "$bin" sync "$dir"
"$bin" sync "$dir" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print("  (unchanged pass: %d files compared, %d read, %s changed in the store, %d actions)" % (r["files"], r["hashed"], r.get("changed", "all listed:"), len(r["actions"])))'
echo "changed" >> "$dir/d00/f0.md"
timed "one changed file" "$bin" sync "$dir"
for i in $(seq 0 999); do echo "changed" >> "$dir/d$(printf %02d $((i % folders)))/f$i.md"; done
timed "1,000 changed files" "$bin" sync "$dir"
mkdir -p "$work/second"
timed "a second machine's first sync (pulls $files files)" "$bin" sync "$work/second"
