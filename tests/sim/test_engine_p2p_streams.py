"""Where a group's NCCL point-to-point ops run: ``Simulation.group(..., p2p_streams=)``.

``per_group`` (the default): every isend/irecv of the group runs on the rank's ``nccl:<group>``
stream, FIFO with the group's collectives and with each other (ProcessGroupNCCL with a bound device:
"serialized with all other ops on this ProcessGroup, including other P2P ops"). ``per_pair``: one
stream per unordered pair of ranks, ``nccl:<group>:<low>-<high>`` (ProcessGroupNCCL's lazily created
2-rank communicators, key ``getKeySendRecv`` = "low:high"). Each ordering claim is a paired test:
the same program, racy under one setting and ordered under the other.
"""
from __future__ import annotations

import pytest

from streamsim import ModelError, Simulation
from streamsim.analysis.checks import analyse
from streamsim.analysis.liveness import deadlock_from_stall

MB = 1 << 20


def ring_middle(sim: Simulation, p2p_streams: str) -> None:
    """Three ranks in a line. Rank 1 sends x on to rank 2 (8 MiB: rendezvous, and rank 2 is busy),
    then receives y from rank 0, waits it, and overwrites x: the vLLM middle stage's next step."""
    sim.group("pp", [0, 1, 2], p2p_streams=p2p_streams)

    def first(h):
        y0 = h.buffer("y0", 8 * MB)
        h.launch("produce", writes=[y0], dur=100)
        h.group("pp").isend(y0, dst=1)

    def middle(h):
        x, y = h.buffer("x", 8 * MB), h.buffer("y", 8 * MB)
        h.launch("forward", writes=[x], dur=50)
        h.group("pp").isend(x, dst=2)  # no wait: nothing but the stream may order x's reuse
        h.group("pp").irecv(y, src=0).wait()
        h.launch("next forward", reads=[y], writes=[x], dur=50)

    def last(h):
        z = h.buffer("z", 8 * MB)
        h.launch("busy", dur=5000)
        h.group("pp").irecv(z, src=1).wait()
    sim.spawn(0, first)
    sim.spawn(1, middle)
    sim.spawn(2, last)


def run(build, *args):
    sim = Simulation()
    build(sim, *args)
    trace = sim.run()
    return trace, analyse(trace)


def streams(trace, rank: int) -> set[str]:
    return {a.name for a in trace.agents if a.rank == rank and a.kind == "stream"}


def test_per_pair_gives_each_pair_its_own_stream_and_per_group_one():
    """Stream names: per_pair ops of rank 1 run on nccl:pp:0-1 (from rank 0) and nccl:pp:1-2 (to
    rank 2); per_group ops on nccl:pp. The default is per_group (models written before the option
    keep their streams)."""
    pair, _ = run(ring_middle, "per_pair")
    assert streams(pair, 1) == {"compute", "nccl:pp:0-1", "nccl:pp:1-2"}
    assert streams(pair, 0) == {"compute", "nccl:pp:0-1"}
    group, _ = run(ring_middle, "per_group")
    assert streams(group, 1) == {"compute", "nccl:pp"}
    sim = Simulation()
    assert sim.group("g", [0, 1]).p2p_streams == "per_group"


def test_per_group_orders_a_receive_after_the_previous_send_per_pair_does_not():
    """Paired: on one stream the receive from rank 0 queues behind the send to rank 2, so waiting
    the receive also orders the overwrite of x after the send (no hazard). With a stream per pair
    nothing orders them: a WAR on x, manifest here (rank 2 is busy, the send is stuck)."""
    _, ordered = run(ring_middle, "per_group")
    assert ordered.hazards == () and ordered.deadlock is None
    trace, racy = run(ring_middle, "per_pair")
    assert {(h.kind, h.buffer) for h in racy.hazards} == {("WAR", "x")}
    (h,) = racy.hazards
    assert trace.op(h.first).kind == "isend" and trace.op(h.second).name == "next forward"
    assert h.manifest


def test_the_two_directions_of_a_pair_share_its_stream():
    """per_pair is per unordered pair: rank 0's receive from rank 1 runs behind its own send to
    rank 1 on nccl:pp:0-1, so it orders the overwrite after the send under both settings."""
    def build(sim, p2p_streams):
        sim.group("pp", [0, 1], p2p_streams=p2p_streams)

        def r0(h):
            x, y = h.buffer("x", 8 * MB), h.buffer("y", 8 * MB)
            h.group("pp").isend(x, dst=1)
            h.group("pp").irecv(y, src=1).wait()
            h.launch("overwrite", writes=[x], dur=10)

        def r1(h):
            a, b = h.buffer("a", 8 * MB), h.buffer("b", 8 * MB)
            h.launch("busy", dur=1000)
            h.group("pp").irecv(a, src=0).wait()
            h.group("pp").isend(b, dst=0)
        sim.spawn(0, r0)
        sim.spawn(1, r1)
    for mode in ("per_pair", "per_group"):
        trace, f = run(build, mode)
        assert f.hazards == () and f.deadlock is None, mode
        assert streams(trace, 0) == {"compute", "nccl:pp:0-1" if mode == "per_pair" else "nccl:pp"}


