"""Timing metrics of one run: makespan, step latency, stream busy time, bubble, overlap.

They answer the reviewer's second question (what does the safe schedule cost?) from the trace alone.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..trace import STREAM, TRANSFER_START, Trace

COMPUTE_KINDS = frozenset({"launch"})
COMM_PREFIXES = ("nccl:", "gloo:")


@dataclass(frozen=True)
class Metrics:
    """Timing of one run, in simulated microseconds (what ``compare``/``sweep`` --help define).

    ``makespan_us``: end of the last op. ``steps``: how many distinct step labels its stream ops
    carry (gloo excluded).
    A step's latency runs from the start of the first stream op (kernel, NCCL op, event record or
    wait; gloo excluded) labelled with it, on any rank, to the end of the last one;
    ``mean_step_us`` and ``p99_step_us`` (nearest rank) are over the steps, 0 when there are none.
    A sync that delays a step's first op but not its last shortens that step, so a fix can lower
    ``mean_step_us`` at equal makespan. ``bubble_share``: share of the makespan a rank's compute
    streams (every stream but ``nccl:``/``gloo:``) are idle, averaged over ranks.
    ``comm_overlap_share``: share of comm-stream transfer time during which a compute stream of
    the same rank is busy, over all ranks; a comm op transfers from its transfer start (when its
    peers are there: a rendezvous send once the receive is posted, a receive once the data left,
    a collective once every rank joined; ``streamsim.trace.TRANSFER_START``) to its end, and its
    wait for peers before that counts neither way. ``busy_us``: merged busy time per stream
    agent (from each op's start: a comm stream blocked in a rendezvous is busy, FIFO-blocked).
    """

    makespan_us: float
    steps: int
    mean_step_us: float
    p99_step_us: float
    bubble_share: float  # idle share of compute streams over the makespan, averaged over ranks
    comm_overlap_share: float  # share of comm-stream transfer time that overlaps compute
    busy_us: dict[str, float]  # per stream agent

    def to_json_dict(self) -> dict:
        d = asdict(self)
        return {k: (_round(v) if isinstance(v, float) else
                    {a: _round(b) for a, b in v.items()} if isinstance(v, dict) else v)
                for k, v in d.items()}


def _round(x: float) -> float:
    return round(x, 3)


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: a reported p99 is a step that happened)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, math.ceil(q / 100.0 * len(ordered)) - 1)
    return ordered[k]


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _total(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def compute_metrics(trace: Trace) -> Metrics:
    """Metrics of ``trace`` (times in simulated microseconds)."""
    makespan = trace.end_time
    step_span: dict[int, list[float]] = {}
    # Per agent object (looked up by identity: hashing the Agent dataclass per op is most of the
    # loop): its busy intervals, or None for a host; whether its ops count for steps; for a comm
    # stream, its transfer intervals (from each op's transfer start: not its wait for peers).
    seen: dict[int, tuple[list | None, bool, list | None]] = {}
    agent_at: dict[int, object] = {}
    for op in trace.ops:
        ag = op.agent
        info = seen.get(id(ag))
        if info is None:
            agent_at[id(ag)] = ag
            stream = ag.kind == STREAM
            # a pending gloo object send is host-side bookkeeping, not device work of the step
            info = seen[id(ag)] = ([] if stream else None,
                                   stream and not ag.name.startswith("gloo:"),
                                   [] if stream and ag.name.startswith(COMM_PREFIXES) else None)
        ivs, steps, moving = info
        if ivs is None:
            continue
        start, end = op.start, op.end
        if steps and op.step is not None:
            span = step_span.get(op.step)
            if span is None:
                step_span[op.step] = [start, end]
            else:
                span[0] = min(span[0], start)
                span[1] = max(span[1], end)
        if end > start:
            ivs.append((start, end))
            if moving is not None:
                moving.append((op.attrs.get(TRANSFER_START, start), end))
    raw: dict = {}
    transfers: dict[int, list] = {}  # rank -> its comm streams' transfer intervals
    for k, (ivs, _, moving) in seen.items():
        if ivs:  # (equal Agent objects, in a hand-built trace, share one entry)
            raw.setdefault(agent_at[k], []).extend(ivs)
        if moving:
            transfers.setdefault(agent_at[k].rank, []).extend(moving)
    # Each stream's busy time merged once: a rank's union merges these (the same components, with
    # the same end points, as merging every interval again; far fewer of them).
    busy = {agent: _merge(ivs) for agent, ivs in raw.items()}
    compute: dict[int, list] = {}
    for agent, ivs in busy.items():
        if not agent.name.startswith(COMM_PREFIXES):
            compute.setdefault(agent.rank, []).extend(ivs)
    ranks = sorted({a.rank for a in trace.agents})
    idle = []
    overlap_num = overlap_den = 0.0
    for r in ranks:
        c = _merge(compute.get(r, []))
        m = _merge(transfers.get(r, []))
        if makespan > 0:
            idle.append(1.0 - _total(c) / makespan)
        overlap_num += _intersection(c, m)
        overlap_den += _total(m)
    latencies = [e - s for s, e in step_span.values()]
    return Metrics(
        makespan_us=makespan,
        steps=len(latencies),
        mean_step_us=sum(latencies) / len(latencies) if latencies else 0.0,
        p99_step_us=_percentile(latencies, 99),
        bubble_share=sum(idle) / len(idle) if idle else 0.0,
        comm_overlap_share=overlap_num / overlap_den if overlap_den else 0.0,
        busy_us={str(a): _total(iv) for a, iv in sorted(busy.items())},
    )
