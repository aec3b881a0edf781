"""The happens-before graph, built with networkx on demand: a whole small trace, or one hazard's slice.

``full_graph`` has one node per op and one edge per sync relation, each with a ``kind``. Join edges
(messages, collectives; attribute ``join=True``) mean "the source *starts* before the target *ends*",
the others "the source ends before the target starts". Happens-before between ops is defined on the
*split* graph, where op x is two nodes ``(x, "s") → (x, "e")``, an ordinary edge u→v is
``(u, "e") → (v, "s")`` and a join edge u→v is ``(u, "s") → (v, "e")``:

    a happens before b  ⇔  a ≠ b and a path leads from (a, "s") to (b, "s").

This is exactly what the vector clocks of :mod:`streamsim.analysis.hb` compute (``S(b)[agent(a)] >= epoch(a)``),
and is the brute-force oracle the tests compare them with. Examples: consecutive ops of a stream are
ordered; a send is ordered before every op after its receive but not before the receive itself (the
only path from the send's start reaches the receive's end).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

import networkx as nx

from .findings import Hazard
from ..kinds import EDGE_KINDS, after_kind, join_kind
from ..trace import HOST, Trace

def full_graph(trace: Trace) -> nx.DiGraph:
    """One node per op (kind, name, agent, rank, start, end, label); edges with ``kind`` and ``join``."""
    g = nx.DiGraph()
    by_agent: dict[Any, list] = defaultdict(list)
    for op in trace.ops:
        g.add_node(op.id, kind=op.kind, name=op.name, agent=str(op.agent), rank=op.agent.rank,
                   start=op.start, end=op.end, label=f"{op.id}: {op.name}\n{op.agent}")
        by_agent[op.agent].append(op)

    def add(u: int, v: int, kind: str, join: bool = False) -> None:
        old = g.get_edge_data(u, v)
        if old is None or (old["join"] and not join):  # an ordinary edge implies the join edge
            g.add_edge(u, v, kind=kind, join=join)

    for agent in sorted(by_agent):
        ops = sorted(by_agent[agent], key=lambda o: o.index)
        for p, q in zip(ops, ops[1:]):
            add(p.id, q.id, "program")
    for op in trace.ops:
        if op.issuer is not None:
            add(op.issuer, op.id, "enqueue")
        on_host = op.agent.kind == HOST
        for r in op.after:
            add(r, op.id, after_kind(op.kind, on_host))
        for r in op.joins:
            add(r, op.id, join_kind(op.kind), join=True)
    return g


def split_graph(g: nx.DiGraph) -> nx.DiGraph:
    """The start/end node form of ``g`` on which happens-before is plain reachability (see module)."""
    s = nx.DiGraph()
    for x in g:
        s.add_edge((x, "s"), (x, "e"))
    for u, v, join in g.edges(data="join"):
        if join:
            s.add_edge((u, "s"), (v, "e"))
        else:
            s.add_edge((u, "e"), (v, "s"))
    return s


def ordered(g: nx.DiGraph, a: int, b: int) -> bool:
    """Brute force: does op ``a`` happen before op ``b`` in ``g`` (a :func:`full_graph`)?"""
    return a != b and nx.has_path(split_graph(g), (a, "s"), (b, "s"))


def happens_before(g: nx.DiGraph) -> dict[int, set[int]]:
    """For every op, the set of ops it happens before (brute force over the split graph)."""
    s = split_graph(g)
    return {a: {b for b, end in nx.descendants(s, (a, "s")) if end == "s" and b != a} for a in g}


def hazard_slice(trace: Trace, hazard: Hazard, graph: nx.DiGraph | None = None,
                 depth: int = 4) -> nx.DiGraph:
    """The part of the HB graph that explains ``hazard``.

    Nodes: both ops, their HB ancestors up to ``depth`` edges back (the syncs that order each of
    them) and the first op's descendants up to ``depth`` (the paths that exist from it, none reaching
    the second). Node attribute ``role`` is "first", "second" or "context". An extra edge
    first → second with ``kind="missing"`` (and the fix text, when there is one) marks what is absent.
    """
    g = full_graph(trace) if graph is None else graph
    f, s = hazard.first, hazard.second
    nodes = {f, s}
    for x in (f, s):
        nodes |= set(nx.bfs_tree(g, x, reverse=True, depth_limit=depth))
    nodes |= set(nx.bfs_tree(g, f, depth_limit=depth))
    sub = g.subgraph(sorted(nodes)).copy()
    for x in sub:
        sub.nodes[x]["role"] = "first" if x == f else "second" if x == s else "context"
    sub.add_edge(f, s, kind="missing", join=False,
                 label=hazard.fix.text if hazard.fix is not None else f"missing {hazard.kind} order")
    sub.graph["name"] = f"{hazard.kind} {hazard.buffer}[{hazard.range[0]}:{hazard.range[1]}]"
    return sub


def _q(v: object) -> str:
    """A DOT double-quoted string."""
    if isinstance(v, bool):
        v = "true" if v else "false"
    s = str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


_RENAMED = {"name": "op_name"}  # "name" clashes with DOT readers' own argument (pydot)


def _attrs(d: dict, extra: Iterable[tuple[str, str]] = ()) -> str:
    items = [f"{_RENAMED.get(k, k)}={_q(v)}" for k, v in sorted(d.items()) if v is not None]
    items += [f"{k}={_q(v)}" for k, v in extra]
    return f" [{', '.join(items)}]" if items else ""


_ROLE_STYLE = {"first": (("color", "red"), ("penwidth", "2")),
               "second": (("color", "red"), ("penwidth", "2"))}


def to_dot(graph: nx.DiGraph, name: str | None = None) -> str:
    """The graph as a DOT digraph; every name and value quoted (the ``name`` attribute is written as
    ``op_name``). Missing edges are dashed red, join edges dotted."""
    title = name or graph.graph.get("name", "hb")
    lines = [f"digraph {_q(title)} {{", "  node [shape=box];"]
    for x, d in graph.nodes(data=True):
        lines.append(f"  {_q(x)}{_attrs(d, _ROLE_STYLE.get(d.get('role'), ()))};")
    for u, v, d in graph.edges(data=True):
        extra = (("style", "dashed"), ("color", "red")) if d.get("kind") == "missing" else \
            (("style", "dotted"),) if d.get("join") else ()
        lines.append(f"  {_q(u)} -> {_q(v)}{_attrs(d, extra)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
