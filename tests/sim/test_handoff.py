"""Hand-offs between host threads of one rank (``host.put`` / ``host.get``, issue 25): the k-th
get of a channel blocks until its k-th put and is ordered after it, so a race between two
threads' host work has a fix (a put after the first, a get before the second) that the re-run
closes."""
from __future__ import annotations

import textwrap

from streamsim import Simulation, analyse, run_model
from streamsim.trace import HOST


def two_threads(handoff: bool, work: float = 5.0):
    sim = Simulation()
    shared = []

    def loader(host):
        b = host.buffer("batch", 64)
        shared.append(b)
        host.host_work("fill", writes=[b], dur=work)
        if handoff:
            host.put("batches")

    def main(host):
        host.host_work("setup", dur=1.0)
        if handoff:
            host.get("batches")
        host.host_work("consume", reads=[shared[0]], dur=2.0)

    sim.spawn(0, loader, thread="loader")
    sim.spawn(0, main)
    return sim.run()


def test_a_get_blocks_until_its_put_and_orders_the_threads():
    """The main thread reaches its get at 1 us and waits for the loader's put at 5 us; the fill is
    then ordered before the consume: no hazard. Without the hand-off the two race (a RAW)."""
    t = two_threads(True)
    (get,) = [op for op in t.ops if op.kind == "get"]
    (put,) = [op for op in t.ops if op.kind == "put"]
    consume = next(op for op in t.ops if op.name == "consume")
    assert get.after == (put.id,) and (get.start, get.end) == (1.0, 5.0)
    assert consume.start == 5.0
    assert analyse(t).hazards == ()
    (h,) = analyse(two_threads(False)).hazards
    assert (h.kind, h.fix.kind) == ("RAW", "handoff")


def test_the_kth_get_takes_the_kth_put():
    """Three puts, three gets on one channel: each get is ordered after the put of its rank in
    the channel, not after a later one."""
    sim = Simulation()

    def producer(host):
        for i in range(3):
            host.host_work(f"make{i}", dur=10.0)
            host.put("q")

    def consumer(host):
        for i in range(3):
            host.get("q")
            host.host_work(f"use{i}", dur=1.0)

    sim.spawn(0, producer, thread="producer")
    sim.spawn(0, consumer)
    t = sim.run()
    puts = [op for op in t.ops if op.kind == "put"]
    gets = [op for op in t.ops if op.kind == "get"]
    assert [g.after for g in gets] == [(p.id,) for p in puts]
    assert [g.end for g in gets] == [10.0, 20.0, 30.0]


def test_a_get_without_its_put_is_a_deadlock():
    sim = Simulation()
    sim.spawn(0, lambda host: host.get("never"))
    sim.spawn(0, lambda host: host.host_work("w"), thread="other")
    t = sim.run()
    f = analyse(t)
    assert t.stall is not None and f.deadlock is not None
    (b,) = [b for b in t.stall.blocked if b.agent.kind == HOST]
    assert "waits for put #1 of its channel" in b.reason


MODEL = '''
def build(sim, p, variant):
    shared = []
    def loader(host):
        b = host.buffer("batch", 64)
        shared.append(b)
        for t in range(3):
            host.step = t
            host.host_work("fill", writes=[b], dur=50)
            host.sleep(5)
    def main(host):
        for t in range(3):
            host.step = t
            host.sleep(20)
            host.host_work("consume", reads=[shared[0]], dur=10)
    sim.spawn(0, loader, thread="loader")
    sim.spawn(0, main)
'''


def test_a_models_cross_thread_race_gets_a_handoff_that_closes_it(tmp_path):
    """A loader thread refilling a buffer the main thread reads, with no hand-off: every instance
    is one root cause whose fix is a hand-off; the fixes, injected into a re-run, leave no hazard
    (before issue 25: no fix, and 'fixes close in one pass' did not hold for threads)."""
    path = tmp_path / "loader.py"
    path.write_text(textwrap.dedent(MODEL))
    r = run_model(str(path))
    assert r.findings.hazards and all(h.fix is not None and h.fix.kind == "handoff"
                                      for h in r.findings.hazards)
    assert r.fix_cost is not None
    assert (r.fix_cost.hazards_after, r.fix_cost.deadlock_after) == (0, False)
