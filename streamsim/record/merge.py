"""Rank files merged into the one op log ``streamsim check`` reads.

Each rank's recorder writes its own file (lines in the order its threads issued them, each with
its issue time ``t`` on a clock the machine's processes share). The merged log holds every
distinct declaration first (a group is declared by each rank that uses it: once is kept; two
that differ are an error), then every op line, ordered by ``t`` (ties: rank file order, then
line order, so a thread's lines keep their order and the output is the same for the same
input), with ``t`` counted from the earliest line. One pass over each file, one sort.

Options for logs at scale: ``steps=(lo, hi)`` keeps the op lines of steps lo..hi (and the lines
without a step), ``comm_buffers_only`` keeps only the buffers some comm op touches (a line left
with no buffer is dropped, and so is the ``alloc`` of a dropped buffer).
"""
from __future__ import annotations

import os
from typing import Iterable

import orjson

from .version import RecordError

COMM_KINDS = frozenset({"isend", "irecv", "all_reduce", "all_gather", "broadcast",
                        "reduce_scatter", "all_to_all", "reduce", "gather", "scatter"})
_REF_FIELDS = ("reads", "writes", "tensors", "inputs", "outputs")


def _buffer(ref) -> str:
    return ref if isinstance(ref, str) else ref["buffer"]


def merge_lines(files: Iterable[tuple[str, Iterable[bytes]]], *,
                steps: tuple[int, int] | None = None,
                comm_buffers_only: bool = False) -> list[dict]:
    """The merged op log's lines (declarations, then ops by time) from ``(name, lines)`` of each
    rank file; a line that is not JSON is a RecordError naming its file and line."""
    decls: dict[str, dict] = {}
    ops: list[tuple[float, int, int, dict]] = []
    for k, (name, lines) in enumerate(files):
        for i, raw in enumerate(lines, 1):
            s = raw.strip()
            if not s or s.startswith(b"#"):
                continue
            try:
                obj = orjson.loads(s)
            except orjson.JSONDecodeError as e:
                raise RecordError(f"{name}:{i}: not a recorded line ({e})") from None
            if obj.get("op") in ("group", "config"):
                key = obj.get("group", "")
                if key in decls and decls[key] != obj:
                    raise RecordError(f"{name}:{i}: group {key!r} is declared differently by "
                                      "another rank")
                decls.setdefault(key, obj)
                continue
            ops.append((obj.get("t", 0.0), k, i, obj))
    ops.sort(key=lambda x: x[:3])
    lines = [obj for *_, obj in ops]
    if steps is not None:
        lo, hi = steps
        lines = [x for x in lines if "step" not in x or lo <= x["step"] <= hi]
    if comm_buffers_only:
        lines = _comm_buffers_only(lines)
    t0 = min((x["t"] for x in lines if "t" in x), default=0.0)
    for x in lines:
        if "t" in x:
            x["t"] = round(x["t"] - t0, 1)
    return list(decls.values()) + lines


def _comm_buffers_only(lines: list[dict]) -> list[dict]:
    keep = {(x.get("rank", 0), _buffer(r)) for x in lines if x["op"] in COMM_KINDS
            for f in _REF_FIELDS for r in x.get(f, ())}
    out = []
    for x in lines:
        rank = x.get("rank", 0)
        if x["op"] == "alloc":
            if (rank, x["buffer"]) in keep:
                out.append(x)
            continue
        if x["op"] in ("host", "launch"):
            for f in ("reads", "writes"):
                if f in x:
                    x[f] = [r for r in x[f] if (rank, _buffer(r)) in keep]
                    if not x[f]:
                        del x[f]
            if "reads" not in x and "writes" not in x:
                continue
        out.append(x)
    return out


def merge_files(paths: list[str], out: str, **options) -> int:
    """Merge the rank files ``paths`` into the op log ``out``; the number of op lines written."""
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise RecordError(f"streamsim record: no recording at {missing[0]} (did that rank reach "
                          "init_process_group?)")
    files = []
    for p in paths:
        with open(p, "rb") as f:
            files.append((p, f.read().splitlines()))
    lines = merge_lines(files, **options)
    with open(out, "wb") as f:
        f.write(b"# streamsim op log (version 2), recorded by streamsim record\n")
        for x in lines:
            f.write(orjson.dumps(x) + b"\n")
    return sum(1 for x in lines if x["op"] not in ("group", "config"))
