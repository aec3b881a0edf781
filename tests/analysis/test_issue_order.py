"""Which hazards are reported, on random multi-rank op logs run through the engine, against a
brute-force reference built on the full networkx happens-before graph.

The contract (docs/semantics.md, "Which hazards are reported"): accesses are analysed in *issue
order*: ops are taken in the order of issue (for an op log: the line order; a stream op at the line
that enqueued it), and an op that must wait for something issued later (a receive's completion for
its matched send) brings it, with what it needs, forward. The reference computes that order
independently, by depth-first search over predecessors on the networkx split HB graph.

Properties, each checked on every generated log:

(a) every reported pair is unordered (no HB path either way) and conflicting;
(b) every racing byte is covered: for each byte with a race, the first access to it in issue order
    that races with an earlier one is the ``second`` of a reported hazard whose ``first`` comes
    earlier and whose range holds that byte;
(c) in particular the program's first racing access in issue order is the ``second`` of a hazard;
(d) the reported pairs are the same under 5 seeds with jitter 0.5 (only ``manifest`` may change);
(e) applying every proposed fix once and re-simulating leaves no hazard.
"""
from __future__ import annotations

import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streamsim import analyse, parse_oplog, simulate_oplog
from streamsim.analysis.hbgraph import full_graph, happens_before, split_graph
from streamsim.trace import HOST, WRITE, Trace

NBYTES = 16
BUFFERS = ("a", "b", "c")
SEEDS = (1, 2, 3, 4, 5)


@st.composite
def oplogs(draw) -> str:
    """A random op log of 1-3 ranks, one or two host threads each (a second thread's lines are
    picked at random, some behind host work, so that simulated time and line order disagree):
    kernels on three streams, host accesses of pinned buffers, events, host and device syncs, eager
    NCCL messages (a receive sometimes posted well before its send, with ops depending on it in
    between), handle waits and all-reduces; on a rank with two threads, hand-offs (a ``put`` on
    one thread, its ``get`` on the other, later).

    Every rank's program is a projection of one global sequence of steps, and each step occupies the
    next slot of every comm stream it uses, so no log deadlocks."""
    ranks = draw(st.integers(1, 3))
    lines: list[dict] = []
    handles = {r: [] for r in range(ranks)}
    recorded = {r: set() for r in range(ranks)}
    n_handle = [0]

    def ref():
        buf = draw(st.sampled_from(BUFFERS))
        if draw(st.booleans()):
            return buf
        off = draw(st.integers(0, NBYTES - 1))
        return {"buffer": buf, "offset": off, "nbytes": draw(st.integers(1, NBYTES - off))}

    def refs():
        return [ref() for _ in range(draw(st.integers(0, 2)))]

    def whole(r):  # declare every buffer's size up front: views never grow a buffer
        for b in BUFFERS:
            lines.append({"op": "alloc", "rank": r, "buffer": b, "nbytes": NBYTES})

    def local(r: int) -> None:
        what = draw(st.sampled_from(("launch", "launch", "launch", "host", "record", "wait_event",
                                     "sync_event", "sync_stream", "sync_device", "wait")))
        stream = draw(st.sampled_from(("compute", "side", "extra")))  # (extra: often named late)
        dur = draw(st.sampled_from((1.0, 5.0, 20.0)))
        if what == "launch":
            lines.append({"op": "launch", "rank": r, "stream": stream, "reads": refs(),
                          "writes": refs(), "dur": dur})
        elif what == "host":
            lines.append({"op": "host", "rank": r, "reads": refs(), "writes": refs(), "dur": dur})
        elif what == "record":
            ev = draw(st.sampled_from(("e0", "e1")))
            recorded[r].add(ev)
            lines.append({"op": "record", "rank": r, "stream": stream, "event": ev})
        elif what in ("wait_event", "sync_event"):
            if recorded[r]:
                ev = draw(st.sampled_from(sorted(recorded[r])))
                lines.append({"op": what, "rank": r, "stream": stream, "event": ev})
        elif what in ("sync_stream", "sync_device"):
            lines.append({"op": what, "rank": r, "stream": stream})
        elif handles[r]:  # work.wait() on the current stream, or blocking
            lines.append({"op": "wait", "rank": r, "stream": stream,
                          "handle": draw(st.sampled_from(handles[r])),
                          "blocking": draw(st.booleans())})

    def handle(r: int) -> str:
        n_handle[0] += 1
        h = f"h{n_handle[0]}"
        handles[r].append(h)
        return h

    for r in range(ranks):
        whole(r)
    for _ in range(draw(st.integers(1, 18))):
        kind = draw(st.sampled_from(("local",) * 6 + ("message", "message", "all_reduce")))
        if kind == "local" or ranks == 1:
            local(draw(st.integers(0, ranks - 1)))
        elif kind == "message":
            src = draw(st.integers(0, ranks - 1))
            dst = draw(st.sampled_from([r for r in range(ranks) if r != src]))
            send = {"op": "isend", "rank": src, "peer": dst, "tensors": [ref()], "handle": handle(src),
                    "dur": draw(st.sampled_from((1.0, 30.0)))}
            recv = {"op": "irecv", "rank": dst, "peer": src, "tensors": [ref()],
                    "handle": handle(dst), "dur": 1.0}
            if draw(st.booleans()):  # the receive posted first, dst works on meanwhile
                lines.append(recv)
                if draw(st.booleans()):  # ops that must wait for the send, then one that need not
                    s1, s2 = draw(st.permutations(("compute", "side")))
                    buf = draw(st.sampled_from(BUFFERS))
                    lines.append({"op": "wait", "rank": dst, "stream": s1,
                                  "handle": recv["handle"]})
                    lines.append({"op": "launch", "rank": dst, "stream": s1, "writes": [buf]})
                    lines.append({"op": "launch", "rank": dst, "stream": s2, "writes": [buf]})
                for _ in range(draw(st.integers(0, 3))):
                    local(dst)
                lines.append(send)
            else:
                lines += [send, recv]
        else:
            for r in range(ranks):
                lines.append({"op": "all_reduce", "rank": r, "tensors": [ref()],
                              "ranks": list(range(ranks)), "dur": 2.0})
    threaded = {r for r in range(ranks) if draw(st.booleans())}  # ranks with a second thread
    for x in lines:  # each line of such a rank on either thread, behind some host work or none
        if x["rank"] in threaded and x["op"] != "alloc" and draw(st.booleans()):
            x["host"] = "aux"
    out = []
    for x in lines:
        if x["rank"] in threaded and draw(st.integers(0, 3)) == 0:
            out.append({"op": "host", "rank": x["rank"], "host": x.get("host", "main"),
                        "name": "busy", "dur": draw(st.sampled_from((3.0, 40.0)))})
        out.append(x)
    for r in sorted(threaded):  # hand-offs: a put, then its get on the other thread
        for n in range(draw(st.integers(0, 2))):
            i = draw(st.integers(0, len(out)))
            j = draw(st.integers(i, len(out)))
            giver = draw(st.sampled_from(("main", "aux")))
            taker = "aux" if giver == "main" else "main"
            out.insert(j, {"op": "get", "rank": r, "host": taker, "channel": f"q{n}"})
            out.insert(i, {"op": "put", "rank": r, "host": giver, "channel": f"q{n}"})
    return "".join(json.dumps(x) + "\n" for x in out)


