"""Simulated-timeline tests of communication: NCCL enqueue, Work handles, p2p matching and timing,
collectives, gloo objects, and the caching allocator's free / record_stream (docs/SEMANTICS.md).

Default NCCL cost: latency 10 us + bytes / 25,000 B/us, eager up to 64 KiB. Gloo: 30 us +
bytes / 2,000 B/us.
"""
from __future__ import annotations

import pytest

KB, MB = 1024, 1 << 20

NCCL = ("g", [0, 1], {})


def nccl_time(nbytes: int) -> float:
    return 10.0 + nbytes / 25_000.0


def gloo_time(nbytes: int) -> float:
    return 30.0 + nbytes / 2_000.0


# -- NCCL enqueue edge -----------------------------------------------------------------------------


def test_nccl_op_waits_on_the_current_stream_at_enqueue(eng):
    """An NCCL op first makes its comm stream wait on the current stream's position at enqueue:
    its `after` is the current stream's last op; a kernel enqueued later on compute neither gates
    the send nor is delayed by it."""
    def prog0(host):
        buf = host.buffer("x", KB)
        host.launch("k1", writes=[buf], dur=500)
        host.group("g").isend(buf, dst=1)
        host.launch("k2", dur=100)

    def prog1(host):
        host.group("g").irecv(host.buffer("y", KB), src=0)

    tr = eng.simulate(prog0, prog1, groups=[NCCL])
    k1, k2 = eng.one(tr, "rank0/compute", "k1"), eng.one(tr, "rank0/compute", "k2")
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    assert send.after == (k1.id,)
    assert eng.issued(tr, send).kind == "isend"
    assert eng.timing(send) == (500, 500 + nccl_time(KB))
    assert eng.timing(k2) == (500, 600)  # compute is not held up by the comm stream
    assert [(a.mode, a.view.buffer) for a in send.accesses] == [("read", "x")]
    recv = eng.one(tr, "rank1/nccl:g", kind="irecv")
    assert [(a.mode, a.view.buffer) for a in recv.accesses] == [("write", "y")]


def test_nccl_op_waits_on_whichever_stream_is_current(eng):
    """Issued inside `use_stream(side)`, the NCCL op waits on side's position, not compute's; with an
    empty current stream it has no `after` edge at all."""
    def prog0(host):
        side = host.stream("side")
        host.launch("long", dur=1000)
        host.launch("short", stream=side, dur=20)
        with host.use_stream(side):
            host.group("g").isend(host.buffer("x", KB), dst=1, name="from_side")
        with host.use_stream("empty"):
            host.group("g").isend(host.buffer("x", KB), dst=1, name="from_empty")

    def prog1(host):
        for _ in range(2):
            host.group("g").irecv(host.buffer("y", KB), src=0)

    tr = eng.simulate(prog0, prog1, groups=[NCCL])
    s1, s2 = eng.find(tr, "rank0/nccl:g", kind="isend")
    assert s1.after == (eng.one(tr, "rank0/side", "short").id,)
    assert s1.start == 20
    assert s2.after == ()
    assert s1.attrs["current_stream"] == "side" and s2.attrs["current_stream"] == "empty"


# -- Work.wait / is_completed -----------------------------------------------------------------------


def _late_sender(host, nbytes=KB, delay=1000.0):
    host.host_work("python", dur=delay)
    host.group("g").isend(host.buffer("x", nbytes), dst=0)


def test_nccl_work_wait_gates_the_current_stream_and_does_not_block_the_host(eng):
    """NCCL work.wait() enqueues a stream 'wait' on the stream current at the call, with `after` =
    the comm op: later ops of that stream start after the comm op ends; the host clock is
    unchanged (it does not block)."""
    now = {}

    def prog0(host):
        buf = host.buffer("y", KB)
        w = host.group("g").irecv(buf, src=1)
        now["before"] = host.now
        w.wait()
        now["after"] = host.now
        host.launch("use", reads=[buf], dur=5)
        host.host_work("python", dur=1)

    tr = eng.simulate(prog0, _late_sender, groups=[NCCL])
    recv = eng.one(tr, "rank0/nccl:g", kind="irecv")
    wait = eng.one(tr, "rank0/compute", kind="wait")
    host_wait = eng.issued(tr, wait)
    assert host_wait.kind == "wait" and eng.timing(host_wait) == (0, 0)
    assert now == {"before": 0, "after": 0}
    assert wait.after == (recv.id,)
    assert wait.attrs["blocking"] is False and wait.attrs["handle"] == recv.handle
    assert recv.end == 1000 + nccl_time(KB)
    assert eng.timing(wait) == (recv.end, recv.end)
    assert eng.one(tr, "rank0/compute", "use").start == recv.end
    assert eng.timing(eng.one(tr, "rank0/main", "python")) == (0, 1)  # the host was never held


