"""doc_blocks.py — the fenced code blocks of a Markdown file in one language: what the documentation tests run
(python/tests/test_readme.py for python/README.md, tests/docs/run_tutorials.py for docs/tutorials/)."""
import re


def fenced_blocks(path, lang):
    """The text of every ```lang block of the Markdown file at path, in order."""
    with open(path, encoding="utf-8") as f:
        return re.findall(r"^```" + re.escape(lang) + r"\n(.*?)^```", f.read(), re.S | re.M)
