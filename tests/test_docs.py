"""What the product tells users to read exists in the repository: every doc file the README, the
command line (help texts and messages), the package's docstrings, the models and the notebooks
name, every file the README links; and nothing points outside the repository."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from streamsim.cli.main import build_parser, short_usage
from streamsim.report.jsonread import op_of

ROOT = Path(__file__).resolve().parent.parent
DOC_NAME = re.compile(r"(?<![\w/.-])((?:\.\./)*[\w./-]*[\w-]\.md)\b", re.IGNORECASE)
OUTSIDE = re.compile(r"\.\./shared|shared docs", re.IGNORECASE)
OUTPUTS = {"report.md"}  # files the product writes, not docs it points to


def cli_texts() -> dict[str, str]:
    """The usage of bare `streamsim` and the --help of the program and of every command."""
    parser = build_parser()
    texts = {"streamsim": short_usage(), "streamsim --help": parser.format_help()}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    texts.update({f"streamsim {name} --help": p.format_help() for name, p in sub.choices.items()})
    return texts


def product_texts() -> dict[str, str]:
    """Every text a user reads: README, CLI help, the package's sources (docstrings and the
    messages it prints), the models, the notebooks."""
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8"), **cli_texts()}
    for pattern in ("streamsim/**/*.py", "models/*.py", "notebooks/*.ipynb"):
        for path in sorted(ROOT.glob(pattern)):
            texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return texts


def missing_doc(name: str) -> bool:
    """A doc name that no file answers: a path is taken from the repository root, a bare name may
    also live in docs/."""
    if name in OUTPUTS:
        return False
    candidates = [ROOT / name] + ([] if "/" in name else [ROOT / "docs" / name])
    return not any(c.is_file() for c in candidates)


def test_every_doc_file_named_by_the_product_exists():
    """Today's README sent users to "OPLOG.md in the shared docs" and `check --help` to
    "OPLOG.md"; docstrings named docs/SEMANTICS.md. None of these was in the repository."""
    bad = [(where, name) for where, text in product_texts().items()
           for name in DOC_NAME.findall(text) if missing_doc(name)]
    assert not bad, f"doc files named but absent: {bad}"


def test_nothing_points_outside_the_repository():
    bad = [(where, m.group(0)) for where, text in product_texts().items()
           for m in OUTSIDE.finditer(text)]
    assert not bad, bad


def test_every_file_the_readme_links_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)#\s]+)", readme) if "://" not in t]
    assert links  # (the pictures at least)
    assert [t for t in links if not (ROOT / t).exists()] == []


def test_the_checker_catches_a_missing_doc():
    """The test above can fail: a made-up doc name is missing, the README is present."""
    assert DOC_NAME.findall("see OPLOG.md, docs/no-such-page.md and README.md") == \
        ["OPLOG.md", "docs/no-such-page.md", "README.md"]
    assert missing_doc("OPLOG.md") and missing_doc("docs/no-such-page.md")
    assert not missing_doc("README.md") and not missing_doc("report.md")
    assert not missing_doc("semantics.md")  # a bare name may live in docs/


def test_readme_op_log_example_is_the_race_it_describes(tmp_path):
    """The README's op-log example is one WAR between its lines 2 and 3, and the wait it names
    fixes it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = readme.split("## Op logs", 1)[1].split("```", 2)[1].strip() + "\n"
    log = tmp_path / "race.jsonl"
    log.write_text(example)
    run = subprocess.run([sys.executable, "-m", "streamsim", "check", str(log), "--format",
                          "json"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert [(h["kind"], op_of(report, h["first"])["line"], op_of(report, h["second"])["line"])
            for h in report["hazards"]] == [("WAR", 2, 3)]
    assert report["metrics"]["steps"] == 2
    lines = example.splitlines()
    log.write_text("\n".join(lines[:2] + ['{"op":"wait","rank":0,"handle":"send_t"}'] + lines[2:])
                   + "\n")
    fixed = subprocess.run([sys.executable, "-m", "streamsim", "check", str(log)],
                           capture_output=True, text=True, cwd=ROOT)
    assert fixed.returncode == 0, fixed.stdout
