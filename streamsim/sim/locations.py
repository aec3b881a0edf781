"""Where a model issued an op: the ``file:line`` of the innermost frame outside streamsim.

Every op records it, so this is on the hot path: :func:`location_finder` caches per code object.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Protocol


class Issuing(Protocol):
    """What :func:`location_finder` reads of the engine: the kind of op being issued."""

    location_kind: str

# the streamsim package: frames in any of its modules are the library's, not the model's
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def location_finder(engine: Issuing) -> Callable[..., str]:
    """``location(kind=None)``: the ``file:line`` of the innermost caller outside the streamsim
    package (the model's line) of the op of ``kind`` being issued (default
    ``engine.location_kind``; ``"host.buffer"`` for an allocation), cached: one per engine (so a
    later run in another working directory computes its own paths). Per code object it keeps
    the display path (relpath is slow: an allocation's uncached walk once cost vllm_pp's runs
    more than their HB passes) and the ``file:line`` string of each instruction offset
    (``f_lineno`` scans the line table), so ops issued from one model line share one location
    string. Walking frames materialises a frame object per step, so it first tries the depth the
    model frame had last time for this kind: right when that frame is outside streamsim and the
    frame inside it is streamsim's (package code calls model code only as the host program
    itself)."""
    codes: dict[int, tuple] = {}  # id(code) -> (code, path or None inside streamsim, {lasti: loc})
    getframe = sys._getframe
    depths: dict[str, int] = {}  # op kind -> depth (from location()) of the model frame last time

    def entry_of(code) -> tuple:
        entry = codes.get(id(code))
        if entry is None:  # the entry holds the code object: its id is not reused meanwhile
            filename = code.co_filename
            entry = codes[id(code)] = (code, None if filename.startswith(PACKAGE_DIR)
                                       else _display_path(filename), {})
        return entry

    def location(kind: str | None = None) -> str:
        if kind is None:
            kind = engine.location_kind
        d = depths.get(kind, 3)
        try:  # the frame inside the model frame, and the model frame as its f_back: one
            inner = getframe(d - 1)  # getframe, and the model frame's object persists across ops
        except ValueError:
            inner = None
        f = inner.f_back if inner is not None else None
        if f is not None and inner.f_code.co_filename.startswith(PACKAGE_DIR):
            entry = codes.get(id(f.f_code)) or entry_of(f.f_code)
            if entry[1] is not None:
                lines = entry[2]
                loc = lines.get(f.f_lasti)
                if loc is None:
                    loc = lines[f.f_lasti] = f"{entry[1]}:{f.f_lineno}"
                return loc
        d = 2
        f = getframe(2)
        while f is not None:
            entry = codes.get(id(f.f_code)) or entry_of(f.f_code)
            if entry[1] is not None:
                depths[kind] = d
                lines = entry[2]
                loc = lines.get(f.f_lasti)
                if loc is None:
                    loc = lines[f.f_lasti] = f"{entry[1]}:{f.f_lineno}"
                return loc
            f = f.f_back
            d += 1
        return ""
    return location


def _display_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return path