def run(text: str, seed=None, jitter: float = 0.0, fixes=(), base=None) -> Trace:
    return simulate_oplog(parse_oplog(text, "gen.jsonl"), seed=seed, jitter=jitter, fixes=fixes,
                          base=base)


def issue_position(t: Trace) -> dict[tuple[int, str], int]:
    """The reference issue order on the split HB graph: op starts taken by key (line of the host
    action that issued the op, host action before the stream op it enqueued, op id), each after its
    unvisited predecessors (depth first, smallest key first); ends last unless needed earlier."""
    g = split_graph(full_graph(t))

    def key(node):
        op = t.op(node[0])
        ip = op if op.agent.kind == HOST or op.issuer is None else t.op(op.issuer)
        return (ip.line, op.agent.kind != HOST, op.id, node[1] == "e")
    order: list = []
    seen: set = set()

    def visit(v) -> None:
        stack = [(v, iter(sorted(g.predecessors(v), key=key)))]
        while stack:
            node, preds = stack[-1]
            p = next((p for p in preds if p not in seen), None)
            if p is not None:
                stack.append((p, iter(sorted(g.predecessors(p), key=key))))
                continue
            stack.pop()
            if node not in seen:
                seen.add(node)
                order.append(node)
    for node in sorted((v for v in g if v[1] == "s"), key=key) + sorted(g, key=key):
        if node not in seen:
            visit(node)
    return {node: i for i, node in enumerate(order)}


def accesses_in_issue_order(t: Trace, pos) -> list[tuple[int, int, object]]:
    """(position, op id, access) for every access, in issue order (an op's reads before its writes)."""
    out = []
    for op in t.ops:
        for acc in op.accesses:
            out.append((pos[(op.id, "s")], acc.mode == WRITE, op.id, acc))
    out.sort(key=lambda x: (x[0], x[1]))
    return [(p, oid, acc) for p, _, oid, acc in out]


def first_races(t: Trace, hb, pos) -> dict[tuple, int]:
    """Per byte (rank, buffer, byte) that has a race: the first op, in issue order, whose access to
    it races with an earlier access (conflicting, unordered either way)."""
    def unordered(x, y):
        return x != y and y not in hb[x] and x not in hb[y]
    seen: dict[tuple, list] = {}
    first: dict[tuple, int] = {}
    for p, oid, acc in accesses_in_issue_order(t, pos):
        v = acc.view
        for b in range(v.offset, v.end):
            key = (v.rank, v.buffer, b)
            if key in first:
                continue
            earlier = seen.setdefault(key, [])
            if any(WRITE in (m, acc.mode) and unordered(x, oid) for x, m in earlier):
                first[key] = oid
            earlier.append((oid, acc.mode))
    return first


