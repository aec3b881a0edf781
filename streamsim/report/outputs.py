"""Write every output of one run into a folder: reports, pictures, graph, Perfetto trace.

``write_outputs(report, out_dir)`` renders everything in memory first, then writes the files into a
fresh sibling folder and swaps it in whole (:func:`streamsim.report.atomic.replace_folder`). So a
renderer or a write that fails, or a kill at any point, leaves the folder as it was or holding the
new set, never a half-written file nor a set mixed from two runs (pictures an earlier run left and
this one does not make are gone with it). The folder must hold nothing but these files.

Files: ``report.md``, ``report.json``, ``report.html``, ``hb.svg``, ``hb.png``, ``hb.dot`` (the HB slice
of the featured hazard (first manifest, else first), else of the deadlock; absent, with a line in the report, when there is neither),
``timeline.png`` and ``trace.json`` (Chrome trace format, opens in Perfetto).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

import networkx as nx

from .atomic import replace_folder
from .document import Pictures, build_document
from .draw_hb import draw_hb, short_fix
from .figures import figure_bytes
from .html import page_title, to_html
from .markdown import to_markdown
from .perfetto import dumps_chrome_trace
from .jsonout import JSON_VERSION, dumps_json
from .report import Report
from ..analysis.slices import (deadlock_graph, dot_text, hazard_graph, hb_graph, hazard_ops, keep_steps,
                     step_range)
from .timeline import draw_timeline

HB_FILES = ("hb.svg", "hb.png", "hb.dot")
ALL_FILES = ("report.md", "report.json", "report.html", *HB_FILES, "timeline.png", "trace.json")
LONG_RUN_STEPS = 8  # above this many steps the timeline keeps the steps around the hazard
FIRST_OPS = 24  # ops the picture of a run with nothing to explain shows: its first, to orient
WINDOW = 2


@dataclass(frozen=True)
class HBPicture:
    """The HB slice to draw: its graph, title, node tags and missing-edge label."""

    graph: nx.DiGraph
    title: str
    subtitle: str
    tags: dict[int, str]
    missing_label: str
    caption: str


def title_of(report: Report) -> str:
    return f"{report.model} [{report.variant}]" if report.model else os.path.basename(report.source)


def hb_picture(report: Report) -> HBPicture | None:
    """The slice of the featured hazard (first manifest, else first), else of the deadlock; None when the run has neither."""
    t, f = report.trace, report.findings
    if f.hazards:
        h = f.featured
        x, y = hazard_ops(t, h)
        g = hazard_graph(t, h)
        mode = {h.first: h.first_mode, h.second: h.second_mode}
        step = lambda op: f" ({op.when()})" if op.when() else ""  # noqa: E731
        verdict = "MANIFEST" if h.manifest else "latent"
        return HBPicture(
            g, f"{h.kind} on {h.buffer}: {x.name}{step(x)} vs {y.name}{step(y)}, {verdict}",
            f"{title_of(report)}: happens-before slice of the featured hazard (first manifest, else first)",
            {x.id: mode[x.id].upper(), y.id: mode[y.id].upper()},
            short_fix(t, h.fix),
            "Happens-before slice of the featured hazard (the first manifest one, else the first): one lane per rank and stream or host "
            "thread, ops left to right in happens-before order, arrows styled by edge kind. The "
            "red ops are the two conflicting accesses; the red dashed arrow is the edge nothing "
            "provides, labelled with the fix. Full size: hb.svg, hb.png; the graph: hb.dot.")
    if f.deadlock is not None:
        g = deadlock_graph(t, f.deadlock)
        return HBPicture(g, g.graph["name"], f"{title_of(report)}: the blocked ops and what "
                         "precedes them", {n: "BLOCKED" for n in g.graph["focus"]}, "",
                         "The ops the blocked agents are stuck in (red) and the ops before them; "
                         "red dashed arrows: who waits for whom. Full size: hb.svg, hb.png; the "
                         "graph: hb.dot.")
    return None


def render_outputs(report: Report, json_version: int = JSON_VERSION) -> dict[str, bytes]:
    """Every output file's name and bytes, rendered in memory (nothing is written);
    ``report.json`` in JSON format version ``json_version``."""
    t, f = report.trace, report.findings
    files: dict[str, bytes] = {}
    svgs: dict[str, str] = {}

    pic = hb_picture(report)
    if pic is not None:
        fig = draw_hb(pic.graph, t, title=pic.title, tags=pic.tags,
                      missing_label=pic.missing_label, note=pic.subtitle)
        files["hb.png"] = figure_bytes(fig, "png")
        files["hb.svg"] = figure_bytes(fig, "svg")
        files["hb.dot"] = dot_text(pic.graph).encode()
        svgs["hb"] = figure_bytes(fig, "svg", svg_text=True).decode()

    hazard = f.featured
    window = WINDOW if hazard is not None and report.metrics.steps > LONG_RUN_STEPS else None
    fig = draw_timeline(t, hazard, title=report.summary(), window=window)
    files["timeline.png"] = figure_bytes(fig, "png")
    svgs["timeline"] = figure_bytes(fig, "svg", svg_text=True).decode()

    pictures = Pictures(
        hb="hb.svg" if pic is not None else None, hb_caption=pic.caption if pic else "",
        timeline="timeline.png",
        timeline_caption="Timeline: one lane per rank × stream and host thread, ops coloured by "
        "kind" + ("; red hatched: the featured hazard's two access windows." if hazard else "."),
        missing_hb="" if pic is not None else
        "No happens-before picture: the run has no hazard and no deadlock to explain.",
        notes=("Files: report.json (machine-readable findings), trace.json (open in "
               "https://ui.perfetto.dev)" + (", hb.dot (the HB slice)" if pic else "") + ".",))
    blocks = build_document(report, pictures)  # one document, two renderings: same content
    files["report.md"] = to_markdown(blocks).encode()
    files["report.html"] = to_html(blocks, page_title(report), svgs, f.clean).encode()
    files["report.json"] = dumps_json(report, json_version).encode()
    files["trace.json"] = dumps_chrome_trace(
        t, f, {"model": report.model, "variant": report.variant, "source": report.source}).encode()
    return files


def graph_file(report: Report, fmt: str, window: int | None = None) -> bytes:
    """One HB picture (``fmt`` png, svg or pdf) or its DOT text (``dot``): the slice of the first
    hazard, else of the deadlock; a run with neither has no finding to centre on, so its picture
    is small: the run's first ``FIRST_OPS`` ops, said so (its DOT text: the whole graph).
    ``window`` keeps the steps within that many steps of the finding."""
    pic = hb_picture(report)
    if pic is None:
        g = hb_graph(report.trace, (0,))  # a long run: the ops around its start
        n = len(report.trace)
        title = "no hazard, no deadlock: the run's first ops" if n else "no ops in this trace"
        note = title_of(report)
        if fmt != "dot" and g.number_of_nodes() > FIRST_OPS:
            g = g.subgraph(sorted(g)[:FIRST_OPS]).copy()
            note += f"; nothing to explain: the first {FIRST_OPS} of {n:,} ops, to orient"
        pic = HBPicture(g, title, note, {}, "", "")
    g, cut = pic.graph, 0
    if window is not None:
        focus = pic.graph.graph.get("focus", ())
        g, cut = keep_steps(g, report.trace, step_range(report.trace, focus, window), focus)
    if fmt == "dot":
        return dot_text(g).encode()
    note = pic.subtitle + (f"; steps within {window} of the finding ({cut} ops left out)"
                           if cut else "")
    fig = draw_hb(g, report.trace, title=pic.title, tags=pic.tags,
                  missing_label=pic.missing_label, note=note)
    return figure_bytes(fig, fmt)


def timeline_file(report: Report, fmt: str, window: int | None = None) -> bytes:
    """The timeline picture as ``fmt`` (png, svg or pdf); ``window`` as for :func:`graph_file`."""
    f = report.findings
    fig = draw_timeline(report.trace, f.featured,
                        title=report.summary(), window=window)
    return figure_bytes(fig, fmt)


def write_outputs(report: Report, out_dir: str, files: Mapping[str, bytes] | None = None,
                  json_version: int = JSON_VERSION) -> list[str]:
    """Render every output of ``report`` (``report.json`` in JSON format version
    ``json_version``), or take ``files``, what :func:`render_outputs` gave, then make ``out_dir``
    hold exactly them, swapped in whole (:func:`streamsim.report.atomic.replace_folder`: all or
    nothing, even if killed, and never mixed with a concurrent run's); returns the paths
    written."""
    if files is None:
        files = render_outputs(report, json_version)
    ours = {name: files[name] for name in ALL_FILES if name in files}
    replace_folder(out_dir, ours, ALL_FILES)
    return [os.path.join(out_dir, name) for name in ours]
