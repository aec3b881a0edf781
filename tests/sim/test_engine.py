"""Simulated-timeline tests of streams, host enqueue, events and host syncs (docs/SEMANTICS.md).

Each test runs a tiny program and asserts on the trace: op start/end times and the sync edges the
engine records (``issuer`` for enqueue, ``after`` for events/syncs). Comm ops are covered in
test_engine_comm.py, jitter in test_engine_jitter.py, stalls and bounds in test_engine_stalls.py.
"""
from __future__ import annotations

import pytest

from streamsim import happens_before


# -- FIFO streams and the enqueue edge -------------------------------------------------------------


def test_stream_is_fifo_and_ops_start_no_earlier_than_enqueue_or_previous_end(eng):
    """A stream runs its ops one at a time in enqueue order: an op starts at max(its enqueue time,
    the previous op's end) — never earlier, and (with nothing else ordering it) not later."""
    def prog(host):
        host.launch("a", dur=100)
        host.host_work("python", dur=500)
        host.launch("b", dur=10)  # enqueued at 500, after a ended: starts at its enqueue
        host.launch("c", dur=10)  # enqueued at 500, b still running: starts at b's end
        host.launch("d", dur=0)   # zero-length ops still take their FIFO turn

    tr = eng.simulate(prog)
    a, b, c, d = (eng.one(tr, "rank0/compute", n) for n in "abcd")
    assert eng.timing(a) == (0, 100)
    assert eng.timing(b) == (500, 510)
    assert eng.timing(c) == (510, 520)
    assert eng.timing(d) == (520, 520)
    assert [op.name for op in eng.find(tr, "rank0/compute")] == ["a", "b", "c", "d"]
    assert [op.index for op in (a, b, c, d)] == [0, 1, 2, 3]
    for op in (a, b, c, d):  # the enqueue edge: each stream op names the host action issuing it
        host_op = eng.issued(tr, op)
        assert host_op.kind == "launch" and host_op.name == op.name
        assert host_op.end <= op.start and op.enqueued == host_op.end
        assert op.after == ()
    assert tr.stall is None and tr.notes == ()


def test_host_runs_ahead_of_its_streams(eng):
    """Launches do not block the host: with no launch overhead every launch is issued at time 0
    while the kernels run one after another on the stream."""
    def prog(host):
        for i in range(3):
            host.launch(f"k{i}", dur=100)
        host.log.append(host.now)

    tr = eng.simulate(prog)
    hosts = eng.find(tr, "rank0/main", kind="launch")
    assert [eng.timing(op) for op in hosts] == [(0, 0)] * 3
    assert [eng.timing(op) for op in eng.find(tr, "rank0/compute")] == [(0, 100), (100, 200), (200, 300)]


def test_launch_overhead_delays_the_host_and_every_later_enqueue(eng):
    """Simulation(launch_overhead=o): each enqueue is a host action of length o, and the op is
    enqueued (and may start) only when that action ends; host_work delays later enqueues."""
    def prog(host):
        host.launch("a", dur=100)         # host 0-5, a enqueued at 5: runs 5-105
        host.launch("b", dur=10)          # host 5-10, waits for a: runs 105-115
        host.host_work("python", dur=200)  # host 10-210
        host.launch("c", dur=10)          # host 210-215, c runs 215-225
        host.log.append(host.now)

    from streamsim import Simulation
    sim = Simulation(launch_overhead=5.0)
    logs = []

    def wrapped(host):
        prog(host)
        logs.extend(host.log)

    sim.spawn(0, wrapped)
    tr = sim.run()
    issues = eng.find(tr, "rank0/main", kind="launch")
    assert [eng.timing(op) for op in issues] == [(0, 5), (5, 10), (210, 215)]
    assert eng.timing(eng.one(tr, "rank0/main", kind="host")) == (10, 210)
    a, b, c = (eng.one(tr, "rank0/compute", n) for n in "abc")
    assert (a.enqueued, b.enqueued, c.enqueued) == (5, 10, 215)
    assert eng.timing(a) == (5, 105) and eng.timing(b) == (105, 115) and eng.timing(c) == (215, 225)
    assert [eng.issued(tr, op).id for op in (a, b, c)] == [op.id for op in issues]
    assert logs == [215]


