"""Liveness: the deadlock behind a stall (wait-for cycle), handles never waited, engine notes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import native
from .findings import Deadlock, Warning
from ..trace import Agent, Trace, waited_on

if TYPE_CHECKING:  # networkx is imported where a stall needs it: every check would pay 0.15 s
    import networkx as nx

HANDLE_NEVER_WAITED = "handle-never-waited"


def wait_for_graph(trace: Trace) -> nx.DiGraph:
    """Blocked agent → each agent whose progress would unblock it (empty without a stall)."""
    import networkx as nx
    g = nx.DiGraph()
    if trace.stall is None:
        return g
    for b in sorted(trace.stall.blocked, key=lambda b: b.agent):
        g.add_node(b.agent)
    for b in sorted(trace.stall.blocked, key=lambda b: b.agent):
        for w in sorted(b.waits_for):
            g.add_edge(b.agent, w)
    return g


EXACT_BUDGET = 1_000_000  # nodes x edges of the cyclic part up to which the shortest cycle is
# sought


def find_cycle(g: nx.DiGraph) -> tuple[Agent, ...] | None:
    """The shortest wait-for cycle, rotated to start at its smallest agent; ties broken by the
    smallest sequence of agents. Deterministic for a given graph.

    That search costs nodes x edges: past :data:`EXACT_BUDGET` (a ring of thousands of ranks, each
    waiting for the next) it settles for the shortest cycle through the smallest agent that is on
    any cycle, found in one breadth-first search (linear, and deterministic too).
    """
    import networkx as nx
    cyclic = [c for c in nx.strongly_connected_components(g)
              if len(c) > 1 or any(g.has_edge(a, a) for a in c)]
    if not cyclic:
        return None
    nodes = sum(map(len, cyclic))
    if nodes * g.number_of_edges() > EXACT_BUDGET:
        start = min(min(c) for c in cyclic)
        return _shortest_cycle_through(g, start)
    best: tuple[Agent, ...] | None = None
    for a in sorted(g):
        for b in sorted(g.successors(a)):
            if not nx.has_path(g, b, a):
                continue
            path = nx.shortest_path(g, b, a)  # BFS: deterministic for sorted insertion
            cyc = (a, *path[:-1]) if b != a else (a,)
            k = cyc.index(min(cyc))
            cyc = cyc[k:] + cyc[:k]
            if best is None or (len(cyc), cyc) < (len(best), best):
                best = cyc
    return best


def _shortest_cycle_through(g: nx.DiGraph, start: Agent) -> tuple[Agent, ...]:
    """The shortest cycle from ``start`` back to it (successors in sorted order: deterministic);
    ``start`` must lie on a cycle and be the smallest agent of its strongly connected component."""
    parent: dict[Agent, Agent] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for a in frontier:
            for b in sorted(g.successors(a)):
                if b == start:
                    cyc = [a]
                    while cyc[-1] != start:
                        cyc.append(parent[cyc[-1]])
                    return tuple(reversed(cyc))
                if b not in parent:
                    parent[b] = a
                    nxt.append(b)
        frontier = nxt
    raise ValueError(f"{start} is on no cycle")


def deadlock_from_stall(trace: Trace) -> Deadlock | None:
    """Every blocked agent (sorted by agent) and the wait-for cycle, when the simulation stalled."""
    if trace.stall is None or not trace.stall.blocked:
        return None
    blocked = tuple(sorted(trace.stall.blocked, key=lambda b: (b.agent, b.op if b.op is not None else -1)))
    return Deadlock(blocked=blocked, cycle=find_cycle(wait_for_graph(trace)))


def unwaited_handles(trace: Trace) -> list[int]:
    """Ids of async ops with a handle that no ``wait`` or completed ``query`` waited on (a wait a
    stall left blocked counts: the handle was waited, it never completed). A trace whose ops are
    not made yet is read from its columns (``native.unwaited_handles``: the same list)."""
    got = native.unwaited_handles(trace)
    if got is not None:
        return got
    waited: set[int] = set()
    handles = []  # (one scan of the ops, not two: 400,000 of them in a 200,000-line log)
    for op in trace.ops:
        if op.handle is not None:
            handles.append(op.id)
        if op.kind == "wait" or op.kind == "query":
            waited.update(waited_on(op))
    return [i for i in handles if i not in waited]


def warnings(trace: Trace) -> list[Warning]:
    """Engine notes as warnings, plus every handle never waited; sorted by op id then kind."""
    out = [Warning(n.kind, n.message, n.op) for n in trace.notes]
    noted = {(w.kind, w.op) for w in out}
    for oid in unwaited_handles(trace):
        if (HANDLE_NEVER_WAITED, oid) in noted:
            continue
        op = trace.op(oid)
        out.append(Warning(
            HANDLE_NEVER_WAITED,
            f"handle {op.handle} of {op.describe()} is never waited (no wait() and no "
            f"is_completed() observed True): nothing orders later work after it",
            oid))
    big = len(trace)  # (a trace whose ops are not made: its columns' count)
    out.sort(key=lambda w: (big if w.op is None else w.op, w.kind, w.message))
    return out