def ring_of_rendezvous_sends(sim: Simulation, p2p_streams: str) -> None:
    """Each of 3 ranks sends 8 MiB (rendezvous) to the next, then receives from the previous."""
    sim.group("pp", [0, 1, 2], p2p_streams=p2p_streams)

    def prog(h):
        r = h.rank
        x, y = h.buffer("x", 8 * MB), h.buffer("y", 8 * MB)
        h.group("pp").isend(x, dst=(r + 1) % 3)
        h.group("pp").irecv(y, src=(r - 1) % 3)
    for r in range(3):
        sim.spawn(r, prog)


def test_per_group_fifo_deadlocks_a_ring_of_rendezvous_sends_per_pair_does_not():
    """Paired (liveness): on one stream each rank's receive waits behind its own rendezvous send,
    whose receiver waits the same way: a cycle through the three comm streams. Per pair, the
    receives run on other streams and every send finds its receiver."""
    trace, f = run(ring_of_rendezvous_sends, "per_group")
    deadlock = deadlock_from_stall(trace)
    assert deadlock is not None and deadlock.cycle is not None
    assert {str(a) for a in deadlock.cycle} == {f"rank{r}/nccl:pp" for r in range(3)}
    trace, f = run(ring_of_rendezvous_sends, "per_pair")
    assert trace.stall is None and f.deadlock is None


def test_collectives_stay_on_the_group_stream_and_serialise_with_p2p_only_per_group():
    """Paired: an all_reduce issued after an unwaited (eager) send shares the send's stream
    per_group, so waiting it orders the send before the overwrite; per_pair the all_reduce runs on
    nccl:pp and the send on nccl:pp:0-1, and the overwrite races the send."""
    def build(sim, p2p_streams):
        sim.group("pp", [0, 1], p2p_streams=p2p_streams)

        def r0(h):
            x, s = h.buffer("x", 1024), h.buffer("s", 64)
            h.group("pp").isend(x, dst=1)
            h.group("pp").all_reduce(s).wait()
            h.launch("overwrite", writes=[x], dur=10)

        def r1(h):
            y, s = h.buffer("y", 1024), h.buffer("s", 64)
            h.group("pp").all_reduce(s).wait()  # before the receive: orders nothing after the send
            h.group("pp").irecv(y, src=0).wait()
        sim.spawn(0, r0)
        sim.spawn(1, r1)
    trace, ordered = run(build, "per_group")
    assert ordered.hazards == () and trace.stall is None
    trace, racy = run(build, "per_pair")
    assert {(h.kind, h.buffer) for h in racy.hazards} == {("WAR", "x")}
    (ar,) = [op for op in trace.ops if op.kind == "all_reduce" and op.agent.rank == 0
             and op.agent.kind == "stream"]
    assert ar.agent.name == "nccl:pp"


def test_matching_is_per_group_whatever_the_stream():
    """The k-th send from A to B still pairs with the k-th receive on B from A in the group: the
    per-pair stream changes where ops queue, not which ops match."""
    trace, f = run(ring_middle, "per_pair")
    recv, send = (next(op for op in trace.ops if op.kind == kind and op.agent.rank == rank
                       and op.agent.kind == "stream")
                  for kind, rank in (("irecv", 2), ("isend", 1)))
    assert recv.joins == (send.id,) and recv.agent.name == send.agent.name == "nccl:pp:1-2"


@pytest.mark.parametrize("kwargs, message", [
    ({"p2p_streams": "per_peer"}, "p2p_streams must be one of 'per_group', 'per_pair'"),
    ({"backend": "gloo", "p2p_streams": "per_pair"}, "is for NCCL groups"),
])
def test_bad_p2p_streams_is_a_model_error(kwargs, message):
    with pytest.raises(ModelError, match=message):
        Simulation().group("g", [0, 1], **kwargs)


@pytest.mark.parametrize("first, second", [(("pp", "per_pair"), ("pp:0-1", "per_group")),
                                           (("pp:0-1", "per_group"), ("pp", "per_pair"))])
def test_a_group_whose_stream_is_another_groups_pair_stream_is_refused(first, second):
    """A group named "pp:0-1" would share its stream nccl:pp:0-1 with group pp's pair (0, 1)."""
    sim = Simulation()
    sim.group(first[0], [0, 1], p2p_streams=first[1])
    with pytest.raises(ModelError, match="per-pair stream of group 'pp'"):
        sim.group(second[0], [0, 1], p2p_streams=second[1])
    sim.group("pp:0-2", [0, 1])  # not a pair of pp's ranks: no clash
