"""Names from an op log cannot escape their place in a report (issue 19 item 9): no Markdown code
span broken, no HTML opened, no control character written to a terminal, no line forged.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamsim.cli.main import main
from streamsim.report.escape import md_code, md_text, terminal, terminal_lines, visible


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


HOSTILE = ["x``<script>alert(1)</script>``", "``` <img src=x onerror=alert(1)>",
           "a\n\n<script>b</script>", "\x1b[2J\x1b[HALL CLEAN",
           "tab\there\rALL CLEAN: 0 data hazards"]


def hostile_log(tmp_path) -> str:
    lines = []
    for i, name in enumerate(HOSTILE):
        lines.append({"op": "launch", "name": name, "writes": [name], "stream": f"s{i}"})
        lines.append({"op": "launch", "name": name + "!", "writes": [name], "stream": f"t{i}"})
    return write(tmp_path, "hostile.jsonl", "".join(json.dumps(x) + "\n" for x in lines))


def test_markdown_names_cannot_open_html_or_break_their_code_span(tmp_path, capsys):
    """A buffer name with double backticks broke out of its code span: report.md carried a live
    <script> under CommonMark. Rendered by a CommonMark parser, no name opens an HTML tag."""
    from markdown_it import MarkdownIt
    assert main(["check", hostile_log(tmp_path), "--format", "markdown"]) == 1
    html = MarkdownIt("commonmark").render(capsys.readouterr().out)
    assert "<script" not in html and "<img" not in html, html
    assert "x``&lt;script&gt;alert(1)&lt;/script&gt;``" in html  # shown, as code


def test_text_output_shows_control_characters_escaped(tmp_path, capsys):
    """The text report wrote names' control characters to the terminal (clear screen, a forged
    summary line): they are shown as escapes, and no name starts a line of its own."""
    assert main(["check", hostile_log(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\t" not in out
    assert "\\x1b[2J\\x1b[HALL CLEAN" in out and "tab\\there\\rALL CLEAN" in out
    assert not any(line.startswith(("ALL CLEAN", "<script>")) for line in out.splitlines())


def test_html_shows_control_characters_escaped(tmp_path):
    """The HTML page escapes markup (as before) and now shows control characters as escapes."""
    from streamsim.pipeline import check_oplog
    from streamsim.report.html import render_html
    page = render_html(check_oplog(hostile_log(tmp_path)))
    assert "\x1b" not in page and "\\x1b[2J" in page
    assert "<script>alert" not in page and "<script>b" not in page and "<img src=x" not in page


@pytest.mark.parametrize("command, picture", [("graph", "g.svg"), ("timeline", "t.svg")])
def test_pictures_draw_any_name_as_plain_text(tmp_path, capsys, command, picture):
    """A name holding ``$`` was read as matplotlib mathtext: `a$\\frac{$b` made graph and timeline
    fail with a ParseSyntaxException traceback; control characters went raw into the SVG."""
    log = write(tmp_path, "math.jsonl",
                '{"op":"launch","name":"a$\\\\frac{$b","writes":["x$^"]}\n'
                '{"op":"launch","stream":"s","name":"\\u001b[2Jz","writes":["x$^"]}\n')
    assert main([command, log, "-o", str(tmp_path / picture)]) == 1, capsys.readouterr().err
    svg = (tmp_path / picture).read_text()
    assert "\x1b" not in svg


@pytest.mark.parametrize("name", ["plain", "a`b", "``", "`start", "end`", " padded ", "x```y`",
                                  "line\nbreak", "\r\r<b>x</b>"])
def test_a_code_span_holds_any_name_literally(name):
    """Under CommonMark, the span renders as exactly one <code> element holding the name (line
    breaks shown escaped): nothing before or after it."""
    import html
    from markdown_it import MarkdownIt
    page = MarkdownIt("commonmark").render("before " + md_code(name) + " after")
    assert page == f"<p>before <code>{html.escape(visible(name), quote=False)}</code> after</p>\n"


def test_helpers_escape_control_characters_and_keep_lines():
    """visible() escapes every control character, terminal() all but newlines, terminal_lines()
    each line's own; md_text() escapes markup."""
    assert visible("a\x1b[2J\n\t\u2028") == "a\\x1b[2J\\n\\t\\u2028"
    assert terminal("one\x07\ntwo\n") == "one\\x07\ntwo\n"
    assert terminal_lines(["a\nb", "c"]) == "a\\nb\nc\n"
    assert md_text("<script>") == "\\<script\\>"
