"""Turn the engine's records into the :class:`~streamsim.trace.Trace` once the run stops.

Without a stall every record is an op: they are frozen in place. A stall leaves ops that never
started (left out, the rest renumbered densely), ops caught mid-way (ended where the run stopped),
and waits that were never satisfied (kept as ``attrs["waiting_for"]``, see ``trace.waited_on``).
Everything else that names ops by id (the engine's notes, the stalled agents' ops) is renumbered
with them.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace
from itertools import accumulate
from operator import attrgetter

from typing import Iterable

from ..trace import Note, Op, Stall, Trace
from .records import Rec

_op_end = attrgetter("end")


def caught_by_stall(recs: list[Rec],
                    stall: Stall | None) -> tuple[list[Rec], dict[int, list[Rec]]]:
    """The ops a stall caught mid-way (started, never ended), which the engine then ends where
    the simulation stopped, and what each still waited for (taken before they are ended)."""
    caught = [r for r in recs if r.start_seq >= 0 and r.end_seq < 0] if stall else []
    return caught, {r.id: _unsatisfied(r) for r in caught}


def build_trace(recs: list[Rec], stall: Stall | None, waiting: dict[int, list[Rec]], *, seq: int,
                lent: dict[int, int], seq_holes: bool, notes: list[Note], agents: Iterable,
                source: str, meta: dict | None) -> Trace:
    """The trace of a finished (or stalled: ``stall``) run, from the engine's records ``recs``
    (every op, by id), ``waiting`` (:func:`caught_by_stall`), the engine's sequence counter
    ``seq``, the starts blocking ops lent back (``lent``, see ``Engine.wait_recs``), whether
    sequence slots were left unused (``seq_holes``), its ``notes`` and its ``agents``."""
    started = [r for r in recs if r.start_seq >= 0] if stall else recs  # (a stream stops with
    # queued ops only when blocked: without a stall every op has run)
    # ops that never started hold no sequence slot and are left out: the rest are renumbered
    new_id = {r.id: i for i, r in enumerate(started)} if len(started) != len(recs) else None
    if any(waiting.values()):
        _move_unsatisfied(waiting, started, new_id)
    if new_id is not None:
        _hand_waits_to_issuers(recs, new_id)
        _renumber_queried(started, new_id)
    bound = seq
    if lent:  # (only in a stall: a host still waits inside wait_recs)
        _reinsert_lent(started, lent)
        bound += len(lent)
    if seq_holes:
        _dense_seqs(started, bound)
    ops = _freeze(started) if new_id is None else _freeze_dense(started, new_id)
    if new_id is not None:
        notes = [_renumber_note(n, recs, new_id) for n in notes]
        if stall is not None:
            stall = _renumber_stall(stall, new_id)
    return trace_of(ops, stall, notes, agents, source, meta)


def trace_of(ops: tuple[Op, ...], stall: Stall | None, notes: list[Note], agents: Iterable,
             source: str, meta: dict | None) -> Trace:
    """The trace of a run's frozen ops (by id, dense sequence positions, edges as op ids): what
    :func:`build_trace` ends with, and the compiled replay's ops go to directly."""
    return Trace(ops=ops, agents=tuple(sorted(agents)), stall=stall, notes=tuple(notes),
                 end_time=max(map(_op_end, ops), default=0.0), source=source,
                 meta=dict(meta or {}))


def _unsatisfied(r: Rec) -> list[Rec]:
    """The ops an op caught by a stall still waited for (its ``after`` entries that never ended)."""
    return [d for d in r.after if not d.done] if r.after else []


def _move_unsatisfied(waiting: dict[int, list[Rec]], started: list[Rec],
                      new_id: dict[int, int] | None) -> None:
    """Take the waits a stall left unsatisfied out of ``after`` (whose ops end before the op starts,
    the trace's contract) into ``attrs["waiting_for"]``, as final op ids, for the reports that name
    what the op waited on (``trace.waited_on``)."""
    for r in started:
        pending = waiting.get(r.id)
        if pending:
            r.after = [d for d in r.after if d not in pending]
            ids = [d.id if new_id is None else new_id.get(d.id) for d in pending]
            r.attrs["waiting_for"] = tuple(i for i in ids if i is not None)


