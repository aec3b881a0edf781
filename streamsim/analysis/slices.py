"""The graphs that pictures and DOT files show: a hazard's or a deadlock's slice of the HB graph.

Built on :mod:`streamsim.analysis.hbgraph` (``full_graph``, ``hazard_slice``, ``to_dot``), adding what the
reports need on top of it:

* :func:`hb_graph`: the whole HB graph, or for a very long trace only the ops around the finding, so a
  picture of a million-op run does not build a million-node graph;
* :func:`hazard_graph`: ``hazard_slice`` with the missing edge pointing the way the fix orders the two
  ops (from the op the host issued first), which can differ from start order;
* :func:`deadlock_graph`: the blocked ops, the syncs before them, and red ``waits_for`` edges along
  the wait-for relation;
* :func:`cap_nodes` and :func:`keep_steps`: legibility limits, counted so a picture can say what it
  left out;
* :func:`dot_text`: DOT that ``networkx.drawing.nx_pydot.read_dot`` parses back (pydot rejects a node
  attribute called ``name``, so it is written as ``op``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import networkx as nx

from .findings import Deadlock, Hazard
from .hbgraph import full_graph, hazard_slice, to_dot
from ..trace import Op, Trace

FULL_GRAPH_LIMIT = 20_000  # ops; above this, graphs are built around the finding only
LOCAL_SEQ = 20_000  # sequence slots kept on each side of the finding in a local graph
MAX_NODES = 60  # nodes drawn in a picture


def hazard_ops(trace: Trace, hazard: Hazard) -> tuple[Op, Op]:
    """The hazard's two ops, ``first`` then ``second``: already in issue order (the order the
    missing edge runs), so this looks them up and orders nothing."""
    return trace.op(hazard.first), trace.op(hazard.second)


issue_order = hazard_ops  # its first name (public, kept), which said it ordered them


def hb_graph(trace: Trace, around: Iterable[int] = ()) -> nx.DiGraph:
    """:func:`~streamsim.analysis.hbgraph.full_graph` of ``trace``; above ``FULL_GRAPH_LIMIT`` ops, of the ops
    within ``LOCAL_SEQ`` sequence slots of the ops ``around`` only (``graph["local"]`` then holds the
    kept ``(first_seq, last_seq)``). Either way the slices of :mod:`streamsim.analysis.hbgraph` apply."""
    around = [i for i in around if 0 <= i < len(trace.ops)]
    if len(trace.ops) <= FULL_GRAPH_LIMIT or not around:
        return full_graph(trace)
    seqs = [s for i in around for s in (trace.ops[i].start_seq, trace.ops[i].end_seq)]
    lo, hi = min(seqs) - LOCAL_SEQ, max(seqs) + LOCAL_SEQ
    # An agent's ops in a sequence window are consecutive in its program order, so program-order
    # edges stay right; edges to ops outside the window create bare nodes, dropped below.
    kept = tuple(op for op in trace.ops if lo <= op.start_seq <= hi)
    g = full_graph(replace(trace, ops=kept))
    g.remove_nodes_from([n for n, d in g.nodes(data=True) if "kind" not in d])
    g.graph["local"] = (lo, hi)
    return g


def hazard_graph(trace: Trace, hazard: Hazard, graph: nx.DiGraph | None = None,
                 depth: int = 4, after_depth: int = 2) -> nx.DiGraph:
    """The HB slice of ``hazard`` (see :func:`~streamsim.analysis.hbgraph.hazard_slice`) taken in issue
    order: role ``first`` is the op the host issued first, the descendants shown are that op's, and
    the ``missing`` edge runs from it to the other one, as the proposed fix orders them. (Start
    order, which names a hazard's ``first``, can differ: ops that start at the same instant.)
    Ancestors are kept up to ``depth`` edges back, the first op's descendants up to
    ``after_depth`` edges: enough to show where its paths go without the far future of the run."""
    g = hb_graph(trace, (hazard.first, hazard.second)) if graph is None else graph
    x, y = hazard_ops(trace, hazard)
    if (x.id, y.id) != (hazard.first, hazard.second):
        hazard = replace(hazard, first=x.id, second=y.id, first_mode=hazard.second_mode,
                         second_mode=hazard.first_mode)
    s = hazard_slice(trace, hazard, g, depth=depth)
    if after_depth < depth:  # fewer of the first op's descendants: they only show paths too late
        keep = {x.id, y.id}
        for n in (x.id, y.id):
            keep |= set(nx.bfs_tree(g, n, reverse=True, depth_limit=depth))
        keep |= set(nx.bfs_tree(g, x.id, depth_limit=after_depth))
        s.remove_nodes_from([n for n in list(s) if n not in keep])
    s.graph["focus"] = (x.id, y.id)
    return s


def deadlock_graph(trace: Trace, deadlock: Deadlock, graph: nx.DiGraph | None = None,
                   depth: int = 2) -> nx.DiGraph:
    """The ops the blocked agents are stuck in (role ``blocked``), their HB ancestors up to ``depth``,
    and one red ``waits_for`` edge per wait-for pair (from the waiting agent's op to the op of the
    agent it waits for: its blocked op, else its last op)."""
    last: dict = {}
    for op in trace.ops:
        last[op.agent] = op.id
    stuck: dict = {}
    for b in deadlock.blocked:
        oid = b.op if b.op is not None and 0 <= b.op < len(trace.ops) else last.get(b.agent)
        if oid is not None:
            stuck.setdefault(b.agent, oid)
    g = hb_graph(trace, stuck.values()) if graph is None else graph
    nodes: set[int] = set()
    for oid in stuck.values():
        if oid in g:
            nodes |= set(nx.bfs_tree(g, oid, reverse=True, depth_limit=depth))
    s = g.subgraph(sorted(nodes)).copy()
    for x in s:
        s.nodes[x]["role"] = "blocked" if x in stuck.values() else "context"
    for b in deadlock.blocked:
        src = stuck.get(b.agent)
        for w in b.waits_for:
            dst = stuck.get(w, last.get(w))
            if src is None or dst is None or src == dst or src not in g or dst not in g:
                continue
            for n in (src, dst):
                if n not in s:
                    s.add_node(n, **g.nodes[n], role="context")
            s.add_edge(src, dst, kind="waits_for", join=False, color="red", style="dashed",
                       label=f"{b.agent} waits for {w}")
    cycle = " → ".join(map(str, deadlock.cycle + deadlock.cycle[:1])) if deadlock.cycle else ""
    s.graph["name"] = f"deadlock: {cycle}" if cycle else "deadlock"
    s.graph["focus"] = tuple(stuck.values())
    return s


def cap_nodes(graph: nx.DiGraph, keep: Iterable[int], max_nodes: int = MAX_NODES
              ) -> tuple[nx.DiGraph, int]:
    """At most ``max_nodes`` nodes of ``graph``: those nearest (ignoring edge direction) to the nodes
    ``keep``, which always stay. Returns the subgraph and how many nodes were left out."""
    n = graph.number_of_nodes()
    if n <= max_nodes:
        return graph, 0
    chosen: list[int] = [k for k in dict.fromkeys(keep) if k in graph]
    if not chosen:  # nothing to centre on: the first ops
        sub = graph.subgraph(sorted(graph)[:max_nodes]).copy()
        return sub, n - sub.number_of_nodes()
    und = graph.to_undirected(as_view=True)
    seen = set(chosen)
    frontier = list(chosen)
    while frontier and len(chosen) < max_nodes:
        nxt = []
        for u in frontier:
            for v in sorted(und[u]):
                if v not in seen:
                    seen.add(v)
                    nxt.append(v)
        nxt.sort()
        chosen.extend(nxt[:max_nodes - len(chosen)])
        frontier = nxt
    sub = graph.subgraph(chosen).copy()
    return sub, n - sub.number_of_nodes()


def step_range(trace: Trace, ops: Iterable[int], window: int) -> tuple[int, int] | None:
    """Steps within ``window`` of the steps of ``ops`` (None when none of them has a step)."""
    steps = [trace.op(i).step for i in ops if trace.op(i).step is not None]
    if not steps:
        return None
    return min(steps) - window, max(steps) + window


def keep_steps(graph: nx.DiGraph, trace: Trace, steps: tuple[int, int] | None,
               keep: Iterable[int] = ()) -> tuple[nx.DiGraph, int]:
    """The nodes of ``graph`` whose op has no step or a step in ``steps`` (inclusive), plus ``keep``;
    returns the subgraph and how many nodes were left out."""
    if steps is None:
        return graph, 0
    lo, hi = steps
    keep = set(keep)
    nodes = [x for x in graph if x in keep or trace.op(x).step is None or lo <= trace.op(x).step <= hi]
    sub = graph.subgraph(nodes).copy()
    return sub, graph.number_of_nodes() - sub.number_of_nodes()


def dot_text(graph: nx.DiGraph) -> str:
    """DOT for ``graph`` that pydot (hence ``nx_pydot.read_dot``) parses back: the node attribute
    ``name`` is renamed ``op``; everything else is as :func:`~streamsim.analysis.hbgraph.to_dot` writes it."""
    g = graph.copy()
    for _, d in g.nodes(data=True):
        if "name" in d:
            d["op"] = d.pop("name")
    return to_dot(g)
