"""Same program twice, one sync apart: the racy version has the hazard, the synced one has none.

Each pair runs through the whole pipeline (modelling API -> engine -> analysis), so a change that
loses an ordering edge anywhere shows up here as a hazard in the synced version, and a change that
invents one shows up as a clean racy version.
"""
from __future__ import annotations

from streamsim import Simulation
from streamsim.analysis.checks import analyse
from streamsim.analysis.liveness import deadlock_from_stall

MB = 1 << 20


def run(build) -> tuple:
    sim = Simulation()
    build(sim)
    trace = sim.run()
    return trace, analyse(trace)


def kinds(findings) -> set[tuple[str, str]]:
    return {(h.kind, h.buffer) for h in findings.hazards}


def two_ranks(sim, prog0, prog1, **group):
    sim.group("pp", [0, 1], **group)
    sim.spawn(0, prog0)
    sim.spawn(1, prog1)


def busy_receiver(h):
    """Rank 1: busy for 1 ms, then receives 8 MiB (so a rendezvous send waits for it)."""
    y = h.buffer("y", 8 * MB)
    h.launch("busy", dur=1000)
    h.group("pp").irecv(y, src=0).wait()


def pair(build_racy, build_synced):
    racy, synced = run(build_racy)[1], run(build_synced)[1]
    assert synced.hazards == () and synced.deadlock is None, synced.hazards
    return racy


def test_isend_then_overwrite():
    """The vLLM regression in miniature: overwriting a tensor a pending isend reads (WAR); waiting
    the send's handle first orders the overwrite after the send."""
    def build(wait):
        def sender(h):
            x = h.buffer("x", 8 * MB)
            h.launch("produce", writes=[x], dur=100)
            work = h.group("pp").isend(x, dst=1)
            if wait:
                work.wait()
            h.launch("overwrite", writes=[x], dur=100)

        return lambda sim: two_ranks(sim, sender, busy_receiver)
    racy = pair(build(False), build(True))
    assert kinds(racy) == {("WAR", "x")}
    assert racy.hazards[0].manifest  # the rendezvous send was still waiting for the receiver


def test_irecv_then_read_before_wait():
    """Reading the receive buffer before waiting the irecv is a RAW; `work.wait()` on the current
    stream orders the read after the receive."""
    def build(wait):
        def sender(h):
            x = h.buffer("x", 1024)
            h.launch("produce", writes=[x], dur=500)
            h.group("pp").isend(x, dst=1)

        def receiver(h):
            y = h.buffer("y", 1024)
            work = h.group("pp").irecv(y, src=0)
            if wait:
                work.wait()
            h.launch("consume", reads=[y], dur=100)
        return lambda sim: two_ranks(sim, sender, receiver)
    racy = pair(build(False), build(True))
    assert kinds(racy) == {("RAW", "y")}


def test_free_while_a_send_is_pending():
    """Freeing a tensor while an isend still reads it hands the block to the allocator too early
    (use-after-free); waiting the handle before the free orders it."""
    def build(wait):
        def sender(h):
            x = h.buffer("x", 8 * MB)
            h.launch("produce", writes=[x], dur=100)
            work = h.group("pp").isend(x, dst=1)
            if wait:
                work.wait()
            h.free(x)

        return lambda sim: two_ranks(sim, sender, busy_receiver)
    racy = pair(build(False), build(True))
    assert kinds(racy) == {("use-after-free", "x")}


def test_host_writes_a_pinned_buffer_an_async_copy_still_reads():
    """The host refilling a pinned staging buffer while an H2D copy on a stream still reads it
    (WAR); synchronizing an event recorded after the copy orders the refill."""
    def build(sync):
        def prog(h):
            pinned, dev = h.buffer("pinned", MB), h.buffer("dev", MB)
            h.host_work("fill batch 0", writes=[pinned], dur=50)
            with h.use_stream(h.stream("copy")):
                h.copy(dev, pinned, dur=300, name="h2d")
                ev = h.event("copied")
                ev.record()
            if sync:
                ev.synchronize()
            h.host_work("fill batch 1", writes=[pinned], dur=50)
        return lambda sim: sim.spawn(0, prog)
    racy = pair(build(False), build(True))
    assert kinds(racy) == {("WAR", "pinned")}
    assert racy.hazards[0].manifest


