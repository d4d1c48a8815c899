#!/usr/bin/env python3
"""run_tutorials.py — every tutorial of docs/tutorials/ runs as written: its ```sh blocks in order, with bash, in a
fresh folder laid out as the repository's root after the README's build (./build/spikefuse, ./build/make_events,
examples/), then its ```python blocks where the packages they import are installed (they are skipped otherwise,
saying which is missing). Prints each tutorial's wall time.

usage: run_tutorials.py SPIKEFUSE_CLI BUILD_DIR WORK_DIR [TUTORIAL.md ...]   (default: every docs/tutorials/*.md)
"""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from doc_blocks import fenced_blocks  # noqa: E402


def missing_modules(code):
    """The top-level modules a Python block imports that this Python cannot find."""
    names = re.findall(r"^\s*(?:from\s+(\w+)[\w.]*\s+import|import\s+(\w+))", code, re.M)
    return sorted({a or b for a, b in names if importlib.util.find_spec(a or b) is None})


def layout(work, cli, build):
    """A folder shaped like the repository after `cmake -B build`: build/ with the programs, examples/."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.abspath(cli), os.path.join(work, "build", "spikefuse"))
    for prog in ("make_events",):
        os.symlink(os.path.abspath(os.path.join(build, prog)), os.path.join(work, "build", prog))
    os.symlink(os.path.join(ROOT, "examples"), os.path.join(work, "examples"))


def run_block(kind, code, work, env, where):
    cmd = ["bash", "-euo", "pipefail", "-c", code] if kind == "sh" else [sys.executable, "-c", code]
    r = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(r.stdout[-3000:])
    if r.returncode != 0:
        sys.exit(f"run_tutorials: {where} failed (exit {r.returncode}):\n{code}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    cli, build, work_root = sys.argv[1:4]
    tutorials = sys.argv[4:] or sorted(glob.glob(os.path.join(ROOT, "docs", "tutorials", "*.md")))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
    for path in tutorials:
        name = os.path.splitext(os.path.basename(path))[0]
        work = os.path.join(work_root, name)
        layout(work, cli, build)
        shell, python = fenced_blocks(path, "sh"), fenced_blocks(path, "python")
        if not shell:
            sys.exit(f"run_tutorials: {path} has no ```sh block to run")
        t0 = time.monotonic()
        for i, code in enumerate(shell):
            print(f"== {name}: sh block {i + 1} of {len(shell)}", flush=True)
            run_block("sh", code, work, env, f"{path}, sh block {i + 1}")
        for i, code in enumerate(python):
            missing = missing_modules(code)
            if missing:
                print(f"== {name}: python block {i + 1} skipped: needs {', '.join(missing)}", flush=True)
                continue
            print(f"== {name}: python block {i + 1} of {len(python)}", flush=True)
            run_block("python", code, work, env, f"{path}, python block {i + 1}")
        print(f"== {name}: every block ran, {time.monotonic() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