def test_host_work_is_a_host_op_with_its_accesses(eng):
    """host_work occupies the host thread for its duration and records its reads/writes as a host
    op in program order."""
    def prog(host):
        pinned = host.buffer("pinned", 64)
        host.host_work("fill", writes=[pinned], dur=7)
        host.host_work("read", reads=[pinned[0:8]], dur=3)

    tr = eng.simulate(prog)
    fill, read = eng.find(tr, "rank0/main", kind="host")
    assert eng.timing(fill) == (0, 7) and eng.timing(read) == (7, 10)
    assert fill.index < read.index
    assert [(a.mode, a.view.buffer, a.view.offset, a.view.nbytes) for a in fill.accesses] == \
        [("write", "pinned", 0, 64)]
    assert [(a.mode, a.view.offset, a.view.nbytes) for a in read.accesses] == [("read", 0, 8)]


def test_op_records_location_and_step(eng):
    """Every op names the model line that issued it and the host's current step label."""
    def prog(host):
        host.step = 3
        host.launch("k", dur=1)

    tr = eng.simulate(prog)
    k = eng.one(tr, "rank0/compute", "k")
    assert k.step == 3
    assert k.location.endswith(f"test_engine.py:{prog.__code__.co_firstlineno + 2}")
    assert eng.issued(tr, k).location == k.location


# -- events --------------------------------------------------------------------------------------


def test_wait_event_gates_the_second_stream_on_the_captured_work_only(eng):
    """record(E) on S captures S's work so far; wait_event(E) on T makes later ops of T start after
    the captured work (and its `after` names the record op) but not after S's later work."""
    def prog(host):
        side = host.stream("side")
        host.launch("k1", dur=100)
        ev = host.event("e")
        ev.record()                   # captures k1
        host.launch("k2", dur=1000)   # not captured
        side.wait_event(ev)
        host.launch("x", stream=side, dur=10)

    tr = eng.simulate(prog)
    k1, rec, k2 = eng.find(tr, "rank0/compute")
    assert rec.kind == "record" and rec.attrs["event"] == "e"
    assert eng.timing(rec) == (100, 100)
    wait = eng.one(tr, "rank0/side", kind="wait_event")
    x = eng.one(tr, "rank0/side", "x")
    assert wait.after == (rec.id,)
    assert eng.timing(wait) == (100, 100)
    assert eng.timing(x) == (100, 110)
    assert x.start < k2.end  # k2 was not captured, so it does not gate x
    assert tr.notes == ()


def test_event_wait_method_gates_the_given_or_current_stream(eng):
    """Event.wait(stream) is stream.wait_event(event); with no stream it gates the current stream."""
    def prog(host):
        side = host.stream("side")
        ev = host.event("e")
        host.launch("k", stream=side, dur=50)
        ev.record(side)
        ev.wait()                     # current stream: compute
        host.launch("after_wait", dur=1)

    tr = eng.simulate(prog)
    rec = eng.one(tr, "rank0/side", kind="record")
    wait = eng.one(tr, "rank0/compute", kind="wait_event")
    assert wait.after == (rec.id,)
    assert eng.timing(eng.one(tr, "rank0/compute", "after_wait")) == (50, 51)


def test_re_record_replaces_the_capture(eng):
    """Re-recording an event replaces its capture (CUDA semantics): a later wait_event orders the
    waiting stream after the work the newest record captured, and starts it when that work ends."""
    def prog(host):
        side = host.stream("side")
        ev = host.event("e")
        host.launch("k1", dur=100)
        ev.record()                   # record #1 at 100
        host.launch("k2", dur=1000)
        ev.record()                   # record #2 at 1100: replaces #1
        side.wait_event(ev)
        host.launch("x", stream=side, dur=10)

    tr = eng.simulate(prog)
    hb = happens_before(tr)
    k2, x = eng.one(tr, "rank0/compute", "k2"), eng.one(tr, "rank0/side", "x")
    assert hb.ordered(k2.id, x.id)
    assert eng.timing(x) == (1100, 1110)


def test_re_record_on_another_stream_does_not_merge_captures(eng):
    """Re-recording on a different stream replaces, not merges: the waiter is no longer ordered
    after the first stream's work, nor delayed by it."""
    def prog(host):
        side, third = host.stream("side"), host.stream("third")
        ev = host.event("e")
        host.launch("long", dur=1000)
        ev.record()                   # captures compute's long kernel
        ev.record(side)               # replaces the capture with (empty) side
        third.wait_event(ev)
        host.launch("x", stream=third, dur=10)

    tr = eng.simulate(prog)
    hb = happens_before(tr)
    long, x = eng.one(tr, "rank0/compute", "long"), eng.one(tr, "rank0/third", "x")
    assert not hb.ordered(long.id, x.id)
    assert eng.timing(x) == (0, 10)


