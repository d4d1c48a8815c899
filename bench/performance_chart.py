#!/usr/bin/env python3
"""performance_chart.py — the summary chart of docs/performance.md, drawn from that page's Summary table (the speed ×
column: the fastest peer mode measured over spikefuse's time), as an SVG with a log axis; nothing is typed in twice.

usage: python3 bench/performance_chart.py [--check]   (--check: fail if docs/img/performance_summary.svg is stale)
"""
import math
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGE = os.path.join(ROOT, "docs", "performance.md")
CHART = os.path.join(ROOT, "docs", "img", "performance_summary.svg")

LABEL_W, BAR_W, ROW_H, TOP, LO, HI = 330, 400, 24, 40, 0.5, 50.0


def summary_rows(text):
    """(workload, low ×, high ×, the cell as written) for each row of the table under '## Summary'."""
    section = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("workload", "") or set(cells[0]) <= {"-"}:
            continue
        m = re.fullmatch(r"([\d.]+)(?:–([\d.]+))?×", cells[3])
        if not m:
            raise SystemExit(f"performance_chart: {PAGE}: speed '{cells[3]}' of '{cells[0]}' is not 'A×' or 'A–B×'")
        lo = float(m.group(1))
        rows.append((cells[0].replace("`", ""), lo, float(m.group(2) or lo), cells[3]))
    if not rows:
        raise SystemExit(f"performance_chart: {PAGE} has no Summary table")
    return rows


def x_of(ratio):
    return LABEL_W + BAR_W * math.log(ratio / LO) / math.log(HI / LO)


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg(rows):
    h = TOP + ROW_H * len(rows) + 30
    w = LABEL_W + BAR_W + 70
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           '<text x="10" y="18" font-size="13">spikefuse\'s speed against the fastest peer mode measured '
           '(log scale; right of 1×: spikefuse is faster)</text>']
    bottom = TOP + ROW_H * len(rows)
    for tick in (0.5, 1, 2, 5, 10, 20, 50):
        x = x_of(tick)
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{bottom}" stroke="{"#333" if tick == 1 else "#ddd"}"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{tick:g}×</text>')
    for i, (name, lo, hi, label) in enumerate(rows):
        y = TOP + ROW_H * i
        x1, xlo, xhi = x_of(1), x_of(lo), x_of(hi)
        colour = "#2b6cb0" if lo >= 1 else "#c05621"
        out.append(f'<text x="{LABEL_W - 8}" y="{y + 15}" text-anchor="end">{esc(name)}</text>')
        out.append(f'<rect x="{min(x1, xlo):.1f}" y="{y + 4}" width="{abs(xlo - x1):.1f}" height="{ROW_H - 8}" '
                   f'fill="{colour}"/>')
        if hi > lo:
            out.append(f'<rect x="{xlo:.1f}" y="{y + 4}" width="{xhi - xlo:.1f}" height="{ROW_H - 8}" '
                       f'fill="{colour}" fill-opacity="0.35"/>')
        out.append(f'<text x="{max(xhi, x1) + 6:.1f}" y="{y + 15}">{esc(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    with open(PAGE, encoding="utf-8") as f:
        chart = svg(summary_rows(f.read()))
    if sys.argv[1:] == ["--check"]:
        with open(CHART, encoding="utf-8") as f:
            if f.read() != chart:
                raise SystemExit(f"performance_chart: {CHART} does not show {PAGE}'s Summary table: "
                                 "run python3 bench/performance_chart.py")
        print(f"performance_chart: {CHART} matches the Summary table ({len(chart)} bytes)")
    elif not sys.argv[1:]:
        with open(CHART, "w", encoding="utf-8") as f:
            f.write(chart)
        print(f"performance_chart: wrote {CHART}")
    else:
        raise SystemExit(__doc__.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