def test_nccl_work_wait_gates_the_stream_current_at_the_call_not_at_issue(eng):
    """The wait goes to the stream current when wait() is called: waiting inside use_stream(side)
    gates side, and compute's later kernels do not wait for the comm op."""
    def prog0(host):
        side = host.stream("side")
        w = host.group("g").irecv(host.buffer("y", KB), src=1)
        with host.use_stream(side):
            w.wait()
            host.launch("on_side", dur=1)
        host.launch("on_compute", dur=1)

    tr = eng.simulate(prog0, _late_sender, groups=[NCCL])
    recv = eng.one(tr, "rank0/nccl:g", kind="irecv")
    assert eng.one(tr, "rank0/side", kind="wait").after == (recv.id,)
    assert eng.find(tr, "rank0/compute", kind="wait") == []
    assert eng.one(tr, "rank0/side", "on_side").start == recv.end
    assert eng.timing(eng.one(tr, "rank0/compute", "on_compute")) == (0, 1)


@pytest.mark.parametrize("how", ["group", "call"])
def test_nccl_blocking_wait_blocks_the_host(eng, how):
    """With blocking wait (group blocking_wait=True, or wait(blocking=True)) work.wait() is a host op
    that blocks until the comm op ends, with `after` = the comm op, and enqueues no stream wait."""
    now = {}

    def prog0(host):
        w = host.group("g").irecv(host.buffer("y", KB), src=1)
        w.wait(blocking=True) if how == "call" else w.wait()
        now["after"] = host.now
        host.launch("next", dur=1)

    kw = {"blocking_wait": True} if how == "group" else {}
    tr = eng.simulate(prog0, _late_sender, groups=[("g", [0, 1], kw)])
    recv = eng.one(tr, "rank0/nccl:g", kind="irecv")
    wait = eng.one(tr, "rank0/main", kind="wait")
    assert wait.after == (recv.id,) and wait.attrs["blocking"] is True
    assert eng.timing(wait) == (0, recv.end)
    assert now["after"] == recv.end
    assert eng.find(tr, "rank0/compute", kind="wait") == []
    assert eng.one(tr, "rank0/compute", "next").start == recv.end


def test_gloo_work_wait_blocks_the_host(eng):
    """A gloo Work's wait() blocks the host until the op ends (`after` = the op)."""
    now = {}

    def prog0(host):
        w = host.group("cpu").isend_object(1000, dst=1)
        w.wait()
        now["after"] = host.now

    def prog1(host):
        host.group("cpu").recv_object(src=0)

    tr = eng.simulate(prog0, prog1, groups=[("cpu", [0, 1], {"backend": "gloo"})])
    send = eng.one(tr, "rank0/gloo:cpu", kind="isend_object")
    wait = eng.one(tr, "rank0/main", kind="wait")
    assert eng.timing(send) == (0, gloo_time(1000))
    assert wait.after == (send.id,) and eng.timing(wait) == (0, send.end)
    assert now["after"] == send.end
    assert eng.one(tr, "rank1/main", kind="recv_object").joins == (send.id,)


