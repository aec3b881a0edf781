"""Propose, for a data hazard, the cheapest sync that adds the missing happens-before edge.

Rules (the docs' "Hazards" section): the edge runs from the hazard's ``first`` op to its ``second``,
the earlier and the later one in issue order. A comm access with a
``Work`` handle gets a ``wait()`` on that handle before the host enqueues the other access; stream/stream
gets an event recorded after the first and waited on by the second's stream; stream/host gets an event
synchronized by the host; a free racing with another stream's use gets ``record_stream``; host work
racing with what another host thread of its rank does gets a hand-off (a put after the first on its
thread, a get of it before the second is issued). Host work against a stream op no host action
issued (a hand-built trace), or a use issued after the free: no proposal (see
:func:`no_fix_reason`).
"""
from __future__ import annotations

from collections.abc import Sequence

from .. import native
from .findings import USE_AFTER_FREE, Fix, Hazard
from ..trace import HOST, STREAM, Agent, Op, Trace, issue_point


def propose_fix(trace: Trace, hazard: Hazard) -> Fix | None:
    """The fix for ``hazard``, or None when no single sync can order its two ops."""
    x, y = trace.op(hazard.first), trace.op(hazard.second)  # (first: earlier in issue order)
    if _used_after_its_free(hazard, x):
        return None  # ordering the use after the free would not make it safe
    before = issue_point(y)
    if x.agent.kind == HOST:  # host work vs what another thread issued: hand it off
        to = trace.op(before).agent
        if to.kind != HOST or to.rank != x.agent.rank or to == x.agent:
            return None
        return Fix("handoff",
                   f"hand off from thread {x.agent.name!r} to {to.name!r}: put on a queue after "
                   f"{x.describe()} and get from it before {y.describe()}",
                   before=before, record_after=x.id)
    if hazard.kind == USE_AFTER_FREE and y.kind == "free" and x.handle is None:
        return Fix("record_stream",
                   f"call {hazard.buffer}.record_stream({x.agent.name}) before {y.describe()} "
                   f"({x.describe()} may still use it)",
                   before=before, event_stream=x.agent)
    if x.handle is not None:
        wait_stream = None if y.agent.kind == HOST or x.agent.is_gloo \
            else _current_stream(y)
        how = "" if wait_stream is not None or x.agent.is_gloo else " (blocking)"
        return Fix("wait_handle",
                   f"wait handle {x.handle}{how} (from {x.describe()}) before {y.describe()}",
                   before=before, handle_op=x.id, wait_stream=wait_stream)
    if y.agent.kind == HOST:
        return Fix("event_sync",
                   f"record an event on {x.agent} after {x.describe()} and synchronize it "
                   f"before {y.describe()}",
                   before=before, record_after=x.issuer, event_stream=x.agent)
    wait_stream = _current_stream(y)
    return Fix("event",
               f"record an event on {x.agent} after {x.describe()} and wait it on {wait_stream} "
               f"before {y.describe()}",
               before=before, record_after=x.issuer, event_stream=x.agent, wait_stream=wait_stream)


def no_fix_reason(trace: Trace, hazard: Hazard) -> str:
    """Why :func:`propose_fix` offers nothing for ``hazard`` (for reports)."""
    x, y = trace.op(hazard.first), trace.op(hazard.second)  # (first: earlier in issue order)
    if _used_after_its_free(hazard, x):
        return (f"{y.name} was issued after {x.name}: no sync makes a use of freed memory safe; "
                "free the buffer after its last use instead")
    return ("the first is host work and no host thread of its rank issued the second: no "
            "hand-off between threads orders them")


def _used_after_its_free(hazard: Hazard, first_issued: Op) -> bool:
    """A use-after-free whose free was issued first: a use of freed memory, which no sync repairs."""
    return hazard.kind == USE_AFTER_FREE and first_issued.kind == "free"


def with_fixes(trace: Trace, hazards: Sequence[Hazard], fresh: bool = False) -> list[Hazard]:
    """Each of ``hazards`` with its proposed fix attached (:func:`with_fix`): compiled where it
    runs (streamsim/native/_fixes.pyx, the same records). No hazard reads no op (a trace
    whose ops are not made yet stays so). ``fresh``: the caller just made ``hazards`` (each
    fix None) and holds them alone, so the compiled path may set each one's fix in place."""
    if not hazards:
        return []
    got = native.with_fixes(trace, hazards, fresh)
    return got if got is not None else [with_fix(trace, h) for h in hazards]


def with_fix(trace: Trace, hazard: Hazard) -> Hazard:
    """``hazard`` with its proposed fix attached."""
    h = hazard
    return Hazard(h.kind, h.rank, h.buffer, h.range, h.first, h.second, h.first_mode, h.second_mode,
                  h.manifest, propose_fix(trace, h))  # not dataclasses.replace: 10x cheaper


def _current_stream(op: Op) -> Agent:
    """The stream a wait must go on to order ``op``: its own, or for a comm op the stream current
    when it was issued (ProcessGroupNCCL makes its comm stream wait on that one)."""
    if not op.agent.is_comm:
        return op.agent  # a kernel launched with stream=...: its own stream, whatever was current
    cur = op.attrs.get("current_stream") if op.attrs else None
    if isinstance(cur, Agent):
        return cur
    if isinstance(cur, str) and cur:
        return Agent(op.agent.rank, STREAM, cur)
    return op.agent


native.bind_fixes(op=Op, agent=Agent, fix=Fix, hazard=Hazard, propose_fix=propose_fix,
                  current_stream=_current_stream)