def pair_identity(t: Trace, h) -> tuple:
    """A hazard named by what does not depend on timing: both ops by (agent, program position)."""
    a, b = t.op(h.first), t.op(h.second)
    return ((a.agent, a.index), (b.agent, b.index), h.kind, h.rank, h.buffer, h.range)


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@settings(max_examples=250, **COMMON)
@given(oplogs())
def test_reported_pairs_are_real_races_and_every_racing_byte_is_reported(text):
    """(a), (b), (c): soundness, and no racing byte without a hazard on it whose second is the
    first racing access of that byte in issue order."""
    t = run(text)
    assume(t.stall is None)
    hazards = analyse(t).hazards
    hb = happens_before(full_graph(t))
    pos = issue_position(t)
    for h in hazards:  # (a)
        assert h.second not in hb[h.first] and h.first not in hb[h.second], h
        assert pos[(h.first, "s")] < pos[(h.second, "s")], f"first is not issued first: {h}"
        for byte in (h.range[0], h.range[1] - 1):
            modes = []
            for oid in (h.first, h.second):
                modes.append({acc.mode for acc in t.op(oid).accesses
                              if acc.view.rank == h.rank and acc.view.buffer == h.buffer
                              and acc.view.offset <= byte < acc.view.end})
            assert modes[0] and modes[1] and WRITE in modes[0] | modes[1], (h, byte)
    first = first_races(t, hb, pos)
    for (rank, buf, byte), z in first.items():  # (b)
        assert any(h.second == z and h.rank == rank and h.buffer == buf
                   and h.range[0] <= byte < h.range[1] for h in hazards), \
            f"first race on rank{rank}:{buf}[{byte}] (op {z}) not reported"
    if first:  # (c)
        z = min(first.values(), key=lambda oid: pos[(oid, "s")])
        assert any(h.second == z for h in hazards)


@settings(max_examples=100, **COMMON)
@given(oplogs())
def test_reported_pairs_do_not_depend_on_timing(text):
    """(d): five seeds with jitter 0.5 report the same pairs (ops named by agent and position)."""
    t = run(text)
    assume(t.stall is None)
    base = {pair_identity(t, h) for h in analyse(t).hazards}
    for seed in SEEDS:
        u = run(text, seed=seed, jitter=0.5)
        assert {pair_identity(u, h) for h in analyse(u).hazards} == base, seed


def thread_of(t: Trace, op_id: int):
    """The host thread that issued an op (itself, for a host action)."""
    op = t.op(op_id)
    return op.agent if op.agent.kind == HOST else t.op(op.issuer).agent


def by_lines(t: Trace, h) -> tuple:
    """A hazard named by its ops' lines (fixes add ops, so positions shift in a fixed run)."""
    return (t.op(h.first).line, t.op(h.second).line, h.kind, h.rank, h.buffer, h.range)


@settings(max_examples=100, **COMMON)
@given(oplogs())
def test_fixes_close_in_one_pass(text):
    """(e): every reported hazard has a fix, a host access raced by another thread's op included
    (a hand-off between the threads: before issue 25 these had none), except a use issued after
    its free; applying them all once leaves only those."""
    t = run(text)
    assume(t.stall is None)
    hazards = analyse(t).hazards
    unfixable = {by_lines(t, h) for h in hazards if h.fix is None}
    for h in hazards:
        if h.fix is None:
            assert h.kind == "use-after-free" and t.op(h.first).kind == "free", h
        elif t.op(h.first).agent.kind == HOST:
            assert h.fix.kind == "handoff", h
            assert thread_of(t, h.first) != thread_of(t, h.second), h
    fixed = run(text, fixes=[h.fix for h in hazards if h.fix is not None], base=t)
    assert fixed.stall is None
    assert {by_lines(fixed, h) for h in analyse(fixed).hazards} <= unfixable


def test_an_op_that_waits_for_a_later_line_keeps_its_place_and_its_fix_works():
    """copy_back (line 3) must wait for the all-reduce, whose other participant is line 5; it races
    next_copy (line 4). The pair is reported in code order, copy_back first, and its fix (an event
    after copy_back, waited before next_copy) closes it: ordering next_copy first, as a walk that
    pushes a waiting op behind later ones did, proposed a wait before line 3 for an event recorded
    only at line 4, which ordered nothing."""
    text = "".join(json.dumps(x) + "\n" for x in [
        {"op": "all_reduce", "rank": 0, "stream": "red", "tensors": ["flat"], "handle": "ar",
         "dur": 100},
        {"op": "wait", "rank": 0, "stream": "red", "handle": "ar"},
        {"op": "launch", "rank": 0, "stream": "red", "name": "copy_back", "writes": ["slot"]},
        {"op": "launch", "rank": 0, "stream": "compute", "name": "next_copy", "writes": ["slot"]},
        {"op": "all_reduce", "rank": 1, "tensors": ["flat"], "dur": 100},
    ])
    t = run(text)
    (h,) = analyse(t).hazards
    assert (t.op(h.first).name, t.op(h.second).name) == ("copy_back", "next_copy")
    assert analyse(run(text, fixes=[h.fix], base=t)).hazards == ()