def test_wait_stream_orders_this_streams_later_ops_after_the_others_work(eng):
    """stream.wait_stream(other): later ops of this stream happen after other's work so far (and
    start after it ends), whatever ops the engine builds the wait from; other's later work is not
    ordered before them."""
    def prog(host):
        side = host.stream("side")
        host.launch("k", stream=side, dur=70)
        host.current_stream().wait_stream(side)
        host.launch("late", stream=side, dur=5)
        host.launch("x", dur=1)

    tr = eng.simulate(prog)
    hb = happens_before(tr)
    k, late = eng.one(tr, "rank0/side", "k"), eng.one(tr, "rank0/side", "late")
    x = eng.one(tr, "rank0/compute", "x")
    assert hb.ordered(k.id, x.id) and not hb.ordered(late.id, x.id)
    assert eng.timing(x) == (70, 71)


def test_waiting_an_event_never_recorded_is_a_noop_with_a_note(eng):
    """wait_event on an event never recorded orders nothing (no `after`, the stream does not stop)
    and is reported as Note('event-never-recorded') naming the wait op."""
    def prog(host):
        side = host.stream("side")
        host.launch("k", dur=500)
        side.wait_event(host.event("never"))
        host.launch("x", stream=side, dur=10)

    tr = eng.simulate(prog)
    wait = eng.one(tr, "rank0/side", kind="wait_event")
    assert wait.after == ()
    assert eng.timing(eng.one(tr, "rank0/side", "x")) == (0, 10)
    assert [n.kind for n in tr.notes] == ["event-never-recorded"]
    assert tr.notes[0].op == wait.id and "never" in tr.notes[0].message
    assert tr.stall is None


def test_synchronizing_an_event_never_recorded_returns_at_once_with_a_note(eng):
    """event.synchronize() on an event never recorded does not block the host (and is noted)."""
    def prog(host):
        host.launch("k", dur=500)
        host.event("never").synchronize()
        host.host_work("next", dur=1)

    tr = eng.simulate(prog)
    sync = eng.one(tr, "rank0/main", kind="sync_event")
    assert eng.timing(sync) == (0, 0) and sync.after == ()
    assert eng.timing(eng.one(tr, "rank0/main", "next")) == (0, 1)
    assert [n.kind for n in tr.notes] == ["event-never-recorded"]
    assert tr.notes[0].op == sync.id


# -- host syncs ------------------------------------------------------------------------------------


def test_event_synchronize_blocks_the_host_until_the_captured_work_and_not_longer(eng):
    """event.synchronize() blocks the host until the record op (the captured work) ends — not until
    later work on that stream — and its `after` names the record op."""
    def prog(host):
        host.launch("k1", dur=100)
        ev = host.event("e")
        ev.record()
        host.launch("k2", dur=1000)
        ev.synchronize()
        host.host_work("next", dur=1)

    tr = eng.simulate(prog)
    rec = eng.one(tr, "rank0/compute", kind="record")
    sync = eng.one(tr, "rank0/main", kind="sync_event")
    assert sync.after == (rec.id,)
    assert eng.timing(sync) == (0, 100)
    assert eng.timing(eng.one(tr, "rank0/main", "next")) == (100, 101)


def test_stream_synchronize_waits_for_that_stream_only(eng):
    """stream.synchronize() blocks the host until that stream's last enqueued op ends, not other
    streams' work; `after` names that last op; the next enqueue happens at the sync's end."""
    def prog(host):
        side = host.stream("side")
        host.launch("c", dur=300)
        host.launch("s", stream=side, dur=1000)
        host.current_stream().synchronize()
        host.launch("next", dur=1)

    tr = eng.simulate(prog)
    c = eng.one(tr, "rank0/compute", "c")
    sync = eng.one(tr, "rank0/main", kind="sync_stream")
    assert sync.after == (c.id,)
    assert eng.timing(sync) == (0, 300)
    nxt = eng.one(tr, "rank0/compute", "next")
    assert eng.issued(tr, nxt).start == 300 and eng.timing(nxt) == (300, 301)


def test_stream_synchronize_of_an_idle_stream_and_of_a_host_already_past_it(eng):
    """Syncing an empty stream returns at once; syncing when the host's clock is already past the
    work's end does not move the host back or forward (the sync takes no time)."""
    def prog(host):
        host.stream("idle").synchronize()
        host.launch("k", dur=300)
        host.host_work("python", dur=2000)
        host.current_stream().synchronize()
        host.host_work("next", dur=1)

    tr = eng.simulate(prog)
    s_idle, s_compute = eng.find(tr, "rank0/main", kind="sync_stream")
    assert eng.timing(s_idle) == (0, 0) and s_idle.after == ()
    assert eng.timing(s_compute) == (2000, 2000)
    assert s_compute.after == (eng.one(tr, "rank0/compute", "k").id,)
    assert eng.timing(eng.one(tr, "rank0/main", "next")) == (2000, 2001)


