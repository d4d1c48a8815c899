"""test_readme.py — the examples of python/README.md run as written (on the CPU): the neuron example, and the
SpikingJelly user's fuse example (with sj_standins in SpikingJelly's place where it is not installed); and the
Python quick start of the repository's README.md."""
import contextlib
import importlib.util
import io
import os
import re
import sys
import unittest
from unittest import mock

import sj_standins

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")
TOP_README = os.path.join(HERE, "..", "..", "README.md")
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "docs"))
from doc_blocks import fenced_blocks  # noqa: E402  (the documentation tests' one extraction)


def blocks():
    return fenced_blocks(README, "python")


def run(code, path=README):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, path, "exec"), {})
    return out.getvalue()


def spikingjelly_or_standins():
    """The context of the SpikingJelly examples: sj_standins in sys.modules where SpikingJelly is not installed.
    Where it is, sys.modules is left alone: a patch would drop the modules the example imported, and importing them
    a second time registers SpikingJelly's torch ops twice, which fails."""
    try:
        have_sj = importlib.util.find_spec("spikingjelly") is not None
    except ValueError:
        have_sj = False
    return contextlib.nullcontext() if have_sj else mock.patch.dict(sys.modules, sj_standins.modules())


class TestReadmeExamples(unittest.TestCase):
    def test_example_runs(self):
        self.assertEqual(len(blocks()), 3)
        out = run(blocks()[0])
        m = re.fullmatch(r"loss (\S+), conv weight grad norm (\S+)\n", out)
        self.assertIsNotNone(m, out)
        loss, grad_norm = float(m.group(1)), float(m.group(2))
        self.assertTrue(0 < loss < 10 and 0 < grad_norm < 1e3, out)

    def test_fuse_example_runs(self):
        with spikingjelly_or_standins():
            out = run(blocks()[1])
        m = re.fullmatch(r"7 engine layers, loss (\S+)\n", out)
        self.assertIsNotNone(m, out)
        self.assertTrue(0 < float(m.group(1)) < 1, out)

    def test_fuse_resnet_example_runs(self):
        with spikingjelly_or_standins():
            out = run(blocks()[2])
        m = re.fullmatch(r"8 connections, difference (\S+)\n", out)
        self.assertIsNotNone(m, out)
        self.assertLess(float(m.group(1)), 1e-4, out)

    def test_top_readme_quick_start_runs(self):
        code = fenced_blocks(TOP_README, "python")
        self.assertEqual(len(code), 1)
        m = re.fullmatch(r"loss (\S+)\n", run(code[0], TOP_README))
        self.assertIsNotNone(m)
        self.assertTrue(0 < float(m.group(1)) < 10)


if __name__ == "__main__":
    unittest.main()
