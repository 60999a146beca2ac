#!/usr/bin/env bash
# The redaction figures of docs/benchmarks.md ("Redaction and `secure_delete`"): imports FILES
# memory files (FOLDERS folders, one short line each) into a fresh embedded store, gives one file
# a secret in an old version, then times, whole process included (/usr/bin/time, release
# binary): a matching dry run that matches nothing, a matching redaction of the one version that
# holds the secret, and a redaction by version number; then the scan alone (the versions whose
# content holds a text, as the server's redaction reads them) in Python's sqlite3 over the
# imported database, 5 runs after one warm-up.
#
#   bash bench/redaction-scan.sh [FILES] [FOLDERS]     e.g. bash bench/redaction-scan.sh 100000 100
set -euo pipefail
files=${1:-20000}
folders=${2:-100}
source "$(dirname "$0")/lib.sh"

imported_tree "$files" "$folders"
# Version 1 of each file holds a secret; version 2 (the current content) does not.
printf '%s\n' \
  '{"command":"create","path":"/memories/secret.md","file_text":"token sk-bench-7f3e9a\n"}' \
  '{"command":"str_replace","path":"/memories/secret.md","old_str":"sk-bench-7f3e9a","new_str":"(rotated)"}' \
  '{"command":"create","path":"/memories/by-number.md","file_text":"old\n"}' \
  '{"command":"str_replace","path":"/memories/by-number.md","old_str":"old","new_str":"new"}' |
  "$bin" exec > /dev/null
timed "matching dry run, nothing matches" "$bin" redact /memories --all-paths --matching no-such-text-anywhere --dry-run -y
timed "matching redaction of the one version holding the text" "$bin" redact /memories --all-paths --matching sk-bench-7f3e9a -y
timed "redaction by version number" "$bin" redact /memories/by-number.md --version 1 -y

python3 - "$work/data/contextq.db" <<'EOF'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
versions = db.execute("SELECT count(*) FROM context_versions").fetchone()[0]
tenant = db.execute("SELECT tenant_id FROM context_versions LIMIT 1").fetchone()[0]
scan = "SELECT count(*) FROM context_versions v WHERE v.tenant_id = ? AND instr(v.content, ?) > 0"
db.execute(scan, (tenant, "no-such-text-anywhere")).fetchone()
runs = []
for _ in range(5):
    t = time.perf_counter()
    db.execute(scan, (tenant, "no-such-text-anywhere")).fetchone()
    runs.append((time.perf_counter() - t) * 1000)
runs.sort()
print(f"scan alone over {versions} versions: median {runs[2]:.1f} ms (min {runs[0]:.1f}, max {runs[4]:.1f}), "
      f"{runs[2] * 1000 / versions:.2f} us a version")
EOF
