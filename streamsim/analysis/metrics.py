"""Metrics of one run: makespan, step latency, stream busy time, bubble, overlap; and memory, the
live bytes of each rank over simulated time (:func:`memory_use`).

They answer the reviewer's second question (what does the safe schedule cost?) from the trace alone.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .. import native
from ..trace import STREAM, TRANSFER_START, Op, Trace

COMPUTE_KINDS = frozenset({"launch"})


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
    ``peak_bytes``: each rank's peak live bytes (:func:`memory_use`; empty when the run allocated
    nothing it could count), ``memory_note`` what those figures cannot say ('' when nothing).
    """

    makespan_us: float
    steps: int
    mean_step_us: float
    p99_step_us: float
    bubble_share: float  # idle share of compute streams over the makespan, averaged over ranks
    comm_overlap_share: float  # share of comm-stream transfer time that overlaps compute
    busy_us: dict[str, float]  # per stream agent
    peak_bytes: dict[int, int] = field(default_factory=dict)  # per rank
    memory_note: str = ""

    def timing(self) -> "Metrics":
        """These metrics without the memory figures (to compare the timing of two runs whose
        allocations differ, e.g. a model and a log that names only some of its buffers)."""
        return Metrics(self.makespan_us, self.steps, self.mean_step_us, self.p99_step_us,
                       self.bubble_share, self.comm_overlap_share, self.busy_us)

    @property
    def peak_max_bytes(self) -> int:
        """The largest rank's peak live bytes (0 when nothing was counted)."""
        return max(self.peak_bytes.values(), default=0)

    def to_json_dict(self) -> dict:
        d = asdict(self)
        d["peak_bytes"] = {str(r): b for r, b in self.peak_bytes.items()}
        return {k: (_round(v) if isinstance(v, float) else
                    {a: _round(b) for a, b in v.items()} if isinstance(v, dict) else v)
                for k, v in d.items()}


MiB = 1 << 20