def test_pinned_refill_every_step_reports_each_copy_with_the_next_fill():
    """Three steps, each filling a pinned buffer on the host and copying it to the device on a side
    stream: the race a reader meets first, (copy 0, fill 1), is reported, and so is (copy 1, fill 2),
    as one root cause. Its fix (an event after the copy, synchronized before the fill), applied once
    at every instance, leaves nothing; so does the hand-written fix."""
    def build(sync):
        def prog(h):
            pinned, dev = h.buffer("pinned", MB), h.buffer("dev", MB)
            copy = h.stream("copy")
            ev = None
            for step in range(3):
                h.step = step
                if sync and ev is not None:
                    ev.synchronize()
                h.host_work("fill", writes=[pinned], dur=50)
                with h.use_stream(copy):
                    h.copy(dev, pinned, dur=300, name="h2d")
                    ev = h.event(f"copied{step}")
                    ev.record()
        return lambda sim: sim.spawn(0, prog)
    racy_trace, racy = run(build(False))
    assert run(build(True))[1].hazards == ()
    steps = [(racy_trace.op(h.first).step, racy_trace.op(h.second).step) for h in racy.hazards]
    assert steps == [(0, 1), (1, 2)]
    assert {(racy_trace.op(h.first).name, racy_trace.op(h.second).name) for h in racy.hazards} \
        == {("h2d", "fill")}
    (rc,) = racy.root_causes
    assert (rc.kind, rc.buffer, rc.first.label, rc.second.label) == ("WAR", "pinned", "h2d", "fill")
    assert rc.instances == (0, 1) and rc.fix_kind == "event_sync"
    sim = Simulation()
    build(False)(sim)
    sim.inject_fixes([h.fix for h in racy.hazards], racy_trace)  # as run/check do
    assert analyse(sim.run()).hazards == ()


def test_ring_of_two_slots_with_three_steps_in_flight():
    """A ring of 2 send slots reused every 2 steps while 3 sends are in flight: the copy into slot
    t % 2 races with the send of step t - 2 unless that send's handle is waited before the copy."""
    def build(wait):
        def sender(h):
            out = h.buffer("out", MB)
            slots = [h.buffer(f"slot{i}", MB) for i in range(2)]
            pending = [None, None]
            for t in range(3):
                h.step = t
                h.launch("forward", writes=[out], dur=100)
                k = t % 2
                if wait and pending[k] is not None:
                    pending[k].wait()
                h.copy(slots[k], out, dur=10)
                pending[k] = h.group("pp").isend(slots[k], dst=1)

        def receiver(h):
            y = h.buffer("y", MB)
            h.launch("busy", dur=2000)
            for t in range(3):
                h.group("pp").irecv(y, src=0).wait()
        return lambda sim: two_ranks(sim, sender, receiver, eager_bytes=1024)
    racy = pair(build(False), build(True))
    assert kinds(racy) == {("WAR", "slot0")}


def test_collective_in_place_then_read_on_another_stream():
    """An in-place all_reduce, then a kernel on a side stream reads the tensor (RAW): waiting the
    collective's handle on the side stream orders the read."""
    def build(wait):
        def prog(h):
            grad = h.buffer("grad", MB)
            h.launch("backward", writes=[grad], dur=100)
            work = h.group("dp").all_reduce(grad)
            side = h.stream("side")
            with h.use_stream(side):
                if wait:
                    work.wait()
                h.launch("optimizer", reads=[grad], dur=100)

        def build_sim(sim):
            sim.group("dp", [0, 1])
            sim.spawn(0, prog)
            sim.spawn(1, prog)
        return build_sim
    racy = pair(build(False), build(True))
    assert kinds(racy) == {("RAW", "grad")}
    assert {h.rank for h in racy.hazards} == {0, 1}


def test_blocking_rendezvous_sends_to_each_other_deadlock_with_the_cycle_reported():
    """Two ranks each in a blocking rendezvous send_object to the other: a deadlock whose wait-for
    cycle runs through both hosts; the same exchange below the eager threshold completes."""
    def build(nbytes):
        def prog(h):
            peer = 1 - h.rank
            h.group("cpu").send_object(nbytes, dst=peer)
            h.group("cpu").recv_object(src=peer)
        def build_sim(sim):
            sim.group("cpu", [0, 1], backend="gloo", eager_bytes=1024)
            sim.spawn(0, prog)
            sim.spawn(1, prog)
        return build_sim
    trace, findings = run(build(4096))
    d = findings.deadlock
    assert d is not None and {str(a) for a in d.cycle} == {"rank0/main", "rank1/main"}
    assert all("send_object" in b.reason for b in d.blocked)
    trace, findings = run(build(16))
    assert findings.deadlock is None and trace.stall is None


def test_recv_with_no_sender_reports_the_blocked_agent():
    """A receive nobody sends to: the stall names the blocked host and what it waits for; no cycle."""
    def build_sim(sim):
        sim.group("cpu", [0, 1], backend="gloo")
        sim.spawn(0, lambda h: h.group("cpu").recv_object(src=1))
        sim.spawn(1, lambda h: h.sleep(10))
    trace, findings = run(build_sim)
    d = deadlock_from_stall(trace)
    assert d is not None and d.cycle is None
    assert [str(b.agent) for b in d.blocked] == ["rank0/main"]
    assert "recv_object from rank1" in d.blocked[0].reason
