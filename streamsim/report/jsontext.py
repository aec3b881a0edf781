"""``json.dumps(obj, indent=2)`` and ``json.dumps(obj, separators=(",", ":"))``, the same text,
from orjson's C encoder.

With ``indent`` the standard library falls back to its pure-Python encoder: most of the run time of
``check --format json`` on a large log. orjson (``OPT_INDENT_2``) writes the same layout and the same
text for ASCII strings, integers, and floats at or above 1e-4. Where it differs, it is repaired here
or handed back to the standard library:

* non-ASCII and DEL characters: orjson writes them raw (UTF-8), json escapes them (``\\u00e9``, a
  surrogate pair above U+FFFF): escaped after the fact (only string contents are not ASCII);
* non-zero floats below 1e-4: orjson writes ``0.00001`` or ``1e-7``, json ``1e-05`` and ``1e-07``
  (``repr``): each such number token outside a string is re-written with ``repr`` (both are the
  shortest text that reads back as the same float, so ``repr(float(token))`` is json's);
* integers beyond 64 bits, non-string keys, lone surrogates, nesting over 255: orjson refuses, and
  the standard library writes the whole text.

One difference is kept on purpose: a NaN or infinite float is written ``null`` (orjson's choice and
RFC 8259's: json's ``NaN`` is not JSON), on the fallback path too.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

_NON_ASCII = re.compile(r"[^\x00-\x7e]+")
# A JSON string (skipped as it is) or a number token written in fixed or exponent form below 1e-4.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"'
                    r'|(?<![0-9.])(-?(?:0\.0000[0-9]*|[0-9]+(?:\.[0-9]+)?e-[0-9]+))')


def dumps_indented(obj: Any) -> str:
    """The text ``json.dumps(obj, indent=2)`` writes (non-finite floats as ``null``)."""
    try:
        raw = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    except (TypeError, orjson.JSONEncodeError):  # big ints, non-string keys, surrogates, depth
        return json.dumps(_finite(obj), indent=2)
    return repaired(raw)


def dumps_compact(obj: Any) -> str:
    """The text ``json.dumps(obj, separators=(",", ":"))`` writes (non-finite floats as ``null``):
    one line, no spaces."""
    return repaired(encode_compact(obj))


def encode_compact(obj: Any) -> bytes:
    """orjson's compact bytes for ``obj``, to be passed through :func:`repaired` (alone or joined
    with others: the repairs work on the whole text); where orjson refuses, the standard library's
    text, which :func:`repaired` leaves as it is."""
    try:
        return orjson.dumps(obj)
    except (TypeError, orjson.JSONEncodeError):  # big ints, non-string keys, surrogates, depth
        return json.dumps(_finite(obj), separators=(",", ":")).encode("ascii")


def repaired(raw: bytes) -> str:
    """orjson's text made json's: non-ASCII and DEL escaped, floats below 1e-4 as ``repr``
    writes them. (Text json wrote already is left unchanged: both repairs are idempotent.)"""
    tiny = _tiny_float(raw)
    plain = raw.isascii() and b"\x7f" not in raw
    if plain and not tiny:
        return raw.decode("ascii")
    text = raw.decode("utf-8")
    if not plain:
        text = _NON_ASCII.sub(_escape, text)
    if tiny:  # (perhaps only inside a string: the rewrite below skips strings)
        text = _TOKEN.sub(_json_number, text)
    return text


_DIGITS = frozenset(b"0123456789")
_NUMBER_CHARS = _DIGITS | {ord(".")}


def _tiny_float(raw: bytes) -> bool:
    """Whether orjson's text may hold a float below 1e-4: a token ``0.0000...`` (``20.00001`` is
    another token) or ``<digit>e-<digit>``. (bytes.find: a regex is 100 times slower here.)"""
    i = raw.find(b"0.0000")
    while i >= 0:
        if i == 0 or raw[i - 1] not in _NUMBER_CHARS:
            return True
        i = raw.find(b"0.0000", i + 1)
    i = raw.find(b"e-", 1)
    while i >= 0:
        if raw[i - 1] in _DIGITS and raw[i + 2:i + 3].isdigit():
            return True
        i = raw.find(b"e-", i + 2)
    return False


def _escape(m: re.Match) -> str:
    """json's ``ensure_ascii`` escapes of a run of non-ASCII (or DEL) characters."""
    out = []
    for ch in m.group():
        c = ord(ch)
        if c > 0xFFFF:  # a surrogate pair, as json writes it
            c -= 0x10000
            out.append(f"\\u{0xD800 | (c >> 10):04x}\\u{0xDC00 | (c & 0x3FF):04x}")
        else:
            out.append(f"\\u{c:04x}")
    return "".join(out)


def _json_number(m: re.Match) -> str:
    token = m.group(1)
    return m.group() if token is None else repr(float(token))


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None (for the fallback path)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
