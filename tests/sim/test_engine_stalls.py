"""Stalls (deadlocks, receives with no sender) and runaway bounds (max_ops, max_time)."""
from __future__ import annotations

import time

import pytest

from streamsim import BoundExceeded, Simulation

KB, MB = 1024, 1 << 20
HANG = 30.0  # seconds: a guard against a hang, not a timing (each run takes well under 0.1 s)

GLOO = ("cpu", [0, 1], {"backend": "gloo", "eager_bytes": 4 * KB})


def _send_then_recv(nbytes):
    def prog(host):
        g = host.group("cpu")
        peer = 1 - host.rank
        g.send_object(nbytes, dst=peer)
        g.recv_object(src=peer)
    return prog


def test_two_rendezvous_send_objects_to_each_other_deadlock_promptly(eng):
    """Two ranks each in a blocking rendezvous send_object to the other (above eager_bytes) stall at
    once: trace.stall holds both host threads, each blocked in its send with a reason and waits_for
    naming the other."""
    t0 = time.perf_counter()
    tr = eng.simulate(_send_then_recv(MB), _send_then_recv(MB), groups=[GLOO])
    assert time.perf_counter() - t0 < HANG
    assert tr.stall is not None
    blocked = {str(b.agent): b for b in tr.stall.blocked}
    assert set(blocked) == {"rank0/main", "rank1/main"}
    for me, other in (("rank0/main", "rank1/main"), ("rank1/main", "rank0/main")):
        b = blocked[me]
        assert [str(a) for a in b.waits_for] == [other]
        assert "send_object" in b.reason and "recv_object" in b.reason
        op = tr.op(b.op)
        assert op.kind == "send_object" and str(op.agent) == me
        assert op.attrs.get("unfinished") is True
    assert tr.stall.time == 0


def test_eager_send_objects_to_each_other_do_not_stall(eng):
    """At or below eager_bytes the same program completes: each send returns after its transfer and
    both receives find their data."""
    tr = eng.simulate(_send_then_recv(KB), _send_then_recv(KB), groups=[GLOO])
    assert tr.stall is None
    for r in (0, 1):
        recv = eng.one(tr, f"rank{r}/main", kind="recv_object")
        assert recv.joins == (eng.one(tr, f"rank{1 - r}/main", kind="send_object").id,)


def test_nccl_rendezvous_sends_to_each_other_then_blocking_waits_stall_on_the_streams(eng):
    """Each rank isends (rendezvous) to the other and blocks on it before posting its receive:
    both hosts and both comm streams are reported blocked."""
    def prog(host):
        g = host.group("g")
        peer = 1 - host.rank
        g.isend(host.buffer("x", MB), dst=peer).wait(blocking=True)
        g.irecv(host.buffer("y", MB), src=peer)

    t0 = time.perf_counter()
    tr = eng.simulate(prog, prog, groups=[("g", [0, 1], {})])
    assert time.perf_counter() - t0 < HANG
    blocked = {str(b.agent): b for b in tr.stall.blocked}
    assert set(blocked) == {"rank0/main", "rank1/main", "rank0/nccl:g", "rank1/nccl:g"}
    assert "rendezvous" in blocked["rank0/nccl:g"].reason
    assert [str(a) for a in blocked["rank0/nccl:g"].waits_for] == ["rank1/main"]
    assert [str(a) for a in blocked["rank0/main"].waits_for] == ["rank0/nccl:g"]


def test_recv_object_with_no_sender_stalls_with_that_agent(eng):
    """A recv_object nobody sends to leaves a stall naming the receiving host thread."""
    def prog0(host):
        host.host_work("python", dur=10)

    def prog1(host):
        host.group("cpu").recv_object(src=0)

    tr = eng.simulate(prog0, prog1, groups=[GLOO])
    assert tr.stall is not None
    (b,) = tr.stall.blocked
    assert str(b.agent) == "rank1/main"
    assert "recv_object" in b.reason
    assert tr.op(b.op).kind == "recv_object"
    assert b.waits_for == ()  # rank 0 finished: nobody can send


def test_nccl_irecv_with_no_sender_stalls_its_stream_and_the_waiting_stream(eng):
    """An irecv with no matching send blocks its comm stream; a stream that waited its handle is
    blocked behind it; the host that finished is not."""
    def prog1(host):
        host.group("g").irecv(host.buffer("y", KB), src=0).wait()
        host.launch("use", dur=1)

    tr = eng.simulate(lambda host: None, prog1, groups=[("g", [0, 1], {})])
    blocked = {str(b.agent): b for b in tr.stall.blocked}
    assert set(blocked) == {"rank1/nccl:g", "rank1/compute"}
    assert [str(a) for a in blocked["rank1/compute"].waits_for] == ["rank1/nccl:g"]
    assert [op.agent.kind for op in tr.ops if op.name == "use"] == ["host"]  # kernel never ran


def test_infinite_launch_loop_stops_at_max_ops():
    """`while True: host.launch(...)` raises BoundExceeded once the model issued max_ops ops."""
    def prog(host):
        while True:
            host.launch("k", dur=1)

    sim = Simulation(max_ops=10_000)
    sim.spawn(0, prog)
    t0 = time.perf_counter()
    with pytest.raises(BoundExceeded, match=r"more than 10000 ops \(max_ops\)"):
        sim.run()
    assert time.perf_counter() - t0 < HANG


def test_infinite_host_work_loop_stops_at_max_time():
    """An endless loop of host_work with growing durations never blocks, yet stops with
    BoundExceeded naming max_time (the engine checks host clocks, not only simpy's)."""
    def prog(host):
        d = 1.0
        while True:
            host.host_work("python", dur=d)
            d *= 2

    sim = Simulation(max_time=1e9)
    sim.spawn(0, prog)
    t0 = time.perf_counter()
    with pytest.raises(BoundExceeded, match=r"max_time=1e\+09"):
        sim.run()
    assert time.perf_counter() - t0 < HANG


def test_device_runaway_stops_at_max_time():
    """Kernels that push the device clock past max_time stop the run with BoundExceeded."""
    def prog(host):
        for _ in range(100):
            host.launch("k", dur=1e6)

    sim = Simulation(max_time=1e7)
    sim.spawn(0, prog)
    with pytest.raises(BoundExceeded, match="max_time"):
        sim.run()


def test_a_receive_with_no_sender_names_its_peer_once(eng):
    """The API names a receive 'irecv(x) from rank1'; the stall reason added 'from rank1' again."""
    def prog(host):
        host.group("pp").irecv(host.buffer("x", 16), src=1)
    tr = eng.simulate(prog, groups=[("pp", [0, 1], {})])
    (b,) = [b for b in tr.stall.blocked if b.agent.kind == "stream"]
    assert b.reason == "irecv(x) from rank1 waits for the matching send's data"


def test_a_jitter_that_overflows_a_duration_is_a_model_error(eng):
    """--jitter 1e308 is finite, but e^1e308 is not: an OverflowError blamed on the model's line."""
    from streamsim import ModelError
    def prog(host):
        for _ in range(10):  # (a factor below 1 underflows to 0 instead: ten draws, seeded)
            host.launch("k", dur=1.0)
    with pytest.raises(ModelError, match=r"jitter 1e\+308 overflows the duration of k"):
        eng.simulate(prog, seed=1, jitter=1e308)
