"""Report: one run's findings as text, JSON, Markdown and HTML, pictures, a Perfetto trace.

Public names: :class:`Report` with :func:`render_text` (``report``), :func:`dumps_json` (``jsonout``:
JSON format version 4, ``jsonv4``, or 3);
:func:`render_markdown` (``markdown``), :func:`render_html` (``html``), both from the block list of
``document``; :func:`write_outputs` (``outputs``: the whole set into a folder, atomically, with
``atomic``); pictures with matplotlib, imported on use: :func:`draw_hb` (``draw_hb``),
:func:`draw_timeline` (``timeline``); the Chrome/Perfetto trace (``perfetto``).
"""
from .report import Report, render_text

__all__ = ["Report", "dumps_json", "render_text"]


def __getattr__(name: str):
    if name == "dumps_json":  # (imported on first use: a text report writes no JSON)
        from .jsonout import dumps_json
        return dumps_json
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
