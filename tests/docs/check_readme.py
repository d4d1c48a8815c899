#!/usr/bin/env python3
"""check_readme.py — what README.md states about set-up and results holds: its second ```sh block (the tests) is
the command .ci/run runs; its results table has at most eight rows, and each row's speed × and memory × are those of
a row of docs/performance.md's Summary table, on the same card.

usage: check_readme.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from doc_blocks import fenced_blocks  # noqa: E402

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def table_rows(text, header):
    """The cells of each row of the Markdown table that starts with the line `header`."""
    lines = text.split(header + "\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]


def main():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(ROOT, "docs", "performance.md"), encoding="utf-8") as f:
        performance = f.read()
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = [line for line in f.read().splitlines() if line.startswith("apt-get ")]
    shell = fenced_blocks(os.path.join(ROOT, "README.md"), "sh")
    check(len(ci) == 1 and len(shell) >= 2 and shell[1].strip() == ci[0].strip(),
          "README.md's second sh block is the command .ci/run runs")
    results = table_rows(readme, "| workload | spikefuse | fastest peer mode measured | speed × | memory × | card |")
    summary = table_rows(performance, "| workload | spikefuse | fastest peer mode measured | speed × | memory × | "
                                      "card, date, commit |")
    check(0 < len(results) <= 8, f"the results table has {len(results)} rows, at most 8")
    measured = {(row[3], row[4], row[5].split(",")[0]) for row in summary}
    for row in results:
        check((row[3], row[4], row[5]) in measured,
              f"'{row[0]}': speed {row[3]}, memory {row[4] or '-'} on {row[5]} is a row of docs/performance.md's Summary")
    if failures:
        sys.exit(f"check_readme: {len(failures)} of the README's statements do not hold")


if __name__ == "__main__":
    main()
