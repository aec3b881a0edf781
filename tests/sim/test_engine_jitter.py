"""Seeded jitter: durations scaled by factors from a seeded RNG, repeatable per seed (SEMANTICS.md,
"Timing")."""
from __future__ import annotations

import math

import pytest

KB, MB = 1024, 1 << 20


def _pipeline(host):
    """Two ranks: kernels, events, a side stream, eager and rendezvous sends, host work."""
    g = host.group("g")
    side = host.stream("side")
    x = host.buffer("x", MB)
    for step in range(4):
        host.step = step
        host.launch("fwd", writes=[x], dur=100 + 10 * host.rank)
        ev = host.event("e")
        ev.record()
        side.wait_event(ev)
        host.launch("aux", stream=side, reads=[x], dur=30)
        peer = 1 - host.rank
        if host.rank == 0:
            g.isend(x, dst=peer).wait()
            g.isend(host.buffer("small", KB), dst=peer)
        else:
            g.irecv(x, src=peer).wait()
            g.irecv(host.buffer("small", KB), src=peer)
        host.host_work("python", dur=20)
    host.synchronize()


@pytest.fixture
def run_pipeline(eng):
    """Run the two-rank pipeline above with the given Simulation options."""
    return lambda **kw: eng.simulate(_pipeline, _pipeline, groups=[("g", [0, 1], {})], **kw)


def _as_tuples(tr):
    return [tuple(getattr(op, f) for f in op.__slots__) for op in tr.ops]


def test_same_seed_gives_identical_traces(run_pipeline):
    """Two runs with the same seed and jitter produce the same trace, op for op, field for field."""
    a, b = run_pipeline(seed=7, jitter=0.2), run_pipeline(seed=7, jitter=0.2)
    assert _as_tuples(a) == _as_tuples(b)
    assert a.ops == b.ops and a.notes == b.notes and a.end_time == b.end_time


def test_no_seed_is_exactly_repeatable(run_pipeline):
    """With no seed, runs (even with jitter) are exactly repeatable."""
    assert _as_tuples(run_pipeline(jitter=0.2)) == _as_tuples(run_pipeline(jitter=0.2))


def test_different_seeds_with_jitter_give_different_timings(run_pipeline):
    """With jitter > 0, different seeds change op timings (but not the ops and edges issued)."""
    a, b = run_pipeline(seed=1, jitter=0.2), run_pipeline(seed=2, jitter=0.2)
    assert [(op.start, op.end) for op in a.ops] != [(op.start, op.end) for op in b.ops]
    assert [(str(op.agent), op.kind, op.name) for op in a.ops] == \
        [(str(op.agent), op.kind, op.name) for op in b.ops]


def test_zero_jitter_ignores_the_seed(run_pipeline):
    """jitter=0 gives the unjittered timing whatever the seed."""
    base = _as_tuples(run_pipeline())
    assert _as_tuples(run_pipeline(seed=1, jitter=0.0)) == base
    assert _as_tuples(run_pipeline(seed=2, jitter=0.0)) == base


def test_jitter_factor_is_bounded(eng):
    """A duration d is scaled by a factor within [exp(-j), exp(j)], and zero durations stay zero."""
    j = 0.3

    def prog(host):
        for i in range(50):
            host.launch(f"k{i}", dur=100)
            host.launch(f"z{i}", dur=0)

    tr = eng.simulate(prog, seed=3, jitter=j)
    durs = [op.duration for op in tr.ops if op.agent.kind == "stream" and op.name.startswith("k")]
    assert all(100 * math.exp(-j) - 1e-9 <= d <= 100 * math.exp(j) + 1e-9 for d in durs)
    assert len(set(durs)) > 1
    assert all(op.duration == 0 for op in tr.ops if op.name.startswith("z"))


def test_jitter_applies_to_every_duration_including_blocking_gloo_sends(eng):
    """Jitter scales every op duration the model gives or implies: kernels, host work, NCCL
    transfers, gloo isend_object and the blocking gloo send_object's transfer alike."""
    def prog0(host):
        host.launch("k", dur=100)
        host.host_work("python", dur=100)
        host.group("g").isend(host.buffer("x", KB), dst=1)
        host.group("cpu").send_object(1000, dst=1)
        host.group("cpu").isend_object(1000, dst=1).wait()

    def prog1(host):
        host.group("g").irecv(host.buffer("y", KB), src=0)
        host.group("cpu").recv_object(src=0)
        host.group("cpu").recv_object(src=0)

    def durations(seed):
        tr = eng.simulate(prog0, prog1, groups=[("g", [0, 1], {}), ("cpu", [0, 1], {"backend": "gloo"})],
                      seed=seed, jitter=0.3)
        return {(str(op.agent), op.kind): round(op.duration, 6) for op in tr.ops
                if op.kind in ("launch", "host", "isend", "send_object", "isend_object")
                and (op.agent.kind == "stream" or op.kind in ("host", "send_object"))}

    a, b = durations(1), durations(2)
    assert set(a) == {("rank0/compute", "launch"), ("rank0/main", "host"),
                      ("rank0/nccl:g", "isend"), ("rank0/main", "send_object"),
                      ("rank0/gloo:cpu", "isend_object")}
    for key in a:
        assert a[key] != b[key], key
