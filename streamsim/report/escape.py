"""Names from a model or an op log, made safe to show in a terminal, in Markdown and in HTML.

An op log may come from anyone, and its names (ops, buffers, streams, groups, events) reach every
report. Each renderer inserts them through one of these helpers, so that no name can clear the
screen or forge a line of the text report, break out of its Markdown code span, or open HTML.
"""
from __future__ import annotations

import re
from typing import Iterable

# C0 controls, DEL, C1 controls, and the Unicode line and paragraph separators
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Characters that could start Markdown markup; ``_`` only at a word's edge (intraword ``_`` is
# literal in GFM).
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>]|(?<!\w)_|_(?!\w))")
_BACKTICKS = re.compile(r"`+")


def _shown(m: re.Match) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\n``, ...): one
    line of plain characters, whatever a name holds."""
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def terminal(text: str) -> str:
    """Multi-line output for a terminal: every control character escaped except the newlines that
    separate its lines (a name with a newline must be escaped before, by :func:`visible`)."""
    return _CONTROL_BUT_NEWLINE.sub(_shown, text) if _CONTROL_BUT_NEWLINE.search(text) else text


def terminal_lines(lines: Iterable[str]) -> str:
    """Lines of a text report joined for a terminal: each shown with :func:`visible`, so that a
    name cannot add a line of its own."""
    return "\n".join(map(visible, lines)) + "\n"


def md_text(text: str) -> str:
    """Plain Markdown text: markup characters backslash-escaped (so ``<`` cannot open HTML),
    control characters and line breaks shown escaped."""
    return _MD_SPECIAL.sub(r"\\\1", visible(text))


def md_code(text: str) -> str:
    """A Markdown code span that holds ``text`` literally, whatever it is: the fence is longer
    than any run of backticks inside (CommonMark), padded with spaces when the text starts or ends
    with a backtick or a space, and line breaks (which could end the paragraph, and the span
    with it) are shown escaped."""
    text = visible(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
