"""The Markdown report: :mod:`streamsim.report.document`'s blocks written as GitHub-flavoured Markdown.

Meant to be pasted into a code review; pictures are relative links to the files written beside it.
"""
from __future__ import annotations

from .document import (Block, Bullets, Heading, Image, Para, Pictures, Table, Text,
                       build_document)
from .escape import md_code as _code, md_text as _escape  # no name can break out or open HTML
from .report import Report


def inline(text: Text) -> str:
    """Spans as Markdown (plain text escaped; ``code`` in backticks; ``b`` in double stars)."""
    out = []
    for style, s in text:
        if style == "code":
            out.append(_code(s))
        elif style == "b":
            out.append(f"**{_escape(s)}**")
        else:
            out.append(_escape(s))
    return "".join(out).replace("\n", " ")


def _block(b: Block) -> str:
    if isinstance(b, Heading):
        return "#" * b.level + " " + inline(b.text)
    if isinstance(b, Para):
        return inline(b.text)
    if isinstance(b, Bullets):
        lines = []
        for head, subs in b.items:
            lines.append("- " + inline(head))
            lines.extend("  - " + inline(s) for s in subs)
        return "\n".join(lines)
    if isinstance(b, Table):
        rows = ["| " + " | ".join(_escape(h) for h in b.header) + " |",
                "|" + "---|" * len(b.header)]
        rows += ["| " + " | ".join(inline(c).replace("|", "\\|") for c in row) + " |"
                 for row in b.rows]
        return "\n".join(rows)
    if isinstance(b, Image):
        cap = f"\n\n*{inline(b.caption)}*" if b.caption else ""
        return f"![{_escape(b.alt)}]({b.src}){cap}"
    raise TypeError(f"unknown block {type(b).__name__}")


def to_markdown(blocks: list[Block]) -> str:
    return "\n\n".join(_block(b) for b in blocks) + "\n"


def render_markdown(report: Report, pictures: Pictures | None = None) -> str:
    """The Markdown report of ``report``; with ``pictures``, the files it links to (see
    :class:`~streamsim.report.document.Pictures`)."""
    return to_markdown(build_document(report, pictures))
