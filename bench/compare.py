"""Prints a reference comparison table from the timing and result files a bench script wrote
into WORK (KEY.timing, KEY.out): one row per implementation, the first (Python's) the base of
the ratios, then the time per command where the timing has it.

    python3 bench/compare.py WORK KEY=LABEL [KEY=LABEL ...]
"""
import json
import sys

work = sys.argv[1]
impls = [tuple(reversed(a.split("=", 1))) for a in sys.argv[2:]]
base_key = impls[0][1]
timing = {k: json.loads(open(f"{work}/{k}.timing").read().strip().splitlines()[-1]) for _, k in impls}
results = {k: [json.loads(l) for l in open(f"{work}/{k}.out") if l.strip()] for _, k in impls}
base = timing[base_key]["seconds"]
print("| implementation | commands | seconds | commands/s | ratio to Python (time) | errors | results identical to Python |")
print("|---|---|---|---|---|---|---|")
for label, k in impls:
    t = timing[k]
    same = sum(1 for a, b in zip(results[k], results[base_key]) if a == b)
    errors = sum(1 for r in results[k] if r["is_error"])
    print(
        f"| {label} | {t['commands']} | {t['seconds']:.3f} | {t['commands'] / t['seconds']:.0f} | "
        f"{t['seconds'] / base:.2f} | {errors} | {same} / {len(results[k])} |"
    )

# Where the time goes, per command: mean microseconds per command (count in the trace), for the
# implementations that report it (`exec --timing` and ref_python.py do).
names = sorted({n for _, k in impls for n in timing[k].get("by_command", {})})
shown = [(label, k) for label, k in impls if "by_command" in timing[k]]
if names and shown:
    print()
    print("| command | count | " + " | ".join(f"{label} µs/command" for label, _ in shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    for n in names:
        count = timing[shown[0][1]]["by_command"].get(n, {}).get("count", 0)
        cells = []
        for _, k in shown:
            e = timing[k]["by_command"].get(n)
            cells.append(f"{e['seconds'] / e['count'] * 1e6:.0f}" if e else "")
        print(f"| {n} | {count} | " + " | ".join(cells) + " |")