def format_bytes(n: float) -> str:
    """``512 B``, ``64.0 KiB``, ``128.0 MiB``, ``1.5 GiB`` (a sign when negative)."""
    sign, n = ("-" if n < 0 else ""), abs(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size:
            return f"{sign}{n / size:,.1f} {unit}"
    return f"{sign}{n:,.0f} B"


@dataclass(frozen=True)
class MemoryUse:
    """Live bytes per rank over simulated time, from allocations and frees.

    A buffer is live from its allocation (a model's ``host.buffer``, at its host thread's clock; an
    op log's ``alloc`` line) to its free (``host.free``, a ``free`` line: at the host's free, as the
    caching allocator takes the block back for its stream at once; after ``record_stream``, once
    the recorded streams' work is done: :func:`free_time`). Allocating a name that is
    still live on the rank ends the previous life once the new one exists (``x = torch.empty(n)``
    again: the new tensor is made before the name lets go of the old one, so both count at that
    instant). At one instant, changes count in issue order: a free issued before an
    allocation at the same time counts first (the freed block serves the next request), one issued
    after it counts after. ``series``: rank -> ``(time, live bytes from then on)``, a point per change (several
    at one instant: the last is what holds from then on);
    ``peak``/``peak_at``: each rank's most live bytes and when first reached (a rebinding's
    instant, when both lives count, is in the peak but not in the series); ``note``: what the
    figures cannot say (ranks that free nothing, frees of buffers never allocated), '' if nothing.
    Only the buffers the input names are counted: not what a kernel allocates unseen, nor the
    allocator's cached reserve.
    """

    series: dict[int, tuple[tuple[float, int], ...]]
    peak: dict[int, int]
    peak_at: dict[int, float]
    note: str = ""


def free_time(trace: Trace, free, ops=None) -> float:
    """When the caching allocator can hand out the block a stream ``free`` op gives back: at the
    host's free (its issuer: the allocation stream's later work is ordered after it, so the block
    is reused at once), or, after ``record_stream``, once the recorded streams' work (its
    ``after`` ops) has ended. ``ops``: op id -> op (default ``trace.ops``, stored by id); an op a
    trace cut to a subset left out counts as not there (the free's own start instead)."""
    ops = trace.ops if ops is None else ops
    issuer = _get(ops, free.issuer)
    ends = [o.end for o in map(lambda a: _get(ops, a), free.after) if o is not None]
    return max([free.start if issuer is None else issuer.start] + ends)


def _get(ops, op_id):
    if op_id is None:
        return None
    if isinstance(ops, dict):
        return ops.get(op_id)
    return ops[op_id] if 0 <= op_id < len(ops) and ops[op_id].id == op_id else None


def memory_use(trace: Trace) -> MemoryUse:
    """Every rank's live bytes of ``trace`` (see :class:`MemoryUse`); linear in its ops (and a
    sort of its allocations and frees). The scan and the walk run compiled where
    :mod:`streamsim.native` is built (bit for bit these functions' results, tests/native)."""
    walked = native.memory(trace)
    if walked is None:
        walked = _memory_walk(_memory_events(trace))
    return memory_of(walked)


def memory_of(walked: tuple[dict, dict, dict, set, int]) -> MemoryUse:
    """The :class:`MemoryUse` of a walk (:func:`_memory_walk`'s result, or the compiled
    walk's: ``native.memory``, or ``native.measure_columns``' for a run kept as columns)."""
    series, peak, peak_at, freeing, unknown = walked
    notes = []
    never = sorted(r for r in series if r not in freeing)
    if never:
        notes.append(f"rank{'s' * (len(never) > 1)} {', '.join(map(str, never))} free"
                     f"{'s' * (len(never) == 1)} nothing: every buffer stays live to the end, "
                     "so the peak is all that was allocated")
    if unknown:
        notes.append(f"{unknown:,} free{'s' * (unknown != 1)} of buffers with no allocation "
                     "(a buffer an op log uses before any alloc line) not counted")
    if not series:
        notes.append("no allocation recorded (no host.buffer, no alloc line): no memory figures")
    order = sorted(series)
    return MemoryUse(series={r: tuple(series[r]) for r in order},
                     peak={r: peak[r] for r in order}, peak_at={r: peak_at[r] for r in order},
                     note="; ".join(notes))


def _memory_events(trace: Trace) -> list[tuple]:
    """The allocations and frees of ``trace`` as ``(time, issue position, 0 free / 1 alloc, rank,
    buffer, nbytes)``, sorted by time, then issue position (stable: equal keys in the order
    below, the model's allocations first, then the ops in id order)."""
    # (time, issue position, 0 free / 1 alloc, rank, buffer, nbytes): a model's allocation goes
    # between the ops issued before and after it (2 * issued - 1), an op at 2 * its id (a free at
    # the host action that issued it)
    events: list[tuple] = []
    for a in trace.allocations:
        events.append((a.time, 2 * a.issued - 1, 1, a.rank, a.buffer, a.nbytes))
    frees: list[tuple[int, Op]] = []  # (where its event goes in events, the free)
    by_position = True  # op ids are positions (else a trace cut to some of its ops, as a
    for i, op in enumerate(trace.ops):  # notebook's zoom does: looked up by id)
        if op.id != i:
            by_position = False
        k = op.kind
        if k == "alloc":
            events.append((op.start, 2 * op.id, 1, op.agent.rank, op.attrs.get("buffer"),
                           int(op.attrs.get("nbytes") or 0)))
        elif k == "free" and op.agent.kind == STREAM:  # (not the host action that issued it)
            frees.append((len(events), op))
            events.append(())  # (its time needs the lookup above decided: filled in below)
    ops = trace.ops if by_position else {op.id: op for op in trace.ops}
    for at, op in frees:
        events[at] = (free_time(trace, op, ops), 2 * (op.id if op.issuer is None else op.issuer),
                      0, op.agent.rank, op.attrs.get("buffer"), 0)
    events.sort(key=lambda e: e[:2])
    return events


def _memory_walk(events: list[tuple]) -> tuple[dict, dict, dict, set, int]:
    """The walk over sorted ``events`` (:func:`_memory_events`): ``(series, peak, peak_at,
    freeing, unknown)``, per rank its list of ``(time, live bytes)`` changes, its peak and when
    first reached, the ranks that freed something, and how many frees had no allocation."""
    live: dict[tuple[int, str], int] = {}
    now: dict[int, int] = {}
    series: dict[int, list] = {}
    peak: dict[int, int] = {}
    peak_at: dict[int, float] = {}
    freeing: set[int] = set()
    unknown = 0  # frees of buffers with no allocation counted
    for time, _, kind, rank, buf, nbytes in events:
        key = (rank, buf)
        old = live.pop(key, 0)
        if kind:  # the new storage exists before the old one goes (x = torch.empty(n) again)
            live[key] = nbytes
            total = now.get(rank, 0) + nbytes
            if total > peak.get(rank, -1):
                peak[rank], peak_at[rank] = total, time
            total -= old
        elif old:
            freeing.add(rank)
            total = now.get(rank, 0) - old
        else:
            unknown += 1
            continue
        now[rank] = total
        series.setdefault(rank, [(0.0, 0)]).append((time, total))  # (every change: several at
        # one instant draw as a spike, the most the allocator held at once)
        if total > peak.get(rank, -1):
            peak[rank], peak_at[rank] = total, time
    return series, peak, peak_at, freeing, unknown


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
    """Metrics of ``trace`` (times in simulated microseconds). Its per-op scans (:func:`_timing`,
    :func:`memory_use`) run compiled where :mod:`streamsim.native` is built: the same figures,
    floats bit for bit (tests/native/test_metrics.py); these functions stay the reference."""
    parts = native.metrics(trace)
    return metrics_of(trace.end_time, _timing(trace) if parts is None else parts,
                      memory_use(trace))


def metrics_of(makespan: float, timing: tuple, mem: MemoryUse) -> Metrics:
    """The :class:`Metrics` of a run whose end is ``makespan``, from its :func:`_timing` (or the
    compiled scan's: ``native.metrics``, ``native.measure_columns``) and its memory."""
    latencies, idle, overlap_num, overlap_den, busy_us = timing
    return Metrics(
        makespan_us=makespan,
        steps=len(latencies),
        mean_step_us=sum(latencies) / len(latencies) if latencies else 0.0,
        p99_step_us=_percentile(latencies, 99),
        bubble_share=sum(idle) / len(idle) if idle else 0.0,
        comm_overlap_share=overlap_num / overlap_den if overlap_den else 0.0,
        busy_us=busy_us, peak_bytes=mem.peak, memory_note=mem.note,
    )


def _timing(trace: Trace) -> tuple[list[float], list[float], float, float, dict[str, float]]:
    """The per-op part of :func:`compute_metrics`: ``(latencies, idle, overlap_num, overlap_den,
    busy_us)``: each step's latency (in the order steps first appear), each rank's idle share of
    the makespan (ranks in order; none when the makespan is 0), the comm transfer time overlapped
    by compute and all of it, summed over ranks in order, and the busy time of each stream agent
    (sorted by agent)."""
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
                                   stream and not ag.is_gloo,
                                   [] if ag.is_comm else None)
        ivs, steps, moving = info
        if ivs is None:
            continue
        start, end = op.start, op.end
        if steps and op.step is not None:
            span = step_span.get(op.step)
            if span is None:
                step_span[op.step] = [start, end]
            else:  # (min and max, without a call each: this loop runs once per op)
                if start < span[0]:
                    span[0] = start
                if end > span[1]:
                    span[1] = end
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
        if not agent.is_comm:
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
    return (latencies, idle, overlap_num, overlap_den,
            {str(a): _total(iv) for a, iv in sorted(busy.items())})
