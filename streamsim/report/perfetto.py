"""The run as a Chrome trace (JSON object format), to open in Perfetto or chrome://tracing.

* one complete event (``ph: "X"``) per op: ``pid`` = rank, ``tid`` = a stable integer per stream or
  host thread of that rank (host threads first, then compute streams, then comm streams), ``ts`` and
  ``dur`` in microseconds rebased so the run starts at 0;
* metadata events (``ph: "M"``) naming every process (``rank0``) and thread (``compute``,
  ``main (host)``) and fixing their sort order;
* flow events (``ph: "s"`` then ``ph: "f"`` with the same ``id``, ``bp: "e"``) for message and
  collective edges (``joins``) and for the ``after`` edges (event waits, handle waits, NCCL enqueue,
  host syncs, completed queries, record_stream), so Perfetto draws the arrows that order ops;
* an instant event (``ph: "i"``, process scope) per hazard, on the second op's rank where its access
  starts.

Each flow runs the way its edge orders time: an ``after`` edge from the end of the source slice
to the start of the target slice (the source ends before the target starts), a message or
collective edge from the start of the send to the end of the receive (the send starts before the
receive ends). So ``f.ts >= s.ts`` for every flow (at midpoints, one in seven arrows of the demo
ran backwards). Each point sits a nanosecond inside its slice's edge (half a zero-length slice's
nothing), so Perfetto binds it to that slice and not to a neighbour that ends or starts there.
"""
from __future__ import annotations

import json
from typing import Any

from ..analysis.findings import Findings
from ..kinds import join_kind
from .lanes import lane_key
from ..trace import HOST, Agent, Trace
from ..analysis.why import access_window


_NUDGE = 0.001  # us: one nanosecond, the resolution Perfetto keeps


def thread_ids(trace: Trace) -> dict[Agent, int]:
    """A stable ``tid`` per agent: its position among its rank's agents, in lane order, from 1."""
    by_rank: dict[int, list[Agent]] = {}
    for a in {op.agent for op in trace.ops} | set(trace.agents):
        by_rank.setdefault(a.rank, []).append(a)
    tids = {}
    for agents in by_rank.values():
        for i, a in enumerate(sorted(agents, key=lane_key), 1):
            tids[a] = i
    return tids


def _r(x: float) -> float:
    return round(x, 3)


def chrome_trace(trace: Trace, findings: Findings | None = None,
                 meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Chrome trace of ``trace`` as a JSON-ready dict (see module)."""
    tids = thread_ids(trace)
    t0 = min((op.start for op in trace.ops), default=0.0)
    events: list[dict[str, Any]] = []
    for rank in sorted({a.rank for a in tids}):
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                       "args": {"name": f"rank{rank}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                       "args": {"sort_index": rank}})
    for a, tid in sorted(tids.items(), key=lambda kv: (kv[0].rank, kv[1])):
        name = f"{a.name} (host)" if a.kind == HOST else a.name
        events.append({"ph": "M", "name": "thread_name", "pid": a.rank, "tid": tid,
                       "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": a.rank, "tid": tid,
                       "args": {"sort_index": tid}})

    def ts(x: float) -> float:
        return max(_r(x - t0), 0.0)

    def inside(op, at_end: bool) -> float:
        """A point just inside ``op``'s start or end (a slice's neighbour may touch that edge)."""
        nudge = min(_NUDGE, (op.end - op.start) / 2)
        return ts(op.end - nudge) if at_end else ts(op.start + nudge)

    for op in trace.ops:
        args: dict[str, Any] = {"op": op.id, "kind": op.kind}
        if op.step is not None:
            args["step"] = op.step
        if op.microbatch is not None:
            args["microbatch"] = op.microbatch
        if op.location:
            args["location"] = op.location
        if op.line is not None:
            args["line"] = op.line
        if op.handle:
            args["handle"] = op.handle
        if op.accesses:
            args["accesses"] = [f"{a.mode} {a.view}" for a in op.accesses]
        if op.attrs.get("unfinished"):
            args["unfinished"] = True
        events.append({"ph": "X", "name": op.name, "cat": op.kind, "pid": op.agent.rank,
                       "tid": tids[op.agent], "ts": ts(op.start),
                       "dur": max(_r(op.end - op.start), 0.0), "args": args})

    flow = 0
    for op in trace.ops:
        # (joins: the source's start orders the target's end; after: its end, the target's start)
        edges = [(j, join_kind(op.kind), False) for j in op.joins]
        edges += [(a, f"after:{op.kind}", True) for a in op.after]
        for src_id, cat, after in edges:
            src = trace.op(src_id)
            s_ts, f_ts = inside(src, at_end=after), inside(op, at_end=not after)
            flow += 1
            events.append({"ph": "s", "id": flow, "name": cat, "cat": cat, "pid": src.agent.rank,
                           "tid": tids[src.agent], "ts": s_ts})
            events.append({"ph": "f", "bp": "e", "id": flow, "name": cat, "cat": cat,
                           "pid": op.agent.rank, "tid": tids[op.agent], "ts": max(f_ts, s_ts)})

    for h in (findings.hazards if findings is not None else ()):
        a, b = trace.op(h.first), trace.op(h.second)
        events.append({"ph": "i", "s": "p", "name": f"{h.kind} {h.buffer}"
                       f" ({'manifest' if h.manifest else 'latent'})", "cat": "hazard",
                       "pid": b.agent.rank, "tid": tids[b.agent],
                       "ts": ts(access_window(trace, b.id, h, h.second_mode)[0]),
                       "args": {"first": a.describe(), "second": b.describe(),
                                "range": list(h.range), "fix": h.fix.text if h.fix else None}})
    out: dict[str, Any] = {"traceEvents": events}
    if meta:
        out["otherData"] = {k: str(v) for k, v in meta.items()}
    return out


def dumps_chrome_trace(trace: Trace, findings: Findings | None = None,
                       meta: dict[str, Any] | None = None) -> str:
    """:func:`chrome_trace` as compact JSON text."""
    return json.dumps(chrome_trace(trace, findings, meta), separators=(",", ":")) + "\n"