def _hand_waits_to_issuers(recs: list[Rec], new_id: dict[int, int]) -> None:
    """A stream op that never started (queued behind a stall) is left out of the trace, and with it
    what it was to wait for: its issuing host action keeps that in ``attrs["waiting_for"]`` (a
    ``work.wait()`` was called: its handle must not be reported as never waited)."""
    for r in recs:
        if r.start_seq < 0 and r.after and r.issuer in new_id:
            kept = tuple(new_id[d.id] for d in r.after if d.id in new_id)
            if kept:
                issue = recs[r.issuer]
                issue.attrs["waiting_for"] = (*issue.attrs.get("waiting_for", ()), *kept)


def _renumber_queried(recs: list[Rec], new_id: dict[int, int]) -> None:
    """A query that returned False keeps the id of the op it asked about (``attrs["queried"]``):
    renumbered with the rest, or dropped when that op never started."""
    for r in recs:
        if "queried" in r.attrs:
            rid = new_id.get(r.attrs["queried"])
            if rid is None:
                del r.attrs["queried"]
            else:
                r.attrs["queried"] = rid


def _reinsert_lent(recs: list[Rec], lent: dict[int, int]) -> None:
    """Give the starts that blocking ops handed back while waiting (see ``Engine.wait_recs``) and
    still held when the run stopped their positions back: each goes just before the op that took
    its position (several at one position: in the order they handed it back), and every position
    from there on moves up to make room. The result is the numbering without any handing back."""
    order = sorted(lent, key=lambda rid: lent[rid])  # (a stable sort: ties in handing-back order)
    new_start = {rid: lent[rid] + i for i, rid in enumerate(order)}
    points = sorted(lent.values())
    for r in recs:
        start = new_start.get(r.id)
        r.start_seq = r.start_seq + bisect_right(points, r.start_seq) if start is None else start
        r.end_seq += bisect_right(points, r.end_seq)


def _dense_seqs(recs: list[Rec], bound: int) -> None:
    """Renumber start/end sequence positions 0..2n-1, keeping their order (fills wait_recs' holes)."""
    used = bytearray(bound)
    for r in recs:
        used[r.start_seq] = used[r.end_seq] = 1
    rank = list(accumulate(used))  # rank[p] - 1: how many used positions precede position p
    for r in recs:
        r.start_seq = rank[r.start_seq] - 1
        r.end_seq = rank[r.end_seq] - 1


def _freeze(recs: list[Rec]) -> tuple[Op, ...]:
    """Turn the records into Ops in place (see :class:`Rec`), with ``after`` as op ids."""
    for r in recs:
        if r.after.__class__ is list:
            r.after = tuple([a.id for a in r.after])
        if r.joins.__class__ is list:
            r.joins = tuple(r.joins)
        r.__class__ = Op
    return tuple(recs)


def _freeze_dense(recs: list[Rec], new_id: dict[int, int]) -> tuple[Op, ...]:
    """Freeze the ops that ran, renumbering ids densely (never-started ops hold no sequence slot)."""
    for r in recs:
        r.after = [a for a in r.after if a.id in new_id]
    ops = []
    for op in _freeze(recs):
        ops.append(Op(**{**{f: getattr(op, f) for f in Op.__slots__}, "id": new_id[op.id],
                         "issuer": new_id.get(op.issuer) if op.issuer is not None else None,
                         "after": tuple(new_id[a] for a in op.after),
                         "joins": tuple(new_id[j] for j in op.joins if j in new_id)}))
    return tuple(ops)


def _renumber_note(note: Note, recs: list[Rec], new_id: dict[int, int]) -> Note:
    """The note with its op id renumbered as the trace's. A stream op a stall kept from starting
    is not in the trace: the note then names the host action that issued it (same line, same
    name), which is."""
    if note.op is None:
        return note
    rid = note.op
    if rid not in new_id and recs[rid].issuer is not None:
        rid = recs[rid].issuer
    return replace(note, op=new_id.get(rid))


def _renumber_stall(stall: Stall, new_id: dict[int, int]) -> Stall:
    """The stall with its blocked agents' op ids renumbered as the trace's; an op that never started
    (a stream op queued behind the wait that blocks) is not in the trace: None, its reason says it."""
    return Stall(stall.time, tuple(b if b.op is None else replace(b, op=new_id.get(b.op))
                                   for b in stall.blocked))
