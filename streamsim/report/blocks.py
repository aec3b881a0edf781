"""The blocks a report document is made of (headings, paragraphs, lists, tables, pictures) and the
inline text helpers: what :mod:`streamsim.report.document` builds and the Markdown and HTML writers
render."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

Span = tuple[str, str]
Text = tuple[Span, ...]


@dataclass(frozen=True)
class Heading:
    level: int
    text: Text


@dataclass(frozen=True)
class Para:
    text: Text


@dataclass(frozen=True)
class Bullets:
    """A list; each item is its text and optional sub-items."""

    items: tuple[tuple[Text, tuple[Text, ...]], ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Text, ...], ...]


@dataclass(frozen=True)
class Image:
    """A picture: ``key`` names it for inlining (``hb``, ``timeline``), ``src`` is its relative path."""

    key: str
    src: str
    alt: str
    caption: Text = ()


Block = Union[Heading, Para, Bullets, Table, Image]


@dataclass(frozen=True)
class Pictures:
    """Which pictures exist beside the report (relative paths), and why the HB one may not."""

    hb: str | None = None
    hb_caption: str = ""
    timeline: str | None = None
    timeline_caption: str = ""
    missing_hb: str = ""  # the line to print instead of the HB picture
    notes: tuple[str, ...] = field(default_factory=tuple)


# --- inline helpers -------------------------------------------------------------------------------

def t(*parts: str | Span) -> Text:
    """Inline text from plain strings and ``(style, text)`` spans."""
    return tuple(p if isinstance(p, tuple) else ("", p) for p in parts if p != "")


def code(s: object) -> Span:
    return ("code", str(s))


def ticks(s: str) -> Text:
    """Text whose ```quoted``` parts are code spans (the analysis quotes code that way)."""
    return tuple(("code" if i % 2 else "", part) for i, part in enumerate(s.split("`")) if part)


def bold(s: object) -> Span:
    return ("b", str(s))


def us(x: float) -> str:
    return f"{x:,.1f} µs"


def nbytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"
