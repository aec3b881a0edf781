"""barrier, reduce, gather and scatter in models (docs/semantics.md): what each rank reads and
writes (only the root writes a reduce's tensors and a gather's list, only it reads a scatter's
list), what their completion orders (only what the data flow guarantees), a barrier's wait
blocking the host on NCCL too, their bytes on the wire, and the API's errors."""
from __future__ import annotations

import pytest

from streamsim import ModelError, Simulation
from streamsim.analysis.checks import analyse
from streamsim.analysis.hb import hb_pass
from streamsim.analysis.hbgraph import full_graph, happens_before

MB = 1 << 20


def run(program, ranks=(0, 1), backend="nccl"):
    sim = Simulation()
    sim.group("g", list(ranks), backend)
    sim.group("m", list(ranks), backend)  # (for messages: a stream of their own)
    for r in ranks:
        sim.spawn(r, program)
    return sim.run()


def found(trace) -> set[tuple[int, str, str, str]]:
    return {(h.rank, h.kind, h.buffer, trace.op(h.second).name) for h in analyse(trace).hazards}


def rooted(kind: str, wait: bool):
    """Rank 0 is the root; after the op (waited or not) every rank overwrites its tensor and,
    on the root, its list."""
    def program(host):
        g, r = host.group("g"), host.rank
        t = host.buffer("t", MB)
        lst = [host.buffer(f"l{i}", MB) for i in range(2)] if r == 0 else []
        host.launch("produce", writes=[t, *lst], dur=100)
        if kind == "reduce":
            w = g.reduce(t, dst=0)
        elif kind == "gather":
            w = g.gather(t, lst or None, dst=0)
        else:
            w = g.scatter(t, lst or None, src=0)
        if wait:
            w.wait()
        host.launch("overwrite", writes=[t, *lst], dur=100)
    return program


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_each_rank_races_only_what_it_reads_or_writes_until_waited(backend):
    """reduce: the root writes its tensor (WAW), the other rank only reads it (WAR); gather: the
    root writes its list (WAW) and every rank reads its tensor (WAR); scatter: the root reads its
    list (WAR) and every rank writes its tensor (WAW). With the wait: nothing."""
    want = {
        "reduce": {(0, "WAW", "t"), (1, "WAR", "t")},
        "gather": {(0, "WAR", "t"), (1, "WAR", "t"), (0, "WAW", "l0"), (0, "WAW", "l1")},
        "scatter": {(0, "WAW", "t"), (1, "WAW", "t"), (0, "WAR", "l0"), (0, "WAR", "l1")},
    }
    for kind, pairs in want.items():
        racy = found(run(rooted(kind, False), backend=backend))
        assert racy == {(r, k, b, "overwrite") for r, k, b in pairs}, kind
        assert found(run(rooted(kind, True), backend=backend)) == set(), kind


def told(kind: str, root_writes: bool):
    """Rank 1 waits its op, then tells rank 0 (a message); rank 0, which never waits its own,
    then overwrites its tensor (reduce, gather: rank 0 is the root) or its list (scatter: rank 0
    is the source)."""
    def program(host):
        g, r = host.group("g"), host.rank
        t, flag = host.buffer("t", MB), host.buffer("flag", 4)
        lst = [host.buffer("l", MB)] * 2 if r == 0 else []
        if kind == "reduce":
            w = g.reduce(t, dst=0)
        elif kind == "gather":
            w = g.gather(t, lst or None, dst=0)
        elif kind == "scatter":
            w = g.scatter(t, lst or None, src=0)
        else:
            w = g.all_reduce(t)
        m = host.group("m")
        if r == 1:
            w.wait()
            m.isend(flag, 0).wait()
        else:
            m.irecv(flag, 1).wait()
            host.launch("overwrite", writes=[t] if kind != "scatter" else lst, dur=10)
    return program


