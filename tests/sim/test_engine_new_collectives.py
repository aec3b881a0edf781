"""reduce_scatter, all_to_all, all_gather_into_tensor and batch_isend_irecv (docs/semantics.md):
for each, a racy program and its ordered twin, plus what is particular to it (bytes on the wire;
a batch's ops starting together, on the group's own stream, each handle waiting the batch)."""
from __future__ import annotations

import pytest

from streamsim import ModelError, P2POp, Simulation
from streamsim.analysis.checks import analyse

KB, MB = 1024, 1 << 20


def run(program, ranks=(0, 1), **group_kw):
    sim = Simulation()
    sim.group("g", list(ranks), **group_kw)
    for r in ranks:
        sim.spawn(r, program)
    return sim.run()


def found(trace) -> set[tuple[int, str, str, str, str]]:
    return {(h.rank, h.kind, h.buffer, trace.op(h.first).name, trace.op(h.second).name)
            for h in analyse(trace).hazards}


# -- collectives: the input is read until the op completes; the output written until then ------
def collective_program(kind: str, wait: bool):
    def program(host):
        g = host.group("g")
        inp, out = host.buffer("inp", 4 * MB), host.buffer("out", 4 * MB)
        host.launch("produce", writes=[inp], dur=100)
        if kind == "reduce_scatter":
            work = g.reduce_scatter(out[0:2 * MB], inp, name=kind)
        elif kind == "all_to_all":
            work = g.all_to_all(out, inp, name=kind)
        else:
            work = g.all_gather_into_tensor(out, inp[0:2 * MB], name=kind)
        if wait:
            work.wait()
        host.launch("overwrite input", writes=[inp], dur=100)
        host.launch("consume output", reads=[out], dur=100)
    return program


@pytest.mark.parametrize("kind", ["reduce_scatter", "all_to_all", "all_gather_into_tensor"])
def test_a_collective_races_its_input_and_output_until_waited(kind):
    """Racy: without wait() the next kernels overwrite the input the op still reads (WAR) and read
    the output it still writes (RAW), on every rank. Ordered: work.wait() on the compute stream
    orders both after the op."""
    racy = found(run(collective_program(kind, wait=False)))
    assert racy == {(r, k, buf, kind, second) for r in (0, 1) for k, buf, second in
                    (("WAR", "inp", "overwrite input"), ("RAW", "out", "consume output"))}
    assert found(run(collective_program(kind, wait=True))) == set()


@pytest.mark.parametrize("kind", ["reduce_scatter", "all_to_all", "all_gather_into_tensor"])
def test_a_collective_reads_its_input_after_the_current_stream_wrote_it(kind):
    """The NCCL enqueue edge applies: 'produce' on compute before the op is ordered before it."""
    trace = run(collective_program(kind, wait=True))
    op = next(o for o in trace.ops if o.name == kind and o.agent.kind == "stream")
    produce = next(o for o in trace.ops if o.name == "produce" and o.agent.kind == "stream"
                   and o.agent.rank == op.agent.rank)
    assert op.after == (produce.id,)


def test_reduce_scatter_and_all_to_all_cost_their_inputs_all_gather_its_output():
    """Default bytes on the wire: reduce_scatter and all_to_all move their input; all_gather (and
    all_gather_into_tensor, the same op) its gathered output."""
    for kind, nbytes in (("reduce_scatter", 4 * MB), ("all_to_all", 4 * MB),
                         ("all_gather_into_tensor", 4 * MB)):
        trace = run(collective_program(kind, wait=True))
        op = next(o for o in trace.ops if o.name == kind and o.agent.kind == "stream")
        assert op.attrs["nbytes"] == nbytes
        assert op.end - op.start == pytest.approx(10.0 + nbytes / 25_000.0)
    op = next(o for o in run(collective_program("all_gather_into_tensor", True)).ops
              if o.name == "all_gather_into_tensor" and o.agent.kind == "stream")
    assert op.kind == "all_gather"


def test_a_collective_completes_only_when_every_rank_joined():
    """Every participant's contribution comes before every participant's completion: rank 1
    joins 1 ms late, rank 0's all_to_all ends after that."""
    def program(host):
        if host.rank == 1:
            host.launch("late", dur=1000)
        host.group("g").all_to_all(host.buffer("o", MB), host.buffer("i", MB)).wait()
    trace = run(program)
    ops = [o for o in trace.ops if o.kind == "all_to_all" and o.agent.kind == "stream"]
    assert len(ops) == 2 and all(o.end >= 1000 + 10 + MB / 25_000 for o in ops)


