"""The HTML report read at 1,280 px: every piece of text in its inline pictures is at least 11 px
as rendered, computed from each SVG's width, viewBox and font sizes and the page's CSS."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from streamsim import run_model
from streamsim.report.draw_hb import wrap_name
from streamsim.report.html import CSS
from streamsim.report.outputs import render_outputs

VLLM = str(Path(__file__).resolve().parents[2] / "models" / "vllm_pp.py")
PAGE_PX = 1280
MIN_PX = 11.0


def column_px() -> float:
    """The width of the page's text column at a 1,280 px window, from the report's CSS: the body's
    max-width, or the window less the body's padding and a scrollbar when that is narrower."""
    body = re.search(r"body \{[^}]*\}", CSS).group(0)
    max_width = float(re.search(r"max-width: (\d+)px", body).group(1))
    pad_em = float(re.search(r"padding: 0 ([\d.]+)em", body).group(1))
    font_px = float(re.search(r"font: (\d+)px", body).group(1))
    return min(max_width, PAGE_PX - 15 - 2 * pad_em * font_px) - 2  # (the figure's 1 px border)


def svg_text_sizes(page: str) -> list[tuple[str, float, list[tuple[float, str]]]]:
    """Per inline SVG: its figure's label, its rendered px per user unit, its (font size, text)
    pairs. An SVG inside ``.wide`` (a box that scrolls) is shown at its natural size (pt -> px:
    4/3); any other is scaled down to the column when wider (``max-width: 100%``)."""
    out = []
    for m in re.finditer(r'<figure[^>]*aria-label="([^"]*)">(<div class="wide">)?(<svg.*?</svg>)',
                         page, flags=re.S):
        label, wide, svg = m.group(1), m.group(2), m.group(3)
        width_pt = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', svg).group(1))
        view_w = float(re.search(r'<svg[^>]*\bviewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))
        natural = width_pt * 4 / 3
        shown = natural if wide else min(natural, column_px())
        texts = [(float(size), text) for size, text in re.findall(
            r'<text[^>]*font-size: ([\d.]+)px[^>]*>([^<]*)</text>', svg)]
        out.append((label, shown / view_w, texts))
    return out


@pytest.fixture(scope="module")
def demo_page() -> str:
    report = run_model(VLLM, "regressed_49274", fix_cost=False)
    return render_outputs(report)["report.html"].decode()


def test_every_svg_text_of_the_demo_report_is_at_least_11_px_at_1280(demo_page):
    """The HB slice was scaled to the page: its node text rendered at about 5 px. It is now shown
    at its natural size in a box that scrolls sideways (node text 12 px), and the timeline is
    drawn at the column's width (its smallest text 11.3 px)."""
    figures = svg_text_sizes(demo_page)
    assert [label for label, _, _ in figures] == ["happens-before slice", "timeline"]
    for label, px_per_unit, texts in figures:
        assert len(texts) > 20, label  # text is text (searchable), not glyph outlines
        small = [(round(size * px_per_unit, 1), text) for size, text in texts
                 if size * px_per_unit < MIN_PX]
        assert not small, (label, small[:5])


def test_node_labels_are_whole(demo_page):
    """Long op names were cut ("isend(hidden_s…"): they wrap onto up to three lines now."""
    assert "hidden_s…" not in demo_page
    hb = next(svg for label, _, svg in [(m.group(1), None, m.group(2)) for m in re.finditer(
        r'aria-label="([^"]*)"><div class="wide">(<svg.*?</svg>)', demo_page, flags=re.S)])
    lines = re.findall(r"<text[^>]*>([^<]*)</text>", hb)
    assert not any(ln.endswith("…") for ln in lines)
    # the featured race's send, "isend(intermediate_tensors.residual) to rank3", whole
    assert wrap_name("isend(intermediate_tensors.residual) to rank3") == \
        ["isend(intermedia", "te_tensors.resid", "ual) to rank3"]
    assert "isend(intermedia" in lines and "ual) to rank3" in lines
    assert "copy_ into" in lines and "tensors.residual" in lines  # the write it races with


@pytest.mark.parametrize("name, lines", [
    ("isend(hidden_states) to rank1", ["isend(hidden_", "states) to rank1"]),
    ("launch forward (CUDA graph replay)", ["launch forward", "(CUDA graph", "replay)"]),
    ("forward", ["forward"]),
    ("x" * 60, ["x" * 16, "x" * 16, "x" * 15 + "…"]),  # only a name beyond 3 full lines is cut
    # the nicest breaks would need 4 lines, but it fits 3 split anywhere: whole, not cut
    ("isend(intermediate_tensors.residual) to rank3",
     ["isend(intermedia", "te_tensors.resid", "ual) to rank3"]),
])
def test_wrap_name(name, lines):
    assert wrap_name(name) == lines


def test_the_page_opens_the_wide_slice_on_the_conflicting_ops(demo_page):
    """The red boxes carry ids the page's script centres in the scrolling box."""
    assert re.search(r'id="hb-focus-first-\d+"', demo_page)
    assert re.search(r'id="hb-focus-second-\d+"', demo_page)
    assert "scrollLeft" in demo_page


def test_every_lane_label_of_the_wide_slice_can_be_kept_in_view(demo_page):
    """Scrolled to the conflicting ops, the slice's lane labels were out of view: the page's script
    copies every label group (``lane-label-N``) into a column beside the scrolling box, so each
    lane's label must carry that id, once per lane."""
    hb = re.search(r'aria-label="happens-before slice"><div class="wide">(<svg.*?</svg>)',
                   demo_page, flags=re.S).group(1)
    ids = re.findall(r'<g id="hb-lane-label-(\d+)">', hb)
    lanes = len(re.findall(r"<text[^>]*font-size: 10px[^>]*>(rank\d+ / [^<]*)</text>", hb))
    assert ids == [str(i) for i in range(len(ids))] and len(ids) == lanes > 3
    assert "lane-labels" in demo_page and 'querySelectorAll(\'[id*="lane-label-"]\')' in demo_page


def test_the_wide_slice_title_and_notes_are_pinned_outside_the_scrolling_box(demo_page):
    """Opened scrolled to the conflicting ops, the slice's title and note (drawn at the picture's
    left edge) and its legend (centred) were cut: each carries a ``pinned-`` id that the page's
    script copies above or below the scrolling box."""
    hb = re.search(r'aria-label="happens-before slice"><div class="wide">(<svg.*?</svg>)',
                   demo_page, flags=re.S).group(1)
    assert re.search(r'<g id="hb-pinned-above">', hb)
    assert re.search(r'<g id="hb-pinned-below-0">', hb)  # the legend
    assert re.search(r'<g id="hb-pinned-below-1">', hb)  # the note
    assert 'querySelectorAll(\'[id*="pinned-"]\')' in demo_page


def test_the_missing_edge_bends_around_the_boxes_between_its_ops():
    """The red missing edge crossed a node of the demo's slice; it now takes the least bent
    arc that clears every other box, and is drawn above them."""
    from streamsim.report.draw_hb import _arc_points, _route
    half = (0.48, 0.42)
    rad, points = _route((0, 2), (4, 0), [(3, 2), (2, 1)], half)  # a straight line hits (2, 1)
    assert rad != 0
    assert not any(abs(x - bx) < half[0] and abs(y - by) < half[1]
                   for x, y in points[1:-1] for bx, by in [(3, 2), (2, 1)])
    assert _route((0, 0), (3, 0), [(5, 5)], half)[0] == 0  # nothing in the way: straight
    assert _arc_points((0, 0), (3, 0), 0.0)[12] == pytest.approx((1.5, 0.0))


def test_demo_slice_draws_the_missing_edge_on_top():
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from streamsim.report.draw_hb import draw_hb
    from streamsim.report.outputs import hb_picture
    report = run_model(VLLM, "regressed_49274", fix_cost=False)
    pic = hb_picture(report)
    fig = draw_hb(pic.graph, report.trace, title=pic.title, tags=pic.tags,
                  missing_label=pic.missing_label)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    red = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and p.get_linewidth() >= 2.3]
    assert len(red) == 1 and red[0].get_zorder() > max(b.get_zorder() for b in boxes)


def test_timeline_axis_in_seconds_or_ms_and_host_waits_as_thin_bands():
    """The demo's axis ran in raw µs up to 2,000,000 and each host lane was one long bar (a
    thread blocked in a receive): ticks are in s (ms for shorter runs) with few digits, and a
    host's blocking wait is a thin band labelled "waits: ..." so its own work stands out."""
    from matplotlib.patches import Rectangle
    from streamsim.report.timeline import draw_timeline, time_unit
    report = run_model(VLLM, "regressed_49274", fix_cost=False)
    fig = draw_timeline(report.trace, report.findings.featured)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_xlabel() == "simulated time (s)"
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ("1.0" in ticks or "1" in ticks) and all(len(t) <= 4 for t in ticks), ticks
    bands = [t.get_text() for t in ax.texts if t.get_text().startswith("waits: ")]
    assert any("recv" in b for b in bands)
    thin = [p for p in ax.patches if isinstance(p, Rectangle) and abs(p.get_height() - 0.24) < 1e-9]
    assert thin
    assert time_unit(5_000) == ("ms", 1e3) and time_unit(500) == ("µs", 1.0)


def test_timeline_title_and_note_neither_clipped_nor_overlapping():
    """The timeline's note ("steps 0-4 only ...") sat beside the title, and the longer titles of
    root-cause reports ran into it: it now has its own line, and a long title wraps."""
    from streamsim.report.timeline import draw_timeline
    report = run_model(VLLM, "regressed_49274", fix_cost=False)
    for title in (report.summary(), "a title long enough to wrap " * 8):
        fig = draw_timeline(report.trace, report.findings.featured, title=title, window=2)
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        head = fig._suptitle.get_window_extent(r)
        note = next(t for t in fig.texts if "only" in t.get_text()).get_window_extent(r)
        for box in (head, note):
            assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height
        assert note.y1 <= head.y0  # below the title, not beside it
        assert fig.axes[0].get_window_extent(r).y1 <= note.y0
        for text in fig.texts:  # the hazard's lines too (its op names are long): none cut
            box = text.get_window_extent(r)
            assert box.x0 >= 0 and box.x1 <= fig.bbox.width, text.get_text()


CODE_PX, TEXT_PX = 0.602 * 13, 0.6 * 15  # px per character: 13 px DejaVu Sans Mono, 15 px text


def min_content_px(cell: str) -> float:
    """The widest run of a table cell's HTML that cannot wrap, in px: runs end at white space and
    at ``<wbr>``; code counts at the code font's width (a model of the browser's min-content width
    that ignores ``overflow-wrap: anywhere``, the page's last resort)."""
    widest = run = 0.0
    for code, part in re.findall(r"<code>(.*?)</code>|([^<]+|<[^>]*>)", cell):
        text, px = (code, CODE_PX) if code else (part, TEXT_PX)
        for piece in re.split(r"(<wbr>|\s+|<[^>]*>)", text):
            if piece == "<wbr>" or (piece.strip() == "" and piece):
                widest, run = max(widest, run), 0.0
            elif not piece.startswith("<"):
                run += len(html.unescape(piece)) * px
    return max(widest, run)


def table_min_px(table: str) -> float:
    """Each column's widest cell (plus its padding, .6em a side, and border) summed over columns."""
    rows = [re.findall(r"<t[hd]>(.*?)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)]
    return sum(max(min_content_px(row[i]) for row in rows) + 2 * 0.6 * 15 + 1
               for i in range(len(rows[0])))


def test_every_column_of_every_table_fits_the_page_at_1280(demo_page):
    """The root-cause table was wider than the page (its long code names cannot wrap): at 1,280 px
    the fix-cost column was cut off behind a horizontal scroll of the page. A name in a table cell
    now wraps after its dots, underscores, parentheses (``<wbr>``), and anywhere as a last resort
    (the CSS), so every table's narrowest layout fits the page's column."""
    tables = re.findall(r"<table>.*?</table>", demo_page, flags=re.S)
    assert len(tables) >= 3 and "fix cost (makespan)" in tables[1]
    for table in tables:
        assert table_min_px(table) <= column_px(), table[:200]
    assert re.search(r"td, td code \{ overflow-wrap: anywhere; \}", CSS)
    assert "intermediate_<wbr>tensors.<wbr>residual" in tables[1]


def test_the_min_content_model_sees_an_unbreakable_name():
    assert min_content_px("<code>abc</code> de") == pytest.approx(3 * CODE_PX)
    assert min_content_px("<code>abc.<wbr>defg</code>") == pytest.approx(4 * CODE_PX)
    assert min_content_px("x &amp; y") == pytest.approx(TEXT_PX)