def test_device_synchronize_waits_for_every_stream_of_the_rank_only(eng):
    """host.synchronize() (cuda.synchronize) blocks until every stream of this rank — compute,
    side and NCCL comm streams — has drained; it does not wait for another rank's streams."""
    def prog0(host):
        side = host.stream("side")
        host.launch("c", dur=300)
        host.launch("s", stream=side, dur=1000)
        host.group("g").all_reduce(host.buffer("x", 8), dur=50)  # nccl:g after c: 300-350?
        host.synchronize()
        host.host_work("next", dur=1)

    def prog1(host):
        host.launch("long", dur=5000)
        host.group("g").all_reduce(host.buffer("x", 8), dur=50)

    tr = eng.simulate(prog0, prog1, groups=[("g", [0, 1], {})])
    sync = eng.one(tr, "rank0/main", kind="sync_device")
    lasts = {str(tr.op(i).agent): tr.op(i).name for i in sync.after}
    assert lasts == {"rank0/compute": "c", "rank0/side": "s", "rank0/nccl:g": "all_reduce(x)"}
    # the all_reduce waits for rank1 (joins at 5000): that is rank0's nccl stream's own work
    ar0 = eng.one(tr, "rank0/nccl:g", kind="all_reduce")
    assert eng.timing(ar0) == (300, 5050)
    assert eng.timing(sync) == (0, 5050)
    assert eng.timing(eng.one(tr, "rank0/main", "next")) == (5050, 5051)


def test_device_synchronize_does_not_wait_for_other_ranks(eng):
    """host.synchronize() on rank 0 ignores rank 1's streams."""
    def prog0(host):
        host.launch("c", dur=300)
        host.synchronize()

    def prog1(host):
        host.launch("long", dur=5000)

    tr = eng.simulate(prog0, prog1)
    sync = eng.one(tr, "rank0/main", kind="sync_device")
    assert eng.timing(sync) == (0, 300)
    assert sync.after == (eng.one(tr, "rank0/compute", "c").id,)


def test_event_query_orders_only_when_true(eng):
    """event.query() at a time the captured work is done returns True and orders it before the host
    (`after`); before that it returns False and orders nothing."""
    def prog(host):
        host.launch("k", dur=100)
        ev = host.event("e")
        ev.record()
        host.log.append(ev.query())      # at 0: False
        host.host_work("python", dur=200)
        host.log.append(ev.query())      # at 200: True
        results.extend(host.log)

    results = []
    tr = eng.simulate(prog)
    q0, q1 = eng.find(tr, "rank0/main", kind="query")
    rec = eng.one(tr, "rank0/compute", kind="record")
    assert results == [False, True]
    assert (q0.attrs["result"], q0.after, q0.start) == (False, (), 0)
    assert (q1.attrs["result"], q1.after, q1.start) == (True, (rec.id,), 200)


@pytest.mark.parametrize("threads", [("a", "b"), ("b", "a")])
def test_host_threads_of_one_rank_share_streams_in_simulated_time(eng, threads):
    """Two host threads of one rank enqueue on the shared compute stream in simulated-time order,
    whatever order they were spawned in: a thread that ran ahead does not jump the queue."""
    from streamsim import Simulation

    def late(host):
        host.host_work("python", dur=5000)
        host.launch("late", dur=10)

    def early(host):
        host.host_work("python", dur=100)
        host.launch("early", dur=10)

    sim = Simulation()
    progs = {"a": late, "b": early}
    for t in threads:
        sim.spawn(0, progs[t], thread=t)
    tr = sim.run()
    assert [op.name for op in eng.find(tr, "rank0/compute")] == ["early", "late"]
    assert eng.timing(eng.one(tr, "rank0/compute", "early")) == (100, 110)
    assert eng.timing(eng.one(tr, "rank0/compute", "late")) == (5000, 5010)


