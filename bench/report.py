"""The results table: one row per metric, a column per target, and zkcompat/ZooKeeper."""

from __future__ import annotations

import math

from bench.scenarios import Row

RATIO = ("zkcompat", "zookeeper")


def _cell(fmt: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def table(rows: list[Row], targets: list[str]) -> str:
    ratio = all(name in targets for name in RATIO)
    header = ["scenario", "metric", *targets] + (["zkcompat/zookeeper"] if ratio else [])
    lines = [header]
    last_section = None
    for row in rows:
        cells = [row.section if row.section != last_section else "", row.metric]
        last_section = row.section
        cells += [_cell(row.fmt, row.values.get(t)) for t in targets]
        if ratio:
            a, b = row.values.get(RATIO[0]), row.values.get(RATIO[1])
            cells.append(f"{a / b:.2f}" if a is not None and b and not math.isnan(a)
                         and not math.isnan(b) else "-")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
