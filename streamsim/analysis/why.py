"""Why nothing orders a hazard's two accesses: the sync chain each side has, and the edge missing.

A reviewer does not trust "no HB path" on its own; they want to see what *does* order each op and
where the chains stop. For a hazard between ``x`` (issued first) and ``y``, :func:`explain` collects:

* the edges into ``x`` and into ``y`` (what each is directly ordered after);
* the latest op of ``x``'s agent that happens before ``y``, with the chain of edges that orders it
  (for example an older send waited by a handle wait): the point up to which ``y`` *is* protected;
* the earliest op of ``y``'s agent that ``x`` happens before, with its chain: it comes after ``y`` in
  program order, or there is none;
* the access windows (for the manifest interval).

The edges are those of :func:`streamsim.analysis.hbgraph.full_graph` (same kinds), read straight from the
trace through an :class:`HBIndex`, and happens-before is reachability on the start/end ("split")
form described in :mod:`streamsim.analysis.hbgraph`. Every edge of that form runs forward in the trace's
global sequence (a linear extension of HB), so a search that visits nodes in sequence order stops at
the first op of the wanted agent it meets: that op is the earliest (or latest) one. Searches give up
``HORIZON`` sequence slots past the other op, so a long run costs what its neighbourhood costs.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from .findings import USE_AFTER_FREE, Hazard
from ..kinds import EDGE_TEXT, after_kind, join_kind  # (EDGE_TEXT: an edge kind's words, re-exported)
from ..trace import HOST, Agent, Trace

HORIZON = 50_000  # sequence slots a search looks beyond the hazard's ops


@dataclass(frozen=True)
class Link:
    """One HB edge ``src → dst`` of kind ``kind`` (a key of :data:`EDGE_TEXT`)."""

    src: int
    dst: int
    kind: str


class HBIndex:
    """The HB edges of a trace by op, both ways, built once in one pass (no graph library).

    ``into[v]`` lists ``(u, kind, join)`` for every edge u → v: program order, enqueue, ``after``
    (kind named as :func:`~streamsim.analysis.hbgraph.full_graph` names it) and ``joins`` (``join=True``:
    u's start is ordered before v's end). ``out[u]`` lists the same edges as ``(v, kind, join)``.
    """

    def __init__(self, trace: Trace):
        self.trace = trace
        n = len(trace.ops)
        self.into: list[list[tuple[int, str, bool]]] = [[] for _ in range(n)]
        self.out: list[list[tuple[int, str, bool]]] = [[] for _ in range(n)]
        last: dict[Agent, int] = {}
        for op in sorted(trace.ops, key=lambda o: (o.agent, o.index)):
            prev = last.get(op.agent)
            if prev is not None:
                self._add(prev, op.id, "program", False)
            last[op.agent] = op.id
        for op in trace.ops:
            if op.issuer is not None:
                self._add(op.issuer, op.id, "enqueue", False)
            kind = after_kind(op.kind, op.agent.kind == HOST)
            for r in op.after:
                self._add(r, op.id, kind, False)
            for r in op.joins:
                self._add(r, op.id, join_kind(op.kind), True)

    def _add(self, u: int, v: int, kind: str, join: bool) -> None:
        self.into[v].append((u, kind, join))
        self.out[u].append((v, kind, join))

    def _seq(self, node: tuple[int, bool]) -> int:
        op = self.trace.ops[node[0]]
        return op.end_seq if node[1] else op.start_seq

    def _search(self, start: int, agent: Agent, forward: bool, limit: int
                ) -> tuple[Link, ...] | None:
        """The chain from op ``start`` to the earliest op of ``agent`` it happens before
        (``forward``), or from the latest op of ``agent`` that happens before ``start``; None when
        there is none within sequence ``limit``. Nodes are ``(op, is_end)``; a ≺ b iff a path
        leads from (a, start) to (b, start)."""
        ops = self.trace.ops
        first = (start, False)
        parent: dict[tuple[int, bool], tuple[tuple[int, bool], str | None]] = {first: (first, None)}
        sign = 1 if forward else -1
        heap = [(sign * self._seq(first), first)]
        while heap:
            key, node = heapq.heappop(heap)
            if key > sign * limit:  # past the limit, in the search's direction
                return None
            oid, is_end = node
            if not is_end and oid != start and ops[oid].agent == agent:
                return self._chain(node, parent)
            for nxt, kind in self._steps(node, forward):
                if nxt not in parent:
                    parent[nxt] = (node, kind)
                    heapq.heappush(heap, (sign * self._seq(nxt), nxt))
        return None

    def _steps(self, node: tuple[int, bool], forward: bool):
        """Split-graph neighbours of ``node`` with the op edge's kind (None: inside one op)."""
        oid, is_end = node
        if forward:
            if not is_end:
                yield (oid, True), None
                for v, kind, join in self.out[oid]:
                    if join:
                        yield (v, True), kind
            else:
                for v, kind, join in self.out[oid]:
                    if not join:
                        yield (v, False), kind
        else:
            if is_end:
                yield (oid, False), None
                for u, kind, join in self.into[oid]:
                    if join:
                        yield (u, False), kind
            else:
                for u, kind, join in self.into[oid]:
                    if not join:
                        yield (u, True), kind

    @staticmethod
    def _chain(node, parent) -> tuple[Link, ...]:
        """The op-to-op links on the search path to ``node``, from the path's first op on."""
        links = []
        while True:
            prev, kind = parent[node]
            if prev == node:
                break
            if kind is not None:
                a, b = prev[0], node[0]
                links.append((a, b, kind))
            node = prev
        return tuple(Link(a, b, k) for a, b, k in links[::-1])

    def reaches(self, x: int, agent: Agent, limit: int) -> tuple[Link, ...] | None:
        """Chain from op ``x`` to the earliest op of ``agent`` that ``x`` happens before."""
        return self._search(x, agent, True, limit)

    def covered(self, y: int, agent: Agent, limit: int) -> tuple[Link, ...] | None:
        """Chain from the latest op of ``agent`` that happens before op ``y``, to ``y``."""
        chain = self._search(y, agent, False, limit)
        if chain is None:
            return None
        return tuple(Link(l.dst, l.src, l.kind) for l in reversed(chain))

    def edges_into(self, op: int) -> tuple[Link, ...]:
        """Edges into ``op``, program order first, then by kind and source."""
        order = {k: i for i, k in enumerate(EDGE_TEXT)}
        links = [Link(u, op, kind) for u, kind, _ in self.into[op]]
        return tuple(sorted(set(links), key=lambda l: (order.get(l.kind, 99), l.src)))


