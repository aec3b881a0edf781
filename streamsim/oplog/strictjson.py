"""Strict JSON for one op-log line: no NaN/Infinity, no key given twice, JSON type names.

The standard decoder accepts ``NaN`` and keeps the last of two equal keys; an op log must say which
line is wrong instead (the reader turns these ``ValueError``s into ``FILE:LINE`` errors).
"""
from __future__ import annotations

import json
import re
from typing import Any


def type_name(v: Any) -> str:
    """How an error message names the JSON type of ``v``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise ValueError(f"duplicate field {k!r}")
            seen.add(k)
    return d


SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # a \ud800-\udfff escape (paired ones decode)
DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_no_constant)
