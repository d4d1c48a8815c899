#!/usr/bin/env python3
"""check_cli_help.py — `spikefuse --help` and each subcommand's --help say what README.md's command table says:
the same commands in the same order; for each, the same first argument and the same options in its usage lines as
in the README's row, and every option its help describes is in its usage; the exit codes the top-level help lists
are the ones the README's exit-code rule gives.

usage: check_cli_help.py SPIKEFUSE_CLI
"""
import os
import re
import subprocess
import sys

README = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md"))
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def help_text(cli, *args):
    r = subprocess.run([cli, *args, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(r.returncode == 0, " ".join(["spikefuse", *args, "--help exits 0"]))
    return r.stdout


def flags(text):
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)) - {"--help"})


def readme_commands(text):
    """{name: syntax} from the rows of the table headed `| command | what it does |`, in order."""
    table = text.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `spikefuse (\w+)([^`]*)` \|", table, re.M)
    return {name: rest.strip() for name, rest in rows}


def usage_lines(text):
    """The usage lines of a subcommand's help: from 'usage:' to the first blank line."""
    return text.split("\n\n", 1)[0]


def first_argument(syntax):
    """The positional argument a command's syntax starts with (CONFIG, CHECKPOINT, RUN, IN.nir), or ''."""
    m = re.match(r"\[?([A-Z][\w.]*)\]?(?:\s|$)", syntax)
    return m.group(1) if m else ""


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    cli = sys.argv[1]
    with open(README, encoding="utf-8") as f:
        readme = f.read()
    top = help_text(cli)
    listed = re.findall(r"^  (\w+)\s{2,}\S", top.split("commands:", 1)[1].split("\n\n", 1)[0], re.M)
    documented = readme_commands(readme)
    check(listed == list(documented), f"the README's command table lists {listed} in that order "
                                      f"(it lists {list(documented)})")
    for name in listed:
        text = help_text(cli, name)
        usage = usage_lines(text)
        check(usage.startswith(f"usage: spikefuse {name}"), f"spikefuse {name} --help starts with its usage")
        syntax = documented.get(name, "")
        first = first_argument(usage[len(f"usage: spikefuse {name}"):].strip())
        check(first == first_argument(syntax), f"{name}: the first argument is '{first}' in both "
                                               f"(README: '{first_argument(syntax)}')")
        check(flags(usage) == flags(syntax), f"{name}: the options are {flags(usage)} in both (README: {flags(syntax)})")
        described = flags(text.split("options:", 1)[1]) if "options:" in text else []
        check(set(described) <= set(flags(usage)), f"{name}: every option described ({described}) is in the usage")
    codes = re.findall(r"^  (\d+)\s", top.split("exit codes", 1)[1], re.M)
    rule = re.search(r"Exit codes,\s+one rule for every subcommand: (.*?)\n\n", readme, re.S)
    check(rule is not None, "the README states the exit codes")
    if rule:
        stated = re.findall(r"(?:^|[;:] )(\d+) ", rule.group(1))
        check(codes == stated, f"exit codes {codes} in both (README: {stated})")
    if failures:
        sys.exit(f"check_cli_help: {len(failures)} of the README's statements about the CLI do not hold")


if __name__ == "__main__":
    main()
