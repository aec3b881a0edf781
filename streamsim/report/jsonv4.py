"""The report's JSON form, version 4: every op the findings name is listed once, in ``ops``, and
the findings name ops by id.

Version 3 (:func:`.report.report_json`) describes an op in full wherever a finding names it: a
hazard's two ops and its fix's ``before`` op, a warning's op, a blocked agent's op. On a large op
log that is most of the text (issue 26: 200,000 lines, 60,000 hazards, 93 MB, nine tenths of it
hazards, their ops repeated). Version 4 keeps every key and value of version 3 and changes two
things:

* the ops: ``ops`` is one table, ``{"columns": [...], "rows": {"<id>": [...]}}``, a row per op,
  keyed by the op's id (a JSON key is a string), its values in the order of ``columns``
  (:data:`OP_COLUMNS`: version 3's op fields but ``id``; ``microbatch`` and ``line`` are ``null``
  where version 3 leaves them out). A hazard's ``first``/``second``, a fix's ``before``,
  ``handle_op``, ``record_after``, a warning's ``op`` and a blocked agent's ``op`` are ids (or
  ``null``), and every id the report gives is a key of ``ops.rows``: ``rows[str(id)]``.
* the layout: the entries of ``ops.rows``, ``root_causes``, ``hazards`` and ``warnings`` are one a
  line, compact (the text ``json.dumps(entry, separators=(",", ":"))`` writes), the rest one key a
  line as ``json.dumps(indent=2)`` writes it. A table is then read, grepped and diffed an entry a
  line, and the key names of a row are written once, in ``columns``.

Why rows under ``columns`` rather than an object per op: on that log (148,055 ops named), the ops
as ``{"<id>": {"name": ..., ...}}`` take 27.1 MB and as rows 17.7 MB (the key names repeated in
every op are a third of it), and the whole report 55.5 MB against 46.1 MB; keyed by id, a row is
still found by its id directly, as an object would be.

The text is written in chunks (:func:`json_v4_chunks`), so that a caller can write it as it is
made; the same report gives the same bytes, whichever path of the analysis ran (docs/native.md).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import native
from ..analysis.findings import Deadlock, Findings, Fix, Hazard, Warning, root_cause_json
from ..trace import Agent, Op, Trace
from .jsontext import dumps_indented, encode_compact, repaired
from .report import Report, json_head, json_tail

JSON_V4 = 4
# An op's fields, in the order of its row (version 3's op object, whose ``id`` is the row's key).
OP_COLUMNS = ("name", "kind", "agent", "rank", "step", "location", "start", "end", "microbatch",
              "line")
BLOCK = 2048  # table entries encoded at a time (the chunks of the text)
TABLES = ("root_causes", "hazards", "warnings")  # lists written an entry a line (and ops.rows)


def op_row(op: Op) -> list[Any]:
    """An op's row of ``ops.rows``, in the order of :data:`OP_COLUMNS`."""
    return [op.name, op.kind, str(op.agent), op.agent.rank, op.step, op.location, op.start,
            op.end, op.microbatch, op.line]


def fix_v4(fix: Fix) -> dict[str, Any]:
    """A hazard's fix, its ops by id (version 3's keys)."""
    return {"kind": fix.kind, "text": fix.text, "before": fix.before, "handle_op": fix.handle_op,
            "record_after": fix.record_after,
            "event_stream": None if fix.event_stream is None else str(fix.event_stream),
            "wait_stream": None if fix.wait_stream is None else str(fix.wait_stream)}


def hazard_v4(h: Hazard) -> dict[str, Any]:
    """A hazard, its two ops and its fix's by id (version 3's keys)."""
    return {"kind": h.kind, "buffer": h.buffer, "rank": h.rank, "range": [h.range[0], h.range[1]],
            "first": h.first, "second": h.second, "first_mode": h.first_mode,
            "second_mode": h.second_mode, "manifest": h.manifest,
            "fix": None if h.fix is None else fix_v4(h.fix)}


def deadlock_v4(d: Deadlock) -> dict[str, Any]:
    """The deadlock, each blocked agent's op by id (version 3's keys)."""
    return {"blocked": [{"agent": str(b.agent), "op": b.op, "reason": b.reason,
                         "waits_for": [str(a) for a in b.waits_for]} for b in d.blocked],
            "cycle": None if d.cycle is None else [str(a) for a in d.cycle]}


def warning_v4(w: Warning) -> dict[str, Any]:
    """A warning, its op by id (version 3's keys)."""
    return {"kind": w.kind, "message": w.message, "op": w.op}


def named_ops(f: Findings, nops: int | None = None) -> list[int]:
    """The ids of every op the findings name, ascending: the keys of ``ops.rows``. ``nops``:
    how many ops the trace has (ids are positions below it), for the compiled collection."""
    others = _others_named(f)
    named = native.hazard_op_ids(f.hazards, nops) if nops is not None else None
    if named is not None:  # (the hazards' ids, compiled: a flag per op; tests/native)
        return sorted(set(named).union(others)) if others else named
    ids: set[int] = set()
    for h in f.hazards:
        ids.add(h.first)
        ids.add(h.second)
        if h.fix is not None:
            ids.update(p for p in (h.fix.before, h.fix.handle_op, h.fix.record_after)
                       if isinstance(p, int))
    ids.update(others)
    return sorted(ids)


