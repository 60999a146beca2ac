"""Prints the trace benchmark's tables (bench/trace.sh) from the files it wrote into WORK:
KEY.timing and KEY.out per store, floor.md (`contextq-bench floor`).

    python3 bench/trace.py WORK KEY=LABEL=DURABILITY=ENGINE ...

ENGINE (sqlite, postgres or empty) names the floor a store's writes are compared with. The
first store is the base of the ratios when its key is `python`.
"""
import json
import sys

WRITES = ("create", "str_replace", "insert", "delete", "rename")

work = sys.argv[1]
stores = [a.split("=", 3) for a in sys.argv[2:]]
timing = {k: json.loads(open(f"{work}/{k}.timing").read().strip().splitlines()[-1]) for k, *_ in stores}
results = {k: [json.loads(l) for l in open(f"{work}/{k}.out") if l.strip()] for k, *_ in stores}
base = "python" if stores and stores[0][0] == "python" else None


def us(t, names=None):
    """Mean µs per command of `t` (over `names` when given)."""
    by = t["by_command"]
    picked = [by[n] for n in (names or by) if n in by]
    count = sum(e["count"] for e in picked)
    return sum(e["seconds"] for e in picked) / count * 1e6 if count else float("nan")


print("| store | --durability | commands | seconds | µs per command | ratio to Python | errors | results identical to Python |")
print("|---|---|---|---|---|---|---|---|")
for k, label, durability, _ in stores:
    t = timing[k]
    ratio = f"{t['seconds'] / timing[base]['seconds']:.2f}x" if base else "-"
    same = f"{sum(1 for a, b in zip(results[k], results[base]) if a == b)} / {len(results[k])}" if base else "-"
    errors = sum(1 for r in results[k] if r["is_error"])
    print(f"| {label} | {durability} | {t['commands']} | {t['seconds']:.3f} | {t['seconds'] / t['commands'] * 1e6:.0f} | {ratio} | {errors} | {same} |")

names = sorted({n for k, *_ in stores for n in timing[k].get("by_command", {})})
print()
print("| command | count | " + " | ".join(f"{k} µs" for k, *_ in stores) + " |")
print("|---|---|" + "---|" * len(stores))
for n in names:
    count = timing[stores[0][0]]["by_command"].get(n, {}).get("count", 0)
    cells = []
    for k, *_ in stores:
        e = timing[k]["by_command"].get(n)
        cells.append(f"{e['seconds'] / e['count'] * 1e6:.0f}" if e else "")
    print(f"| {n} | {count} | " + " | ".join(cells) + " |")

# The floors: "| SQLite (... synchronous = FULL) | synced | N | mean | p50 | p99 |".
floor = open(f"{work}/floor.md").read()
print()
print(floor.strip())
# Two floors per engine: the least a versioned write needs, and the rows of a memory-tool write
# in the server's schema ("the rows of" in the name).
floors, rows = {}, {}
for line in floor.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 6 and cells[3].isdigit():
        engine = "sqlite" if cells[0].startswith("SQLite") else "postgres"
        (rows if "the rows of" in cells[0] else floors).setdefault((engine, cells[1]), float(cells[3]))
print()
print("| store | writes in the trace | mean µs per write | floor µs (synced) | ratio to the floor | the rows' floor µs | ratio to the rows' floor |")
print("|---|---|---|---|---|---|---|")
for k, label, durability, engine in stores:
    if not engine:
        continue
    by = timing[k]["by_command"]
    count = sum(by[n]["count"] for n in WRITES if n in by)
    mean = us(timing[k], WRITES)
    cells = []
    for table in (floors, rows):
        f = table.get((engine, "synced"))
        cells += [f"{f:.0f}", f"{mean / f:.2f}x"] if f else ["-", "-"]
    print(f"| {label} | {count} | {mean:.0f} | " + " | ".join(cells) + " |")
