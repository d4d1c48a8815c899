"""test_readme.py — the example of python/README.md runs as written (on the CPU)."""
import contextlib
import io
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "docs"))
from doc_blocks import fenced_blocks  # noqa: E402  (the documentation tests' one extraction)


class TestReadmeExample(unittest.TestCase):
    def test_example_runs(self):
        blocks = fenced_blocks(README, "python")
        self.assertEqual(len(blocks), 1)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(blocks[0], README, "exec"), {})
        m = re.fullmatch(r"loss (\S+), conv weight grad norm (\S+)\n", out.getvalue())
        self.assertIsNotNone(m, out.getvalue())
        loss, grad_norm = float(m.group(1)), float(m.group(2))
        self.assertTrue(0 < loss < 10 and 0 < grad_norm < 1e3, out.getvalue())


if __name__ == "__main__":
    unittest.main()