def _others_named(f: Findings) -> list[int]:
    """The ops the findings name beside the hazards: the warnings' and the deadlock's."""
    others = [w.op for w in f.warnings if w.op is not None]
    if f.deadlock is not None:
        others += [b.op for b in f.deadlock.blocked if b.op is not None]
    return others


def ops_table(trace: Trace, ids: list[int]) -> dict[str, Any]:
    """``ops``: the columns, and the row of each op in ``ids`` keyed by its id."""
    return {"columns": list(OP_COLUMNS), "rows": {str(i): op_row(trace.op(i)) for i in ids}}


def _sections(r: Report, written: bool = False) -> dict[str, Any]:
    """The object, key by key, in order; ``ops`` last (its rows are the appendix a reader looks
    ids up in), its rows left to :func:`json_v4_chunks` to make as it writes them; ``written``
    (for it): ``hazards`` the Hazard records, which it writes a block at a time."""
    f = r.findings
    costs = list(r.root_cause_costs) + [None] * (len(f.root_causes) - len(r.root_cause_costs))
    d = json_head(r, JSON_V4)
    d["root_causes"] = [root_cause_json(rc, c) for rc, c in zip(f.root_causes, costs)]
    d["hazards"] = list(f.hazards) if written else [hazard_v4(h) for h in f.hazards]
    d["deadlock"] = None if f.deadlock is None else deadlock_v4(f.deadlock)
    d["warnings"] = [warning_v4(w) for w in f.warnings]
    d.update(json_tail(r))
    return d


def report_json_v4(r: Report) -> dict[str, Any]:
    """The version-4 object (keys documented in docs/cli.md): ``json.loads`` of its text."""
    d = _sections(r)
    d["ops"] = ops_table(r.trace, named_ops(r.findings, len(r.trace)))
    return d


def json_v4_chunks(r: Report) -> Iterator[str]:
    """The version-4 text of ``r``, in pieces (joined: :func:`dumps_json_v4`), the tables a block
    of :data:`BLOCK` entries at a time: a table is never held whole as text."""
    d = _sections(r, written=True)
    yield "{"
    for key, value in d.items():
        yield f"\n  \"{key}\": "
        if key in TABLES and value:
            yield "["
            yield from (_hazard_entries(value) if key == "hazards" else _entries(value))
            yield "\n  ],"
        else:
            yield dumps_indented(value).replace("\n", "\n  ") + ","
    yield "\n  \"ops\": {\n    \"columns\": " + encode_compact(list(OP_COLUMNS)).decode()
    trace = r.trace
    first = True
    for block in _named_op_blocks(r.findings, len(trace)):
        if first:
            yield ",\n    \"rows\": {"
        text = native.op_rows_of(trace, block)  # (compiled: the same text; a run kept as
        # columns written from them)
        if text is None:
            text = repaired(b",".join(b'\n      "%d":%s' % (i, encode_compact(op_row(trace.op(i))))
                                      for i in block))
        yield ("" if first else ",") + text
        first = False
    yield ",\n    \"rows\": {}\n  }\n}\n" if first else "\n    }\n  }\n}\n"


def _named_op_blocks(f: Findings, nops: int) -> Iterator[list[int]]:
    """:func:`named_ops` in lists of at most :data:`BLOCK` ids: made a block at a time where
    compiled (``native.hazard_op_id_blocks``: never a list of every id), else sliced."""
    got = native.hazard_op_id_blocks(f.hazards, nops, _others_named(f), BLOCK)
    if got is not None:
        return got
    ids = named_ops(f, nops)
    return (ids[lo:lo + BLOCK] for lo in range(0, len(ids), BLOCK))


def _hazard_entries(hazards: list[Hazard]) -> Iterator[str]:
    """The hazards' entries (:func:`hazard_v4`), as :func:`_entries` writes them: a block at a
    time, compiled where it runs (streamsim/native/_jsonv4.pyx: the same text)."""
    for lo in range(0, len(hazards), BLOCK):
        block = hazards[lo:lo + BLOCK]
        text = native.hazard_entries(block)
        if text is None:
            text = repaired(b",".join(b"\n    " + encode_compact(hazard_v4(h)) for h in block))
        yield ("," if lo else "") + text


def _entries(items: list) -> Iterator[str]:
    """A table's entries, compact, one a line (four spaces in), comma-separated."""
    for lo in range(0, len(items), BLOCK):
        raw = b",".join(b"\n    " + encode_compact(x) for x in items[lo:lo + BLOCK])
        yield ("," if lo else "") + repaired(raw)


def dumps_json_v4(r: Report) -> str:
    """The version-4 text of ``r``: ``json.loads`` of it is :func:`report_json_v4`."""
    return "".join(json_v4_chunks(r))


native.bind_json(op=Op, agent=Agent, hazard=Hazard, fix=Fix)
