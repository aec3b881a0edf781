"""docs/gallery.md says what `streamsim compare` prints now: every table on the page is compared
with a fresh run of the command its marker names, every picture marker has its image on disk and
on the page, and every model of the gallery has its table (`make gallery` regenerates them)."""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

from streamsim.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "gallery.md").read_text(encoding="utf-8")
TABLES = re.findall(r"<!-- compare: ([^>]*?) -->\n```text\n(.*?)```", PAGE, re.S)
PICTURES = re.findall(r"<!-- picture: ([^>]*?) -->\n!\[[^\]]+\]\(([^)]+)\)", PAGE)


def compare(args: str) -> str:
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            code = main(["compare", *shlex.split(args)])
    finally:
        os.chdir(cwd)
    assert code in (0, 1), (args, code)
    return out.getvalue()


def test_the_page_has_a_table_for_every_gallery_model():
    models = {shlex.split(args)[0] for args, _ in TABLES}
    assert models == {"models/deepspeed_zero_ipg.py", "models/vllm_async_pinned.py",
                      "models/torch_pp_shared_stream.py", "models/megatron_dealloc.py"}


@pytest.mark.parametrize("args, table", TABLES, ids=[a for a, _ in TABLES])
def test_each_table_is_what_compare_prints_now(args, table):
    assert table == compare(args), f"docs/gallery.md is stale for `{args}`: run `make gallery`"


@pytest.mark.parametrize("args, image", PICTURES, ids=[i for _, i in PICTURES])
def test_each_picture_is_drawn_where_the_page_shows_it(args, image):
    argv = shlex.split(args)
    output = argv[argv.index("-o") + 1]
    assert output == f"docs/{image}"
    path = ROOT / output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readme_links_the_gallery():
    assert "(docs/gallery.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_recorded_section_has_every_recorded_run():
    """The section `make gallery-recorded` writes (real 2-rank runs: not byte-stable, so not
    compared with a fresh run; tests/record asserts their verdicts) has every run it lists."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("make_gallery_recorded",
                                                  ROOT / "docs" / "make_gallery_recorded.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    m = module.SECTION.search(PAGE)
    assert m, "docs/gallery.md has no recorded section"
    for name, *_ in module.RUNS:
        assert f"**{name}**" in m.group(2), f"{name} is missing: run `make gallery-recorded`"
