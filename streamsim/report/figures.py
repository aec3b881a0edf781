"""Turn a matplotlib figure into bytes (PNG, SVG, PDF) in memory, reproducibly.

Renderers build :class:`matplotlib.figure.Figure` objects directly (no ``pyplot``: no global figure
state, no GUI backend) and callers decide where the bytes go, so that a report can render every file
before writing any of them (see :mod:`streamsim.report.outputs`).
"""
from __future__ import annotations

import io
import warnings

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from .escape import terminal


FORMATS = ("png", "svg", "pdf", "jpg", "jpeg")  # (JPEG: by Pillow, a matplotlib dependency)
DPI = 120

# No dates or tool versions in the files, and stable SVG ids: the same run gives the same bytes.
_METADATA = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
             "pdf": {"CreationDate": None, "Producer": None, "Creator": None},
             "jpg": None, "jpeg": None}  # (a JPEG carries no date: nothing to remove)


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` × ``height`` inches with an Agg canvas attached (no pyplot)."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _plain_text(fig: Figure) -> None:
    """Every text of ``fig`` as plain characters: a name from an op log may hold ``$`` (read as
    mathtext: a name like ``a$\\frac{$`` failed to render) or control characters (shown escaped,
    as in every report; newlines kept, they break labels on purpose)."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
        shown = text.get_text()
        if shown and shown != terminal(shown):
            text.set_text(terminal(shown))


def figure_bytes(fig: Figure, fmt: str, dpi: int = DPI, *, svg_text: bool = False) -> bytes:
    """``fig`` rendered as ``fmt`` (png, svg, pdf or jpg). ``svg_text``: an SVG's text as
    ``<text>`` elements (for a web page: searchable, selectable, its size readable from the file)
    rather than glyph outlines (the default: the picture looks the same in every viewer)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown picture format {fmt!r} (use {', '.join(FORMATS)})")
    _plain_text(fig)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "streamsim",
                                "svg.fonttype": "none" if svg_text else "path"}), \
            warnings.catch_warnings():
        # a name in a script the font lacks (CJK, say) is drawn as boxes; matplotlib also warns
        # once per glyph, dozens of lines on stderr for one picture: the picture says enough
        warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font", UserWarning)
        extra = {"metadata": _METADATA[fmt]} if _METADATA[fmt] is not None else \
            {"pil_kwargs": {"quality": 92}}
        fig.savefig(buf, format=fmt, dpi=dpi, **extra)
    return buf.getvalue()

