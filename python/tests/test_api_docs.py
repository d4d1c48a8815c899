"""test_api_docs.py — docs/python-api.md is spikefuse.torch's reference: every name of spikefuse.torch.__all__ is a
heading of the page, every class and function there has a docstring (what help() shows), as do the public methods
and properties the classes add to torch.nn.Module, the page gives each one's signature as the code has it, and the
page's example runs."""
import contextlib
import inspect
import io
import os
import re
import sys
import unittest

import torch

import spikefuse.torch

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "docs", "python-api.md")
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "docs"))
from doc_blocks import fenced_blocks  # noqa: E402


class TestApiReference(unittest.TestCase):
    def setUp(self):
        with open(PAGE, encoding="utf-8") as f:
            self.page = f.read()
        self.names = spikefuse.torch.__all__

    def test_every_public_name_has_a_heading(self):
        headings = {n for line in re.findall(r"^###.*$", self.page, re.M) for n in re.findall(r"`(\w+)`", line)}
        for n in self.names:
            with self.subTest(name=n):
                self.assertIn(n, headings)

    def test_every_class_and_function_has_docstrings(self):
        for n in self.names:
            obj = getattr(spikefuse.torch, n)
            if not (inspect.isclass(obj) or callable(obj) or inspect.ismodule(obj)):
                continue
            with self.subTest(name=n):
                self.assertTrue((obj.__doc__ or "").strip(), f"{n} has no docstring")
            if not inspect.isclass(obj):
                continue
            for m in dir(obj):
                if m.startswith("_") or hasattr(torch.nn.Module, m):
                    continue
                attr = inspect.getattr_static(obj, m)
                doc = attr.__doc__ if isinstance(attr, property) else getattr(obj, m).__doc__
                with self.subTest(name=f"{n}.{m}"):
                    self.assertTrue((doc or "").strip(), f"{n}.{m} has no docstring")

    def test_the_page_gives_every_signature(self):
        signatures = "\n".join(fenced_blocks(PAGE, "text")).splitlines()
        for n in self.names:
            obj = getattr(spikefuse.torch, n)
            if inspect.ismodule(obj) or not callable(obj):
                continue
            with self.subTest(name=n):
                self.assertIn(n + str(inspect.signature(obj)), signatures)

    def test_the_example_runs(self):
        code = fenced_blocks(PAGE, "python")
        self.assertEqual(len(code), 1)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code[0], PAGE, "exec"), {"__name__": "python_api_example"})
        m = re.fullmatch(r"\(4, 8, 10\), (\d+) of 320 outputs differ\n", out.getvalue())
        self.assertIsNotNone(m, out.getvalue())
        self.assertLessEqual(int(m.group(1)), 1)


if __name__ == "__main__":
    unittest.main()