def test_is_completed_orders_the_op_only_when_true(eng):
    """is_completed() returns False while the op runs (no edge) and True once it ended, with
    `after` = the op: only a True result orders the op before the host's next action."""
    results = []

    def prog0(host):
        w = host.group("g").isend(host.buffer("x", KB), dst=1)   # eager: 0 .. 10.04
        host.host_work("python", dur=5)
        results.append(w.is_completed())                       # at 5
        host.host_work("python", dur=100)
        results.append(w.is_completed())                       # at 105

    def prog1(host):
        host.group("g").irecv(host.buffer("y", KB), src=0)

    tr = eng.simulate(prog0, prog1, groups=[NCCL])
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    q_false, q_true = eng.find(tr, "rank0/main", kind="query")
    assert results == [False, True]
    assert (q_false.start, q_false.attrs["result"], q_false.after) == (5, False, ())
    assert (q_true.start, q_true.attrs["result"], q_true.after) == (105, True, (send.id,))
    assert q_true.attrs["handle"] == send.handle


# -- p2p timing and matching -----------------------------------------------------------------------


def _late_receiver(nbytes, delay=5000.0):
    def prog1(host):
        host.host_work("python", dur=delay)
        host.group("g").irecv(host.buffer("y", nbytes), src=0)
    return prog1


def _sender(nbytes):
    def prog0(host):
        host.group("g").isend(host.buffer("x", nbytes), dst=1)
    return prog0


@pytest.mark.parametrize("nbytes", [KB, 64 * KB])
def test_eager_send_completes_on_its_own(eng, nbytes):
    """At or below eager_bytes a send ends at start + latency + bytes/bandwidth even though the
    receive is posted much later; the receive then completes at once, joining the send."""
    tr = eng.simulate(_sender(nbytes), _late_receiver(nbytes), groups=[NCCL])
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    recv = eng.one(tr, "rank1/nccl:g", kind="irecv")
    assert eng.timing(send) == (0, nccl_time(nbytes))
    assert eng.timing(recv) == (5000, 5000)
    assert recv.joins == (send.id,) and send.joins == ()
    assert recv.after == ()  # nothing runs from the receive back to the send


def test_rendezvous_send_ends_only_after_the_matching_receive_started(eng):
    """Above eager_bytes a send stays in flight until the receiver's op starts, then takes the
    transfer time; both ends complete together and the receive joins the send."""
    nbytes = MB
    tr = eng.simulate(_sender(nbytes), _late_receiver(nbytes), groups=[NCCL])
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    recv = eng.one(tr, "rank1/nccl:g", kind="irecv")
    assert send.start == 0
    assert send.end == 5000 + nccl_time(nbytes)
    assert eng.timing(recv) == (5000, send.end)
    assert recv.joins == (send.id,)
    assert tr.stall is None


def test_rendezvous_threshold_is_the_groups_eager_bytes(eng):
    """eager_bytes is per group: a 1 KiB send is rendezvous on a group with eager_bytes=512."""
    tr = eng.simulate(_sender(KB), _late_receiver(KB), groups=[("g", [0, 1], {"eager_bytes": 512})])
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    assert send.end == 5000 + nccl_time(KB)


def test_receive_posted_first_waits_for_the_data(eng):
    """A receive that starts before its send ends when the send's data arrives."""
    def prog0(host):
        host.host_work("python", dur=300)
        host.group("g").isend(host.buffer("x", KB), dst=1)

    def prog1(host):
        host.group("g").irecv(host.buffer("y", KB), src=0)

    tr = eng.simulate(prog0, prog1, groups=[NCCL])
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    recv = eng.one(tr, "rank1/nccl:g", kind="irecv")
    assert eng.timing(send) == (300, 300 + nccl_time(KB))
    assert eng.timing(recv) == (0, send.end)
    assert recv.joins == (send.id,)