def test_completion_orders_only_what_the_data_flow_guarantees():
    """A rank that finished its reduce or gather may not have reached the root yet: the root's
    overwrite after hearing from it still races the root's write. A rank that finished its
    scatter got its share from the source, so the source's read of its list started: ordered
    before what follows the message. (all_reduce, as ever: ordered.)"""
    assert found(run(told("reduce", True))) == {(0, "WAW", "t", "overwrite")}
    assert found(run(told("gather", True))) == {(0, "WAR", "t", "overwrite")}
    assert found(run(told("scatter", False))) == set()
    assert found(run(told("all_reduce", True))) == set()


def test_the_joins_of_each_kind_and_the_clocks_agree_with_the_graph():
    for kind, joins in (("reduce", {0: 1, 1: 0}), ("gather", {0: 1, 1: 0}),
                        ("scatter", {0: 0, 1: 1})):
        trace = run(rooted(kind, True))
        ops = {o.agent.rank: o for o in trace.ops if o.kind == kind and o.agent.kind == "stream"}
        assert {r: len(o.joins) for r, o in ops.items()} == joins, kind
        hb, graph = hb_pass(trace, keep_clocks=True).hb, happens_before(full_graph(trace))
        ids = [o.id for o in trace.ops]
        assert all(hb.ordered(a, b) == (b in graph[a]) for a in ids for b in ids), kind


def barrier_program(with_barrier: bool):
    """Rank 0 sends a pinned buffer and never waits; rank 1 waits its receive; then (with the
    barrier) both pass a barrier, and rank 0's host refills the buffer."""
    def program(host):
        g = host.group("g")
        p = host.buffer("pinned", MB)
        if host.rank == 0:
            g.isend(p, 1)
        else:
            g.irecv(p, 0).wait()
        if with_barrier:
            g.barrier().wait()
        if host.rank == 0:
            host.host_work("refill", writes=[p], dur=5)
    return program


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_a_barrier_orders_the_ranks_and_its_wait_blocks_the_host_on_nccl_too(backend):
    """Without the barrier the host's refill races the send (WAR). With it the refill comes
    after rank 1's completed receive, hence after the send: the barrier's wait blocked the host
    (an NCCL wait that only made the current stream wait would not order host work)."""
    assert found(run(barrier_program(False), backend=backend)) == {
        (0, "WAR", "pinned", "refill")}
    trace = run(barrier_program(True), backend=backend)
    assert found(trace) == set()
    waits = [o for o in trace.ops if o.kind == "wait" and "barrier" in o.name]
    assert [(o.agent.kind, o.attrs["blocking"]) for o in waits] == [("host", True)] * 2


def test_bytes_on_the_wire():
    """reduce moves its tensor, gather and scatter the root's whole list (the ranks times the
    tensor) on every rank, barrier nothing (the latency alone)."""
    for kind, nbytes in (("reduce", MB), ("gather", 2 * MB), ("scatter", 2 * MB)):
        trace = run(rooted(kind, True))
        for op in (o for o in trace.ops if o.kind == kind and o.agent.kind == "stream"):
            assert op.attrs["nbytes"] == nbytes, (kind, op.agent)
    trace = run(barrier_program(True))
    op = next(o for o in trace.ops if o.kind == "barrier" and o.agent.kind == "stream")
    assert op.attrs["nbytes"] == 0 and op.end - op.start == pytest.approx(10.0)


@pytest.mark.parametrize("call, fragment", [
    (lambda g, t, r: g.gather(t, None, dst=0), "rank 0 is the destination: it needs a gather_list"),
    (lambda g, t, r: g.gather(t, [t, t], dst=1 - r if r else 0) if r else g.gather(t, [t], dst=0),
     "gather_list is given on rank 1"),
    (lambda g, t, r: g.scatter(t, None, src=0), "rank 0 is the source"),
    (lambda g, t, r: g.reduce(t, dst=5), "root rank 5 is not in group 'g'"),
    (lambda g, t, r: g.reduce(t, dst=r), "every rank must issue the same op with the same root"),
    (lambda g, t, r: g.reduce(t, dst=0) if r else g.all_reduce(t),
     "every rank must issue the same op with the same root"),
])
def test_api_errors(call, fragment):
    def program(host):
        call(host.group("g"), host.buffer("t", 64), host.rank)
    with pytest.raises(ModelError) as exc:
        run(program)
    assert fragment in str(exc.value)
