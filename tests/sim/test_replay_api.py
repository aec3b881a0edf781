"""The calls of the modelling API that a program replaying a file uses (docs/models.md, "Programs
that replay a file"): each is tested here as a model would call it, not only through the op-log
replay, so that a change to one fails by its own name."""
from __future__ import annotations

from streamsim import Simulation
from streamsim.sim.api import Origin, P2POp


def _run(*programs, groups=(), replay=False):
    sim = Simulation(replay=replay)
    for name, ranks in groups:
        sim.group(name, ranks)
    for rank, thread, prog in programs:
        sim.spawn(rank, prog, thread=thread)
    return sim.run()


def test_origin_labels_the_ops_that_follow_and_a_batch_op_its_own():
    """host.origin = Origin(...) gives the ops that follow its line, name and location, its attrs
    to every op and its host_attrs to the host action only; on_start runs as the host action is
    made; P2POp.origin labels one op of a batch, and the host's origin is back after it; a
    buffer allocated under an origin has its location as its site."""
    started = []

    def prog(host):
        host.origin = Origin(7, "k7", "log.jsonl:7", {"site": "a.py:1"},
                             {"site": "a.py:1", "t": 5.0}, lambda: started.append(7))
        host.launch("kernel", writes=[host.buffer("x", 8)])
        host.origin = Origin(9, "batch", "log.jsonl:9", {}, {})
        x = host.buffer("y", 8)
        host.group("pp").batch_isend_irecv([
            P2POp("irecv", x, 1, origin=Origin(11, "r11", "log.jsonl:11", {}, {})),
            P2POp("isend", x, 1, origin=Origin(10, "s10", "log.jsonl:10", {}, {}))])
        host.host_work("after")

    def peer(host):
        y = host.buffer("y", 8)
        host.group("pp").batch_isend_irecv([P2POp("isend", y, 0), P2POp("irecv", y, 0)])

    tr = _run((0, "main", prog), (1, "main", peer), groups=[("pp", [0, 1])])
    ops = [op for op in tr.ops if op.agent.rank == 0]
    launch = [op for op in ops if op.line == 7]
    assert [(op.name, op.location, op.agent.kind) for op in launch] == \
        [("k7", "log.jsonl:7", "host"), ("k7", "log.jsonl:7", "stream")]
    assert launch[0].attrs.get("t") == 5.0 and "t" not in launch[1].attrs
    assert all(op.attrs["site"] == "a.py:1" for op in launch) and started == [7]
    assert sorted({(op.line, op.name) for op in ops if op.kind in ("isend", "irecv")}) == \
        [(10, "s10"), (11, "r11")]
    assert [(op.line, op.name) for op in ops if op.kind == "host"] == [(9, "batch")]
    assert all(op.line is None for op in tr.ops if op.agent.rank == 1)  # (no origin: a model's)
    # a buffer allocated under an origin is sited at its line; without one, at the model's line
    sites = {(a.rank, a.buffer): a.site for a in tr.allocations}
    assert sites[(0, "x")] == "log.jsonl:7" and sites[(0, "y")] == "log.jsonl:9"
    assert sites[(1, "y")].endswith(f"test_replay_api.py:{peer.__code__.co_firstlineno + 1}")


def test_group_collective_is_the_named_method():
    """g.collective(kind, inputs, outputs) makes the op its named method makes."""
    def named(host):
        x = host.buffer("x", 64)
        host.group("pp").all_reduce(x).wait()

    def by_kind(host):
        x = host.buffer("x", 64)
        host.group("pp").collective("all_reduce", [x], [x]).wait()

    def shape(tr):
        return [(op.kind, str(op.agent), op.start, op.end, [(a.view, a.mode) for a in op.accesses])
                for op in tr.ops]
    assert shape(_run((0, "main", named), (1, "main", named), groups=[("pp", [0, 1])])) == \
        shape(_run((0, "main", by_kind), (1, "main", by_kind), groups=[("pp", [0, 1])]))


def test_alloc_starts_a_new_life_and_idle_until_moves_the_clock_only():
    """host.alloc after a free makes the next use no use-after-free (one note without it), and
    is a host op of kind alloc naming the buffer; idle_until moves the clock on, never back, and
    makes no op."""
    def prog(host, alloc):
        x = host.buffer("x", 8)
        host.free(x)
        if alloc:
            host.alloc("x", 8, stream="compute", label="x")
        host.idle_until(100.0)
        host.idle_until(50.0)
        host.launch("use", writes=[x])

    for alloc, notes in ((False, ["use-after-free"]), (True, [])):
        tr = _run((0, "main", lambda h: prog(h, alloc)))
        assert [n.kind for n in tr.notes] == notes
        use = next(op for op in tr.ops if op.name == "use" and op.agent.kind == "host")
        assert use.start == 100.0
        allocs = [op for op in tr.ops if op.kind == "alloc"]
        assert [(op.attrs["buffer"], op.attrs["nbytes"], op.attrs["label"]) for op in allocs] == \
            ([("x", 8, "x")] if alloc else [])


def test_a_signal_holds_a_thread_until_set_and_one_never_set_is_a_deadlock_with_its_reason():
    """wait_signal blocks the thread in simulated time until another thread sets the signal; a
    signal nobody sets stalls the run, the blocked thread saying the reason and waits_for given."""
    box = {}

    def waiter(host):
        box["sig"] = sig = host.signal()
        host.wait_signal(sig, "waits for t2's go", [])
        host.host_work("after", dur=1.0)

    def setter(host):
        host.host_work("before", dur=30.0)
        host.settle()
        box["sig"].set()

    tr = _run((0, "t1", waiter), (0, "t2", setter))
    assert tr.stall is None
    assert next(op for op in tr.ops if op.name == "after").start == 30.0

    def lonely(host):
        host.wait_signal(host.signal(), "waits for a line never issued", [])
    tr = _run((0, "main", lonely))
    assert tr.stall is not None
    assert [b.reason for b in tr.stall.blocked] == ["waits for a line never issued"]