def test_kth_send_matches_kth_receive_per_group_src_dst(eng):
    """The k-th send from A to B in a group pairs with the k-th receive on B from A in that group:
    sends to other ranks or on other groups do not shift the count."""
    def prog0(host):
        a, b = host.group("a"), host.group("b")
        x = host.buffer("x", KB)
        a.isend(x, dst=2, name="a:0->2 #0")
        b.isend(x, dst=1, name="b:0->1 #0")
        a.isend(x, dst=1, name="a:0->1 #0")
        a.isend(x, dst=1, name="a:0->1 #1")
        b.isend(x, dst=1, name="b:0->1 #1")

    def prog1(host):
        a, b = host.group("a"), host.group("b")
        y = host.buffer("y", KB)
        b.irecv(y, src=0, name="b #0")
        a.irecv(y, src=0, name="a #0")
        b.irecv(y, src=0, name="b #1")
        a.irecv(y, src=0, name="a #1")
        a.irecv(y, src=2, name="a from 2 #0")

    def prog2(host):
        a = host.group("a")
        a.isend(host.buffer("z", KB), dst=1, name="a:2->1 #0")
        a.irecv(host.buffer("z", KB), src=0, name="a:0->2 recv")

    tr = eng.simulate(prog0, prog1, prog2, groups=[("a", [0, 1, 2], {}), ("b", [0, 1], {})])
    sends = {op.name: op.id for op in tr.ops if op.kind == "isend" and op.agent.kind == "stream"}
    pairs = {op.name: op.joins for op in tr.ops if op.kind == "irecv" and op.agent.kind == "stream"}
    assert pairs == {
        "b #0": (sends["b:0->1 #0"],), "a #0": (sends["a:0->1 #0"],),
        "b #1": (sends["b:0->1 #1"],), "a #1": (sends["a:0->1 #1"],),
        "a from 2 #0": (sends["a:2->1 #0"],), "a:0->2 recv": (sends["a:0->2 #0"],),
    }
    assert tr.stall is None and tr.notes == ()


def test_unmatched_send_is_noted(eng):
    """An eager send nobody receives completes, and is reported as Note('unmatched-send')."""
    tr = eng.simulate(_sender(KB), None, groups=[NCCL])
    send = eng.one(tr, "rank0/nccl:g", kind="isend")
    assert eng.timing(send) == (0, nccl_time(KB))
    assert [(n.kind, n.op) for n in tr.notes] == [("unmatched-send", send.id)]


# -- collectives --------------------------------------------------------------------------------


def _collective(kind, delay_per_rank=100.0, dur=50.0):
    def prog(host):
        g = host.group("g3")
        x, out = host.buffer("x", KB), host.buffer("out", 3 * KB)
        host.launch("pre", dur=delay_per_rank * host.rank)
        if kind == "all_reduce":
            g.all_reduce(x, dur=dur)
        elif kind == "all_gather":
            g.all_gather(out, x, dur=dur)
        else:
            g.broadcast(x, src=0, dur=dur)
    return prog


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "broadcast"])
def test_collective_participants_end_together_after_the_last_joined(eng, kind):
    """Each participant starts when its comm stream reaches it (after its current stream's work);
    all end together at last join + duration; each `joins` lists the other participants."""
    progs = [_collective(kind)] * 3
    tr = eng.simulate(*progs, groups=[("g3", [0, 1, 2], {})])
    ops = [eng.one(tr, f"rank{r}/nccl:g3", kind=kind) for r in range(3)]
    assert [op.start for op in ops] == [0, 100, 200]
    assert [op.end for op in ops] == [250, 250, 250]
    ids = {op.id for op in ops}
    for r, op in enumerate(ops):
        assert set(op.joins) == ids - {op.id}
        assert op.after == (eng.one(tr, f"rank{r}/compute", "pre").id,)


def test_collective_accesses_follow_their_inputs_and_outputs(eng):
    """all_reduce reads and writes in place; all_gather reads inputs, writes outputs; broadcast
    reads on the source rank only and writes everywhere."""
    progs = [_collective("all_reduce")] * 3
    tr = eng.simulate(*progs, groups=[("g3", [0, 1, 2], {})])
    ar = eng.one(tr, "rank0/nccl:g3", kind="all_reduce")
    assert sorted((a.mode, a.view.buffer) for a in ar.accesses) == [("read", "x"), ("write", "x")]
    tr = eng.simulate(*[_collective("all_gather")] * 3, groups=[("g3", [0, 1, 2], {})])
    ag = eng.one(tr, "rank0/nccl:g3", kind="all_gather")
    assert sorted((a.mode, a.view.buffer) for a in ag.accesses) == [("read", "x"), ("write", "out")]
    tr = eng.simulate(*[_collective("broadcast")] * 3, groups=[("g3", [0, 1, 2], {})])
    b0, b1 = eng.one(tr, "rank0/nccl:g3", kind="broadcast"), eng.one(tr, "rank1/nccl:g3", kind="broadcast")
    assert sorted(a.mode for a in b0.accesses) == ["read", "write"]
    assert [a.mode for a in b1.accesses] == ["write"]


