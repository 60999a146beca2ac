#!/usr/bin/env bash
# The inspector timings of docs/benchmarks.md ("Directory views added up by the server"):
# imports FILES memory files as big/dNN/fN.md (100 folders) into a fresh embedded store, starts
# `contextq-memory serve` on it (release binary, loopback), and times with curl, RUNS times
# each, the requests the inspector makes when it opens a workspace: the workspace list, the top
# level (`tree`, depth 1), expanding `big/`, and expanding one folder of FILES/100 files. The
# first run of each is cold (right after the import), the others warm. Uses the local key from
# the data directory, as the inspector's sign-in does.
#
#   bash bench/inspector.sh [FILES] [RUNS]     e.g. bash bench/inspector.sh 100000 3
set -euo pipefail
files=${1:-20000}
runs=${2:-3}
source "$(dirname "$0")/lib.sh"

embedded_tree "$files" 100 big
timed "import of $files files" "$bin" import "$work/tree"
"$bin" serve --listen 127.0.0.1:0 > /dev/null 2> "$work/serve.err" &
server_pid=$!
for _ in $(seq 1 100); do
  [ -s "$work/data/serve.json" ] && break
  sleep 0.1
done
url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/data/serve.json")
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["apiKey"])' "$work/data/embedded.json")
level() { # DIR: the inspector's request for one level of the default workspace
  echo "/api/contexts/tree?prefix=mem-tool%3Adefault%2F$1&requireTag=mem-tool&workspace=default&depth=1"
}
echo "| request | ms, run 1 (cold) .. run $runs |"
echo "|---|---|"
for req in "/api/workspaces" "$(level '')" "$(level 'big%2F')" "$(level 'big%2Fd00%2F')"; do
  times=()
  for _ in $(seq 1 "$runs"); do
    t=$(curl -sf -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $key" "$url$req")
    times+=("$(python3 -c "print(f'{$t * 1000:.1f}')")")
  done
  echo "| \`GET ${req%%&*}\` | ${times[*]} |"
done
