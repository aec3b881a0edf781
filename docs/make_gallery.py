"""Regenerate docs/gallery.md's tables and pictures (``make gallery``).

The page marks what is generated. A table follows a comment naming the ``streamsim compare``
arguments that print it::

    <!-- compare: models/x.py --set k=v -->
    ```text
    (what `streamsim compare models/x.py --set k=v` prints)
    ```

and a picture comment names the ``streamsim graph`` or ``timeline`` arguments that draw it::

    <!-- picture: graph models/x.py --variant v -o docs/img/x.png -->

This script runs each command in-process through the command line's own ``main`` and rewrites the
tables in place; tests/test_gallery.py checks that the page's tables are what compare prints now.
Run it from the repository root.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

from streamsim.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "gallery.md"
TABLE = re.compile(r"(<!-- compare: (?P<args>[^>]*?) -->\n```text\n)(?P<body>.*?)(```)", re.S)
PICTURE = re.compile(r"<!-- picture: (?P<args>[^>]*?) -->")


def run_cli(args: list[str]) -> tuple[int, str]:
    """``streamsim ARGS`` in this process: (exit code, what it printed on stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, out.getvalue()


def compare_text(args: str) -> str:
    code, text = run_cli(["compare", *shlex.split(args)])
    if code not in (0, 1):
        raise SystemExit(f"streamsim compare {args}: exit code {code}")
    return text


def regenerate(page: Path = PAGE) -> None:
    text = page.read_text(encoding="utf-8")
    text = TABLE.sub(lambda m: m.group(1) + compare_text(m.group("args")) + m.group(4), text)
    for m in PICTURE.finditer(text):
        code, _ = run_cli(shlex.split(m.group("args")))
        if code not in (0, 1):
            raise SystemExit(f"streamsim {m.group('args')}: exit code {code}")
    page.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    import os
    os.chdir(ROOT)  # (the commands name repository paths)
    regenerate()
    print(f"regenerated {PAGE.relative_to(ROOT)}", file=sys.stderr)
