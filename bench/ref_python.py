"""Runs a command trace through the official Python SDK's local-filesystem memory tool.

usage: python ref_python.py TRACE BASE_DIR RESULTS_OUT
Prints {"commands": n, "seconds": s, "by_command": {name: {"count", "seconds"}}} (the loop
only, after imports) and writes one
{"content", "is_error"} line per command, as the SDK's runner would send them.
"""
import json
import sys
import time

from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

trace, base, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
inputs = [json.loads(line) for line in open(trace, encoding="utf-8") if line.strip()]
tool = BetaLocalFilesystemMemoryTool(base_path=base)
results = []
by_command = {}
start = time.perf_counter()
for item in inputs:
    one = time.perf_counter()
    try:
        results.append((str(tool.call(item)), False))
    except Exception as err:  # the runner sends "Error: <message>" with is_error
        results.append((f"Error: {err}", True))
    entry = by_command.setdefault(item.get("command", "(none)"), {"count": 0, "seconds": 0.0})
    entry["count"] += 1
    entry["seconds"] += time.perf_counter() - one
seconds = time.perf_counter() - start
with open(out_path, "w", encoding="utf-8") as out:
    for content, is_error in results:
        out.write(json.dumps({"content": content, "is_error": is_error}) + "\n")
print(json.dumps({"commands": len(inputs), "seconds": seconds, "by_command": by_command}))
