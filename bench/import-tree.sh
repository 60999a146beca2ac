#!/usr/bin/env bash
# The import and export benchmark of docs/benchmarks.md ("Import and export of a large memory
# directory"): writes FILES memory files in the SDKs' layout (DIR/memories/dNN/fN.md, FOLDERS
# folders, one line of about 50 bytes each), imports them into a fresh embedded store, imports
# them again (everything identical), and exports them to an empty directory, each timed with
# /usr/bin/time (release binary).
#
#   bash bench/import-tree.sh [FILES] [FOLDERS]     e.g. bash bench/import-tree.sh 100000 100
#   TREE_BYTES=1024 bash bench/import-tree.sh 100000 100   (files of 1 KiB of prose: issue 52, item 5)
set -euo pipefail
files=${1:-20000}
folders=${2:-100}
source "$(dirname "$0")/lib.sh"

imported_tree "$files" "$folders"
timed "re-import (everything identical)" "$bin" import "$work/tree"
timed "export" "$bin" export --out "$work/out"