def test_collectives_match_in_issue_order_per_group(eng):
    """The k-th collective of each rank in a group forms one collective; the longest duration of the
    participants sets the common end."""
    def prog(host):
        g = host.group("g")
        x = host.buffer("x", KB)
        g.all_reduce(x, dur=10 if host.rank == 0 else 40, name="first")
        g.all_reduce(x, dur=5, name="second")

    tr = eng.simulate(prog, prog, groups=[NCCL])
    f0, s0 = eng.find(tr, "rank0/nccl:g")
    f1, s1 = eng.find(tr, "rank1/nccl:g")
    assert f0.joins == (f1.id,) and s0.joins == (s1.id,)
    assert eng.timing(f0) == eng.timing(f1) == (0, 40)
    assert eng.timing(s0) == eng.timing(s1) == (40, 45)


# -- gloo objects ---------------------------------------------------------------------------------

GLOO = ("cpu", [0, 1], {"backend": "gloo"})


def test_gloo_eager_send_object_blocks_only_for_the_transfer(eng):
    """A gloo send_object at or below eager_bytes blocks the host for latency + bytes/bandwidth,
    not for the receiver; the later recv_object completes at once and joins the send."""
    now = {}

    def prog0(host):
        host.group("cpu").send_object(1000, dst=1)
        now["after_send"] = host.now

    def prog1(host):
        host.host_work("python", dur=1000)
        host.group("cpu").recv_object(src=0)
        now["after_recv"] = host.now

    tr = eng.simulate(prog0, prog1, groups=[GLOO])
    send = eng.one(tr, "rank0/main", kind="send_object")
    recv = eng.one(tr, "rank1/main", kind="recv_object")
    assert eng.timing(send) == (0, gloo_time(1000))
    assert now["after_send"] == gloo_time(1000)
    assert eng.timing(recv) == (1000, 1000) and recv.joins == (send.id,)
    assert now["after_recv"] == 1000


def test_gloo_rendezvous_send_object_blocks_until_the_receiver_arrives(eng):
    """Above eager_bytes send_object blocks the host until the matching recv_object started, then
    for the transfer; the receiver is released at the same time."""
    nbytes = MB

    def prog0(host):
        host.group("cpu").send_object(nbytes, dst=1)
        host.host_work("next", dur=1)

    def prog1(host):
        host.host_work("python", dur=1000)
        host.group("cpu").recv_object(src=0)

    tr = eng.simulate(prog0, prog1, groups=[GLOO])
    send = eng.one(tr, "rank0/main", kind="send_object")
    recv = eng.one(tr, "rank1/main", kind="recv_object")
    end = 1000 + gloo_time(nbytes)
    assert eng.timing(send) == (0, end)
    assert eng.timing(recv) == (1000, end) and recv.joins == (send.id,)
    assert eng.one(tr, "rank0/main", "next").start == end


def test_gloo_recv_object_blocks_until_the_send_arrives(eng):
    """recv_object blocks the host until the matching send's data has arrived."""
    def prog0(host):
        host.host_work("python", dur=400)
        host.group("cpu").send_object(100, dst=1)

    def prog1(host):
        host.group("cpu").recv_object(src=0)
        host.host_work("next", dur=1)

    tr = eng.simulate(prog0, prog1, groups=[GLOO])
    recv = eng.one(tr, "rank1/main", kind="recv_object")
    assert eng.timing(recv) == (0, 400 + gloo_time(100))
    assert eng.one(tr, "rank1/main", "next").start == recv.end


# -- free and record_stream -------------------------------------------------------------------------


