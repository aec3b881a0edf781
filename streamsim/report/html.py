"""The HTML report: one self-contained page (inline SVG pictures, inline CSS, no network).

It renders the same :mod:`streamsim.report.document` blocks as the Markdown report. Every piece of text is
escaped; pictures are inlined as SVG, with their element ids prefixed so two pictures on one page
cannot clash.
"""
from __future__ import annotations

import html
import re
from typing import Mapping

from .escape import visible
from .document import (Block, Bullets, Heading, Image, Para, Pictures, Table, Text,
                       build_document)
from .report import Report

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       max-width: 1180px; margin: 2em auto; padding: 0 1.2em; }
h1 { font-size: 1.6em; margin-bottom: .3em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em;
margin-top: 1.8em; } h3 { margin-top: 1.4em; color: #8b0000; }
code { font: 13px ui-monospace, "DejaVu Sans Mono", Menlo, monospace; background: #f3f3f5;
       padding: 0 .25em; border-radius: 3px; overflow-wrap: break-word; }
table { border-collapse: collapse; margin: .6em 0; } td, th { border: 1px solid #d0d0d7;
padding: .25em .6em; text-align: left; vertical-align: top; } th { background: #f3f3f5; }
td, td code { overflow-wrap: anywhere; }
li { margin: .2em 0; } figure { margin: 1em 0; } figcaption { color: #555; font-size: .9em; }
figure svg { max-width: 100%; height: auto; border: 1px solid #e3e3e8; }
.wide { overflow-x: auto; } .wide svg { max-width: none; }
.wide-row { display: flex; align-items: flex-start; } .wide-row .wide { flex: 1; min-width: 0; }
.lane-labels { flex: none; border-right: 1px solid #ddd; }
svg.pinned { display: block; max-width: 100%; border: none; }
.summary { font-size: 1.1em; padding: .5em .8em; background: #fff4f4; border-left: 4px solid #c00; }
.clean { background: #f2fbf2; border-left-color: #2a2; }
"""

# A wide picture keeps its lane labels in a column of their own beside the box that scrolls, then
# opens with its red (conflicting or blocked) ops in the middle of the box.
SCROLL_TO_FOCUS = """
document.querySelectorAll(".wide").forEach(function (box) {
  var svg = box.querySelector("svg");
  var labels = svg ? svg.querySelectorAll('[id*="lane-label-"]') : [];
  if (!labels.length || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) return;
  var r = svg.getBoundingClientRect(), scale = r.width / svg.viewBox.baseVal.width, w = 0;
  labels.forEach(function (e) { w = Math.max(w, e.getBoundingClientRect().right - r.left); });
  w = Math.ceil(w + 6);
  var ns = "http://www.w3.org/2000/svg", column = document.createElementNS(ns, "svg");
  column.setAttribute("width", w + "px");
  column.setAttribute("height", r.height + "px");
  column.setAttribute("viewBox", "0 0 " + w / scale + " " + svg.viewBox.baseVal.height);
  column.setAttribute("class", "lane-labels");
  labels.forEach(function (e) {
    column.appendChild(e.cloneNode(true));
    e.style.visibility = "hidden";  // (the picture's own label margin stays: titles start there)
  });
  var row = document.createElement("div");
  row.className = "wide-row";
  box.parentNode.insertBefore(row, box);
  row.appendChild(column);
  row.appendChild(box);
  // the title above, the legend and the notes below (pinned-below-N, in N's order), out of the
  // box, which opens scrolled sideways
  var below = row;
  Array.from(svg.querySelectorAll('[id*="pinned-"]')).sort(function (a, b) {
    return (parseInt(a.id.split("-").pop(), 10) || 0) - (parseInt(b.id.split("-").pop(), 10) || 0);
  }).forEach(function (e) {
    var b = e.getBBox(), pin = document.createElementNS(ns, "svg");
    pin.setAttribute("width", Math.ceil(b.width * scale) + "px");
    pin.setAttribute("height", Math.ceil(b.height * scale) + "px");
    pin.setAttribute("viewBox", b.x + " " + b.y + " " + b.width + " " + b.height);
    pin.setAttribute("class", "pinned");
    pin.appendChild(e.cloneNode(true));
    e.style.visibility = "hidden";
    if (e.id.indexOf("pinned-above") >= 0) {
      row.parentNode.insertBefore(pin, row);
    } else {
      row.parentNode.insertBefore(pin, below.nextSibling);
      below = pin;
    }
  });
});
document.querySelectorAll(".wide").forEach(function (box) {
  var red = box.querySelectorAll('[id*="focus-"]');
  if (!red.length) return;
  var lo = Infinity, hi = -Infinity, left = box.getBoundingClientRect().left;
  red.forEach(function (e) { var r = e.getBoundingClientRect();
    lo = Math.min(lo, r.left - left); hi = Math.max(hi, r.right - left); });
  box.scrollLeft += (lo + hi) / 2 - box.clientWidth / 2;
});
"""

_ID = re.compile(r'\bid="([^"]+)"')


def scope_svg(svg: str, prefix: str) -> str:
    """``svg`` without its XML prolog, every ``id`` and reference to it prefixed with ``prefix``."""
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    ids = set(_ID.findall(svg))
    if not ids:
        return svg

    def ref(m: re.Match) -> str:
        name = m.group(2)
        return f"{m.group(1)}{prefix}{name}" if name in ids else m.group(0)

    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    return re.sub(r'(#)([A-Za-z_][\w.:-]*)', ref, svg)


_BREAK_AFTER = re.compile(r"([._(/,])(?=.)")  # where a long name in a table cell may wrap


def inline(text: Text, *, wrap_names: bool = False) -> str:
    """``text`` as HTML; ``wrap_names`` (table cells): code may break after ``. _ ( / ,`` (a
    ``<wbr>``), so a column of long tensor and op names wraps there instead of widening the table
    past the page (the CSS breaks anywhere only where a name has no such place)."""
    out = []
    for style, s in text:
        e = html.escape(visible(s))  # (a control character in a name shows as its escape)
        if style == "code" and wrap_names:
            e = _BREAK_AFTER.sub(r"\1<wbr>", e)
        out.append(f"<code>{e}</code>" if style == "code" else
                   f"<strong>{e}</strong>" if style == "b" else e)
    return "".join(out)


def _block(b: Block, svgs: Mapping[str, str]) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{inline(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{inline(b.text)}</p>"
    if isinstance(b, Bullets):
        items = []
        for head, subs in b.items:
            sub = ("<ul>" + "".join(f"<li>{inline(s)}</li>" for s in subs) + "</ul>") if subs else ""
            items.append(f"<li>{inline(head)}{sub}</li>")
        return "<ul>" + "".join(items) + "</ul>"
    if isinstance(b, Table):
        head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
        rows = "".join("<tr>" + "".join(f"<td>{inline(c, wrap_names=True)}</td>" for c in row)
                       + "</tr>" for row in b.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    if isinstance(b, Image):
        svg = svgs.get(b.key)
        body = (scope_svg(svg, f"{b.key}-") if svg is not None else
                f'<img src="{html.escape(b.src, quote=True)}" alt="{html.escape(b.alt, quote=True)}">')
        cap = f"<figcaption>{inline(b.caption)}</figcaption>" if b.caption else ""
        if b.key == "hb":  # at its natural size (node text 12 px), in a box that scrolls sideways
            body = f'<div class="wide">{body}</div>'  # (scaled to the page it was 5 px)
            cap = cap.replace("</figcaption>", " Scroll sideways for the rest of the slice; "
                              "it opens centred on the two conflicting ops.</figcaption>")
        # Other pictures fit the page at their natural size; vector, so zooming stays sharp.
        return (f'<figure role="img" aria-label="{html.escape(b.alt, quote=True)}">{body}'
                f'{cap}</figure>')
    raise TypeError(f"unknown block {type(b).__name__}")


def to_html(blocks: list[Block], title: str, svgs: Mapping[str, str], clean: bool) -> str:
    body = []
    for i, b in enumerate(blocks):
        part = _block(b, svgs)
        if i == 1 and isinstance(b, Para):  # the summary line
            part = f'<p class="summary{" clean" if clean else ""}">{inline(b.text)}</p>'
        body.append(part)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n" + "\n".join(body) + "\n"
            f"<script>{SCROLL_TO_FOCUS}</script>\n</body></html>\n")


def page_title(report: Report) -> str:
    return f"streamsim: {report.summary()}"


def render_html(report: Report, pictures: Pictures | None = None,
                svgs: Mapping[str, str] | None = None) -> str:
    """The HTML page of ``report``; ``svgs`` maps a picture key (``hb``, ``timeline``) to its SVG
    text, inlined in place of the picture file."""
    return to_html(build_document(report, pictures), page_title(report), svgs or {},
                   report.findings.clean)
