#!/usr/bin/env python3
"""run_tutorials.py — every tutorial of docs/tutorials/ runs as written: its ```sh blocks in order, with bash, in a
fresh folder laid out as the repository's root after the README's build (./build/spikefuse, ./build/make_events,
./build/make_imagefolder, examples/), then its ```python blocks in order in one Python session, as a reader pasting
them one after another (from the first block that imports a package this Python lacks on, they are skipped, saying
which is missing). spikefuse.torch imports from python/ over the library the environment's SPIKEFUSE_LIBRARY names;
where SpikingJelly is not installed, python/tests/sj_standins.py stands in for it. Prints each tutorial's wall time.

usage: run_tutorials.py SPIKEFUSE_CLI BUILD_DIR WORK_DIR [TUTORIAL.md ...]   (default: every docs/tutorials/*.md)
"""
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(ROOT, "python"))  # spikefuse is there for the blocks, so missing_modules finds it
from doc_blocks import fenced_blocks  # noqa: E402


# Runs the blocks of a JSON list in one namespace, each compiled under its own name for the tracebacks.
SESSION = """import json, sys
names = {"__name__": "__main__"}
for i, code in enumerate(json.load(open(sys.argv[1]))):
    print(f"== python block {i + 1}", flush=True)
    exec(compile(code, f"python block {i + 1}", "exec"), names)
"""

# Where SpikingJelly is missing: a package of its name over the stand-ins (python/tests is on PYTHONPATH).
SJ_STANDIN = """import sys
import sj_standins
activation_based = sys.modules["spikingjelly.activation_based"] = sj_standins.modules()["spikingjelly.activation_based"]
"""


def missing_modules(code):
    """The top-level modules a Python block imports that this Python cannot find (SpikingJelly has its stand-in)."""
    names = re.findall(r"^\s*(?:from\s+(\w+)[\w.]*\s+import|import\s+(\w+))", code, re.M)
    return sorted({a or b for a, b in names
                   if (a or b) != "spikingjelly" and importlib.util.find_spec(a or b) is None})


def spikingjelly_path(work_root):
    """A folder to put on PYTHONPATH so that spikingjelly imports: none where it is installed, else the stand-ins."""
    if importlib.util.find_spec("spikingjelly") is not None:
        return []
    folder = os.path.join(work_root, "sj_standins")
    os.makedirs(os.path.join(folder, "spikingjelly"), exist_ok=True)
    with open(os.path.join(folder, "spikingjelly", "__init__.py"), "w", encoding="utf-8") as f:
        f.write(SJ_STANDIN)
    print("== SpikingJelly is not installed: python/tests/sj_standins.py stands in for it", flush=True)
    return [folder, os.path.join(ROOT, "python", "tests")]


def layout(work, cli, build):
    """A folder shaped like the repository after `cmake -B build`: build/ with the programs, examples/."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "build"))
    os.symlink(os.path.abspath(cli), os.path.join(work, "build", "spikefuse"))
    for prog in ("make_events", "make_imagefolder"):
        os.symlink(os.path.abspath(os.path.join(build, prog)), os.path.join(work, "build", prog))
    os.symlink(os.path.join(ROOT, "examples"), os.path.join(work, "examples"))


def run(cmd, work, env, where, code):
    r = subprocess.run(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(r.stdout[-3000:])
    if r.returncode != 0:
        sys.exit(f"run_tutorials: {where} failed (exit {r.returncode}):\n{code}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    cli, build, work_root = sys.argv[1:4]
    tutorials = sys.argv[4:] or sorted(glob.glob(os.path.join(ROOT, "docs", "tutorials", "*.md")))
    python_path = [os.path.join(ROOT, "python")] + spikingjelly_path(os.path.abspath(work_root))
    bin_dir = os.path.join(os.path.abspath(work_root), "bin")  # `python3` in a sh block: this Python
    os.makedirs(bin_dir, exist_ok=True)
    if not os.path.lexists(os.path.join(bin_dir, "python3")):
        os.symlink(sys.executable, os.path.join(bin_dir, "python3"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path), PYTHONDONTWRITEBYTECODE="1",
               PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
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
            run(["bash", "-euo", "pipefail", "-c", code], work, env, f"{path}, sh block {i + 1}", code)
        runnable = python
        for i, code in enumerate(python):
            missing = missing_modules(code)
            if missing:
                print(f"== {name}: python blocks {i + 1}-{len(python)} skipped: block {i + 1} needs "
                      f"{', '.join(missing)}", flush=True)
                runnable = python[:i]
                break
        if runnable:
            with open(os.path.join(work, "python_blocks.json"), "w", encoding="utf-8") as f:
                json.dump(runnable, f)
            print(f"== {name}: python blocks 1-{len(runnable)} of {len(python)}, in one session", flush=True)
            run([sys.executable, "-c", SESSION, "python_blocks.json"], work, env, f"{path}, python blocks",
                "\n".join(runnable))
        print(f"== {name}: every block ran, {time.monotonic() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