def test_free_without_record_stream_is_a_write_on_the_allocation_stream_only(eng):
    """A free is a write of the whole buffer enqueued on its allocation stream; without
    record_stream it is not ordered after another stream's use (it may run during it)."""
    def prog(host):
        side = host.stream("side")
        buf = host.buffer("x", KB)  # allocated on compute
        host.launch("use", stream=side, reads=[buf], dur=1000)
        host.free(buf)

    tr = eng.simulate(prog)
    free = eng.one(tr, "rank0/compute", kind="free")
    assert free.after == () and eng.timing(free) == (0, 0)
    assert [(a.mode, a.view.buffer, a.view.nbytes) for a in free.accesses] == [("write", "x", KB)]
    assert free.attrs["buffer"] == "x"


def test_record_stream_orders_the_free_after_that_streams_work_up_to_the_free(eng):
    """After record_stream(buf, side), free(buf) waits for side's work enqueued up to the free (also
    work enqueued after record_stream), not for side's work enqueued after the free."""
    def prog(host):
        side = host.stream("side")
        buf = host.buffer("x", KB)
        host.launch("use1", stream=side, reads=[buf], dur=100)
        host.record_stream(buf, side)
        host.launch("use2", stream=side, reads=[buf], dur=500)
        host.free(buf)
        host.launch("later", stream=side, dur=10_000)

    tr = eng.simulate(prog)
    rs = eng.one(tr, "rank0/main", kind="record_stream")
    assert rs.attrs == {"buffer": "x", "stream": "side"}
    free = eng.one(tr, "rank0/compute", kind="free")
    assert free.after == (eng.one(tr, "rank0/side", "use2").id,)
    assert eng.timing(free) == (600, 600)
    assert eng.issued(tr, free).index > rs.index


def test_record_stream_is_consumed_by_the_free(eng):
    """record_stream applies to the next free of that buffer only: a re-allocated buffer of the same
    name freed later is not ordered after the side stream again."""
    def prog(host):
        side = host.stream("side")
        buf = host.buffer("x", KB)
        host.launch("use", stream=side, reads=[buf], dur=100)
        host.record_stream(buf, side)
        host.free(buf)
        buf = host.buffer("x", KB)
        host.launch("use_again", stream=side, reads=[buf], dur=100)
        host.free(buf)

    tr = eng.simulate(prog)
    f1, f2 = eng.find(tr, "rank0/compute", kind="free")
    assert f1.after == (eng.one(tr, "rank0/side", "use").id,)
    assert f2.after == ()


def test_device_synchronize_does_not_wait_for_gloo_work(eng):
    """cuda.synchronize() drains the rank's CUDA streams only: a pending gloo isend_object (CPU work
    on gloo's own thread) is not awaited and not ordered before the host's next action."""
    def prog0(host):
        host.launch("k", dur=100)
        host.group("cpu").isend_object(MB, dst=1)  # rendezvous: in flight until rank1 receives
        host.synchronize()
        host.host_work("next", dur=1)

    def prog1(host):
        host.host_work("python", dur=5000)
        host.group("cpu").recv_object(src=0)

    tr = eng.simulate(prog0, prog1, groups=[GLOO])
    sync = eng.one(tr, "rank0/main", kind="sync_device")
    assert sync.after == (eng.one(tr, "rank0/compute", "k").id,)
    assert eng.timing(sync) == (0, 100)


def test_record_stream_on_one_host_thread_orders_a_free_on_another(eng):
    """The allocator keeps recorded streams per block, not per thread: thread A's record_stream(x,
    side) makes thread B's later free(x) wait for side's work (SEMANTICS.md: caching allocator)."""
    import streamsim as ss
    shared = {}

    def producer(host):
        side = host.stream("side")
        shared["x"] = buf = host.buffer("x", KB)
        host.launch("use", stream=side, reads=[buf], dur=1000)
        host.record_stream(buf, side)

    def freer(host):
        host.host_work("later", dur=50)
        host.free(shared["x"])

    sim = ss.Simulation()
    sim.spawn(0, producer)
    sim.spawn(0, freer, thread="freer")
    tr = sim.run()
    free = eng.one(tr, "rank0/compute", kind="free")
    assert free.after == (eng.one(tr, "rank0/side", "use").id,)
    assert eng.timing(free) == (1000, 1000)