@pytest.mark.parametrize("spawn_recorder_first", [True, False])
def test_event_shared_between_host_threads_is_observed_in_simulated_time(eng, spawn_recorder_first):
    """A thread waiting an event at t=100 sees the event as it is at t=100: a record another thread
    issues at t=5000 is not captured by the earlier wait (no false ordering edge)."""
    from streamsim import Simulation
    shared = {}

    def recorder(host):
        ev = shared.setdefault("ev", host.event("e"))
        host.host_work("python", dur=5000)
        host.launch("k", dur=10)
        ev.record()

    def waiter(host):
        ev = shared.setdefault("ev", host.event("e"))
        host.host_work("python", dur=100)
        host.stream("side").wait_event(ev)
        host.launch("x", stream="side", dur=1)

    sim = Simulation()
    order = [("r", recorder), ("w", waiter)]
    for name, prog in (order if spawn_recorder_first else order[::-1]):
        sim.spawn(0, prog, thread=name)
    tr = sim.run()
    wait = eng.one(tr, "rank0/side", kind="wait_event")
    assert wait.after == ()
    assert eng.timing(eng.one(tr, "rank0/side", "x")) == (100, 101)
    assert [n.kind for n in tr.notes] == ["event-never-recorded"]


def _helper_launch(host, name):
    host.launch(name, dur=1)  # the location of ops issued through this helper


def test_location_is_the_innermost_model_line_whatever_the_api_path(eng):
    """Each op's location is the innermost model line that issued it — through a model helper,
    through API methods calling each other (copy -> launch, Stream.record_event -> Event.record),
    and alternating between such paths (the engine caches the depth of that line per op kind)."""
    import inspect
    first = inspect.getsourcelines(_helper_launch)[1] + 1

    def prog(host):
        x, y = host.buffer("x", 8), host.buffer("y", 8)
        for _ in range(2):
            host.launch("direct", dur=1)
            _helper_launch(host, "helper")
            host.copy(y, x)
            host.current_stream().record_event(host.event("e"))
            host.event("e").record()
            for fn in (host.launch, lambda name, dur: _helper_launch(host, name)):
                fn("same line", dur=1)

    tr = eng.simulate(prog)
    base = prog.__code__.co_firstlineno
    where = [(op.name, int(op.location.rsplit(":", 1)[1])) for op in tr.ops
             if op.agent.kind == "host"]
    expected = [("direct", base + 3), ("helper", first), ("copy_", base + 5),
                ("record(e)", base + 6), ("record(e)", base + 7),
                ("same line", base + 9), ("same line", first)]
    assert where == expected * 2
    assert all(op.location.rsplit(":", 1)[0].endswith("test_engine.py") for op in tr.ops)


def test_frozen_ops_equal_ops_built_field_by_field(eng):
    """The engine builds trace ops without the dataclass constructor (for speed): each must still be
    an Op equal to Op(**its fields), hashable like one, and frozen."""
    import dataclasses

    from streamsim.trace import Op

    def prog(host):
        host.launch("k", reads=[host.buffer("x", 8)], dur=3)
        host.current_stream().synchronize()

    tr = eng.simulate(prog)
    for op in tr.ops:
        assert type(op) is Op
        rebuilt = Op(**{f.name: getattr(op, f.name) for f in dataclasses.fields(Op)})
        assert rebuilt == op and repr(rebuilt) == repr(op)
        with pytest.raises(dataclasses.FrozenInstanceError):
            op.start = 1.0


def test_sequence_numbers_are_a_dense_linear_extension_of_the_recorded_edges(eng):
    """start_seq/end_seq number the 2n op boundaries 0..2n-1 (no holes, even when blocking host
    syncs move their start past what they waited for), and respect every recorded edge: program
    order, issuer end -> op start, `after` end -> op start, `joins` start -> op end."""
    def prog(host):
        g = host.group("g")
        side = host.stream("side")
        x = host.buffer("x", 1 << 20)
        for step in range(3):
            host.launch("fwd", writes=[x], dur=100 + host.rank)
            ev = host.event("e")
            ev.record()
            side.wait_event(ev)
            host.launch("aux", stream=side, reads=[x], dur=30)
            if host.rank == 0:
                w = g.isend(x, dst=1)
                w.wait()
                ev.synchronize()
            else:
                g.irecv(x, src=0).wait(blocking=True)
                host.current_stream().synchronize()
            g.all_reduce(x, dur=5)
            host.synchronize()

    tr = eng.simulate(prog, prog, groups=[("g", [0, 1], {})])
    assert sorted(s for op in tr.ops for s in (op.start_seq, op.end_seq)) == \
        list(range(2 * len(tr.ops)))
    last: dict = {}
    for op in sorted(tr.ops, key=lambda o: (o.agent, o.index)):
        assert op.start_seq < op.end_seq
        if op.agent in last:
            assert last[op.agent].end_seq < op.start_seq
        last[op.agent] = op
        if op.issuer is not None:
            assert tr.op(op.issuer).end_seq < op.start_seq
        for a in op.after:
            assert tr.op(a).end_seq < op.start_seq, (tr.op(a).describe(), op.describe())
        for j in op.joins:
            assert tr.op(j).start_seq < op.end_seq
