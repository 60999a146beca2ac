#!/usr/bin/env bash
# Reference comparison: one command trace (default 10,000 commands) through Anthropic's own
# local-filesystem memory tools (Python SDK `anthropic`, TypeScript SDK `@anthropic-ai/sdk`,
# installed here into a throwaway directory) and through this project's `contextq-memory exec`
# (LocalStore, and ContextQStore on the embedded server; each with the default durability,
# `synced`, and with `--durability ordered`, the references' own: a power cut may take back the
# last writes), in one run. Prints a Markdown table; times are each loop alone (after imports /
# startup), ratios are to the Python SDK.
#
#   bash bench/references.sh [COMMANDS]
set -euo pipefail
n=${1:-10000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --release -q --manifest-path "$root/Cargo.toml" -p contextq-bench -p contextq-memory-cli
bin="$root/target/release"
"$bin/contextq-bench" trace --commands "$n" --out "$work/trace.jsonl"

echo "installing the reference SDKs into $work (throwaway)" >&2
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q anthropic
(cd "$work" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund @anthropic-ai/sdk)
cp "$root/bench/ref_python.py" "$root/bench/ref_node.cjs" "$work/"
echo "python: $("$work/venv/bin/python" -c 'import anthropic; print(anthropic.__version__)'), typescript: $(node -p "require('$work/node_modules/@anthropic-ai/sdk/package.json').version")" >&2

"$work/venv/bin/python" "$work/ref_python.py" "$work/trace.jsonl" "$work/py" "$work/python.out" > "$work/python.timing"
(cd "$work" && node ref_node.cjs "$work/trace.jsonl" "$work/node" "$work/node.out" > "$work/node.timing")
"$bin/contextq-memory" exec --timing --store "local:$work/local" < "$work/trace.jsonl" > "$work/local.out" 2> "$work/local.timing"
CONTEXTQ_MEMORY_DATA_DIR="$work/data" env -u CONTEXT_API_URL "$bin/contextq-memory" exec --timing < "$work/trace.jsonl" > "$work/contextq.out" 2> "$work/contextq.timing"
"$bin/contextq-memory" --durability ordered exec --timing --store "local:$work/local-ordered" < "$work/trace.jsonl" > "$work/local-ordered.out" 2> "$work/local-ordered.timing"
CONTEXTQ_MEMORY_DATA_DIR="$work/data-ordered" env -u CONTEXT_API_URL "$bin/contextq-memory" --durability ordered exec --timing < "$work/trace.jsonl" > "$work/contextq-ordered.out" 2> "$work/contextq-ordered.timing"

python3 "$root/bench/compare.py" "$work" \
  "python=Python SDK \`BetaLocalFilesystemMemoryTool\`" \
  "node=TypeScript SDK \`BetaLocalFilesystemMemoryTool\`" \
  "local=this project, \`LocalStore\` (\`contextq-memory exec --store local:DIR\`)" \
  "contextq=this project, \`ContextQStore\` on embedded contextq-server/SQLite (\`contextq-memory exec\`)" \
  "local-ordered=\`LocalStore\`, \`--durability ordered\` (the references' durability)" \
  "contextq-ordered=\`ContextQStore\`, \`--durability ordered\` (the references' durability)"