@dataclass(frozen=True)
class Why:
    """The explanation of one hazard; ``x`` was issued first, ``y`` second (see module)."""

    x: int
    y: int
    x_after: tuple[Link, ...]  # edges into x
    y_after: tuple[Link, ...]  # edges into y
    y_covered: tuple[Link, ...] | None  # chain from the latest op of x's agent before y (None: none)
    x_reaches: tuple[Link, ...] | None  # chain from x to the earliest op of y's agent after it
    x_window: tuple[float, float]  # simulated interval of x's conflicting access
    y_window: tuple[float, float]
    complete: bool = True  # the searches covered the whole trace (else HORIZON slots around)

    @property
    def overlap(self) -> tuple[float, float] | None:
        """The interval during which both accesses touched the bytes, if they overlapped."""
        lo, hi = max(self.x_window[0], self.y_window[0]), min(self.x_window[1], self.y_window[1])
        return (lo, hi) if lo < hi else None

    @property
    def gap(self) -> float:
        """Time between the earlier access's end and the later one's start (negative: overlap)."""
        a, b = sorted((self.x_window, self.y_window))
        return b[0] - a[1]


def access_window(trace: Trace, op_id: int, hazard: Hazard, mode: str) -> tuple[float, float]:
    """When op ``op_id`` touched the hazard's bytes with ``mode``: the union of its matching accesses'
    windows (the whole op if none matches, e.g. a ``free``)."""
    op = trace.op(op_id)
    lo, hi = hazard.range
    spans = [op.window_time(a) for a in op.accesses
             if a.mode == mode and a.view.rank == hazard.rank and a.view.buffer == hazard.buffer
             and a.view.offset < hi and lo < a.view.end]
    if not spans:
        return (op.start, op.end)
    return (min(s for s, _ in spans), max(e for _, e in spans))


FREE_MEANS = ("the block may be handed to another allocation meanwhile (nothing is corrupted "
              "until it is reused)")


def free_verdict(trace: Trace, hazard: Hazard, *, short: bool = False, unit: str = "µs"
                 ) -> str | None:
    """What a manifest use-after-free did in this run, in words (no "MANIFEST" prefix); None for
    any other hazard. A free corrupts nothing by itself: it gives the block back to the caching
    allocator, which may hand it to another allocation while the other access still runs (that
    allocation's writes then reach a read, or a write corrupts it): :data:`FREE_MEANS`.
    ``short`` (a picture's caption): only when it was freed, without the other op's name; ``unit``:
    how microseconds are written ("us" in the plain-text report)."""
    a, b = trace.op(hazard.first), trace.op(hazard.second)
    if hazard.kind != USE_AFTER_FREE or not hazard.manifest or "free" not in (a.kind, b.kind):
        return None
    free, use = (a, b) if a.kind == "free" else (b, a)
    mode = hazard.first_mode if use.id == hazard.first else hazard.second_mode
    lo, hi = access_window(trace, use.id, hazard, mode)
    what, at = f"the {mode}" + ("" if short else f" by {use.name}"), free.start
    if at < lo:
        when = f"the buffer was freed {lo - at:,.1f} {unit} before {what} began"
    elif at <= hi:
        when = (f"the buffer was freed while {what} still ran ({hi - at:,.1f} {unit} before it "
                "ended)")
    else:  # the use was issued after the free, and ran before the free took effect
        when = (f"{what}, issued after the free, ran {at - hi:,.1f} {unit} before the free took "
                "effect")
    return when if short else f"{when}: {FREE_MEANS}"


def explain(trace: Trace, hazard: Hazard, index: HBIndex | None = None,
            horizon: int = HORIZON) -> Why:
    """Explain ``hazard`` (see module); ``index`` is the trace's :class:`HBIndex` when built."""
    idx = HBIndex(trace) if index is None else index
    x, y = trace.op(hazard.first), trace.op(hazard.second)
    lo = min(x.start_seq, y.start_seq) - horizon
    hi = max(x.end_seq, y.end_seq) + horizon
    xmode = hazard.first_mode if x.id == hazard.first else hazard.second_mode
    ymode = hazard.second_mode if y.id == hazard.second else hazard.first_mode
    return Why(x=x.id, y=y.id, x_after=idx.edges_into(x.id), y_after=idx.edges_into(y.id),
               y_covered=idx.covered(y.id, x.agent, lo), x_reaches=idx.reaches(x.id, y.agent, hi),
               x_window=access_window(trace, x.id, hazard, xmode),
               y_window=access_window(trace, y.id, hazard, ymode),
               complete=lo <= 0 and hi >= 2 * len(trace.ops) - 1)