# -- batch_isend_irecv ---------------------------------------------------------------------------
def exchange(batched: bool, wait: str | None, recv_first: bool = False, size: int = 8 * MB,
             **group_kw):
    """Both ranks send ``out`` to the other and receive ``inp``, rendezvous-sized; then overwrite
    ``out`` and read ``inp``. ``wait``: which handle is waited before that (None: none)."""
    def program(host):
        peer, g = 1 - host.rank, host.group("g")
        out, inp = host.buffer("out", size), host.buffer("inp", size)
        host.launch("produce", writes=[out], dur=100)
        if batched:
            ops = [P2POp("isend", out, peer, name="send"), P2POp("irecv", inp, peer, name="recv")]
            if recv_first:
                ops.reverse()
            works = dict(zip((op.name for op in ops), g.batch_isend_irecv(ops)))
        else:
            works = {"send": g.isend(out, dst=peer, name="send"),
                     "recv": g.irecv(inp, src=peer, name="recv")}
        if wait is not None:
            works[wait].wait()
        host.launch("overwrite out", writes=[out], dur=100)
        host.launch("read inp", reads=[inp], dur=100)
    return run(program, **group_kw)


def test_unbatched_exchange_deadlocks_on_one_stream_a_batch_does_not():
    """Each rank's stream holds [send, recv]; a rendezvous send retires only once the peer's recv
    runs, which sits behind the peer's own send: a deadlock. A batch starts both together."""
    assert exchange(batched=False, wait="recv").stall is not None
    for recv_first in (False, True):
        trace = exchange(batched=True, wait="recv", recv_first=recv_first)
        assert trace.stall is None
        send, recv = (next(o for o in trace.ops if o.name == n and str(o.agent) == "rank0/nccl:g")
                      for n in ("send", "recv"))
        assert send.start == recv.start  # launched together
        assert (send.index, recv.index) == (0, 1)  # sends first on the stream, whatever the list


def test_a_batch_handle_waits_the_whole_batch():
    """Racy: no wait, the overwrite races the send and the read races the receive. Ordered:
    waiting only the receive's handle orders the send too (ProcessGroupNCCL's one Work per
    coalesced batch), so the overwrite of the send's buffer is safe."""
    racy = found(exchange(batched=True, wait=None))
    assert racy == {(r, k, buf, first, second) for r in (0, 1) for k, buf, first, second in
                    (("WAR", "out", "send", "overwrite out"), ("RAW", "inp", "recv", "read inp"))}
    assert found(exchange(batched=True, wait="recv")) == set()
    assert found(exchange(batched=True, wait="send")) == set()


def test_a_batch_runs_on_the_group_stream_even_with_per_pair_p2p():
    """A batched op uses the group's own communicator (getKeyFromDevice), not a pair's."""
    trace = exchange(batched=True, wait="recv", p2p_streams="per_pair")
    streams = {o.agent.name for o in trace.ops if o.kind in ("isend", "irecv")
               and o.agent.kind == "stream"}
    assert streams == {"nccl:g"}
    trace = exchange(batched=False, wait="recv", size=KB, p2p_streams="per_pair")
    assert {o.agent.name for o in trace.ops if o.kind in ("isend", "irecv")
            and o.agent.kind == "stream"} == {"nccl:g:0-1"}


def test_batch_mistakes_are_model_errors():
    def empty(host):
        host.group("g").batch_isend_irecv([])
    with pytest.raises(ModelError, match="at least one P2POp"):
        run(empty)
    with pytest.raises(ModelError, match="'isend' or 'irecv'"):
        P2POp("send", None, 1)


def test_another_thread_cannot_slip_into_a_batch():
    """With a launch overhead each member of a batch took host time, and the engine let the rank's
    other threads catch up between members: another thread's all_reduce on the group's stream
    landed inside the batch and the run failed with an error blaming the model."""
    sim = Simulation(launch_overhead=1.0)
    sim.group("g", [0, 1])

    def batcher(host):
        x, y = host.buffer("x", 1 * MB), host.buffer("y", 1 * MB)
        peer = 1 - host.rank
        works = host.group("g").batch_isend_irecv([P2POp("isend", x, peer), P2POp("irecv", y, peer),
                                                   P2POp("isend", x, peer)]
                                                  if host.rank == 0 else
                                                  [P2POp("irecv", y, peer), P2POp("isend", x, peer),
                                                   P2POp("irecv", y, peer)])
        for w in works:
            w.wait()

    def reducer(host):
        z = host.buffer("z", 1 * MB)
        host.group("g").all_reduce(z).wait()

    for r in (0, 1):
        sim.spawn(r, batcher)
        sim.spawn(r, reducer, thread="side")
    trace = sim.run()
    assert trace.stall is None
    batch = [o for o in trace.ops if o.agent.rank == 0 and "batch" in o.attrs]
    assert len(batch) == 3 and len({o.start for o in batch}) == 1
