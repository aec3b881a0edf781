"""Memory as a metric (issue 27, point 2): live bytes per rank over simulated time from allocations
and frees, checked against a quadratic reference on random programs; and where it shows: the
report, fix costs, compare, sweep, JSON."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from streamsim import Simulation, compare_variants, load_model, run_model
from streamsim.analysis.metrics import MiB, compute_metrics, format_bytes, memory_use
from streamsim.cli import main
from streamsim.explore.compare import render_compare
from streamsim.trace import STREAM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VLLM = os.path.join(ROOT, "models", "vllm_pp.py")

# A rank's program: allocate name n (of 3) with a size, free a live name, launch a kernel on a
# stream (delaying later frees queued on compute), or let the host sleep.
action = st.one_of(
    st.tuples(st.just("alloc"), st.integers(0, 2), st.integers(0, 4096)),
    st.tuples(st.just("free"), st.integers(0, 2)),
    st.tuples(st.just("launch"), st.sampled_from(["compute", "side"]), st.integers(0, 30)),
    st.tuples(st.just("sleep"), st.integers(0, 30)))


def simulate_programs(programs):
    sim = Simulation()

    def program(actions):
        def run(host):
            held = {}
            for a in actions:
                if a[0] == "alloc":
                    held[a[1]] = host.buffer(f"b{a[1]}", a[2])
                elif a[0] == "free" and a[1] in held:
                    host.free(held.pop(a[1]))
                elif a[0] == "launch":
                    host.launch("k", dur=a[2], stream=a[1])
                elif a[0] == "sleep":
                    host.sleep(a[1])
        return run
    for rank, actions in enumerate(programs):
        sim.spawn(rank, program(actions))
    return sim.run()


def reference_peaks(trace) -> dict[int, int]:
    """Each life from its allocation to the free issued after it (before the name's next
    allocation), or to just after that next allocation (both exist at its instant), or forever;
    the peak is the largest sum of the lives that hold at some allocation, comparing (time, issue
    position): quadratic on purpose."""
    allocs = [(a.rank, a.buffer, a.nbytes, (a.time, 2 * a.issued - 1, i))  # (i: two allocations
              for i, a in enumerate(trace.allocations)]  # with no op between, in their order)
    frees = [(op.agent.rank, op.attrs["buffer"],
              (max([trace.op(op.issuer).start] + [trace.op(a).end for a in op.after]),
               2 * op.issuer, 0)) for op in trace.ops
             if op.kind == "free" and op.agent.kind == STREAM]
    lives = []
    for i, (rank, buf, n, start) in enumerate(allocs):
        nxt = [s for (r, b, _, s) in allocs[i + 1:] if (r, b) == (rank, buf)]
        limit = (*nxt[0][:2], nxt[0][2] + 0.5) if nxt else (float("inf"), float("inf"), 0)
        ends = [e for (r, b, e) in frees if (r, b) == (rank, buf) and start[1] < e[1] < limit[1]]
        lives.append((rank, n, start, min(ends + [limit])))
    peaks: dict[int, int] = {}
    for rank, _, at, _ in lives:
        live = sum(n for r, n, s, e in lives if r == rank and s <= at < e)
        peaks[rank] = max(peaks.get(rank, 0), live)
    return dict(sorted(peaks.items()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(action, max_size=14), min_size=1, max_size=3))
def test_peak_live_bytes_match_the_quadratic_reference(programs):
    trace = simulate_programs(programs)
    mem = memory_use(trace)
    assert mem.peak == reference_peaks(trace)
    assert compute_metrics(trace).peak_bytes == mem.peak
    for rank, pts in mem.series.items():  # the series never goes below 0 and reaches its peak
        assert min(b for _, b in pts) >= 0 and max(b for _, b in pts) <= mem.peak[rank]
        assert [t for t, _ in pts] == sorted(t for t, _ in pts)


def test_a_free_issued_after_its_allocation_at_the_same_instant_ends_it():
    """Allocated and freed at t=0 on an idle stream: the free (a stream op at t=0) counts after
    the allocation it ends, not before it (which would leave the buffer live for ever)."""
    trace = simulate_programs([[("alloc", 0, 100), ("free", 0), ("alloc", 1, 50)]])
    mem = memory_use(trace)
    assert mem.peak == {0: 100} and mem.series[0][-1] == (0.0, 50) and mem.note == ""


def test_a_run_that_frees_nothing_says_its_peak_is_everything_allocated():
    mem = memory_use(simulate_programs([[("alloc", 0, 10)], [("alloc", 0, 20), ("free", 0)]]))
    assert mem.peak == {0: 10, 1: 20}
    assert mem.note == ("rank 0 frees nothing: every buffer stays live to the end, so the peak "
                        "is all that was allocated")
    assert memory_use(simulate_programs([[("sleep", 5)]])).note == (
        "no allocation recorded (no host.buffer, no alloc line): no memory figures")


def test_an_op_log_counts_its_alloc_lines_and_says_what_it_cannot(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    lines = [{"op": "alloc", "buffer": "a", "nbytes": 1 << 20},
             {"op": "launch", "name": "k", "writes": ["a", "b"], "dur": 10},
             {"op": "free", "buffer": "a"}, {"op": "free", "buffer": "b"}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["check", str(log)]) == 0
    out = capsys.readouterr().out
    assert ("memory: peak live bytes rank0 1.0 MiB; 1 free of buffers with no allocation (a "
            "buffer an op log uses before any alloc line) not counted") in out


def test_vllm_copy_before_send_pays_its_ring_in_memory():
    """The ring of 3 slots of the two 128 MiB outputs (768 MiB, on every rank): the last stage,
    which never sends, peaks 768 MiB higher; on the middle stages the ring takes the place of
    fresh outputs the regressed variant holds while their sends run (+128 MiB); compare shows it."""
    model = load_model(VLLM)
    rows = compare_variants(model, ["regressed_49274", "copy_before_send"])
    reg, ring = (r.report.metrics for r in rows)
    assert ring.peak_bytes[3] - reg.peak_bytes[3] == 768 * MiB
    assert ring.peak_bytes[1] - reg.peak_bytes[1] == ring.peak_bytes[2] - reg.peak_bytes[2] \
        == 128 * MiB
    table = render_compare(rows, model, baseline="regressed_49274")
    assert "peak memory" in table.splitlines()[1]
    d = ring.peak_max_bytes - reg.peak_max_bytes
    assert f"{format_bytes(ring.peak_max_bytes)} ({'+' if d > 0 else ''}{format_bytes(d)})" in table


def test_every_fix_cost_says_what_it_does_to_the_peak(tmp_path, capsys):
    """A fix that frees later (a record_stream fix holds a block until the reader is done) moves
    the peak; the cost line names the rank."""
    path = tmp_path / "late.py"
    path.write_text('''\
VARIANTS = {"racy": "free while the side stream still reads"}
def build(sim, p, variant):
    def rank0(host):
        x = host.buffer("x", 64 << 20)
        host.launch("read", reads=[x], dur=1000, stream="side")
        host.free(x)
        y = host.buffer("y", 32 << 20)
        host.launch("use", writes=[y], dur=10)
    sim.spawn(0, rank0)
''')
    r = run_model(str(path), "racy")
    c = r.fix_cost
    assert c is not None and c.hazards_after == 0
    assert c.before.peak_bytes == {0: 64 << 20}
    assert c.peak_change() == (0, c.after.peak_bytes[0] - (64 << 20))
    text = c.peak_text()
    assert text == ("peak memory unchanged" if c.after.peak_bytes[0] == 64 << 20 else
                    f"+{format_bytes(c.after.peak_bytes[0] - (64 << 20))} peak on rank 0")
    assert main(["run", str(path), "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["metrics"]["peak_bytes"] == {"0": 64 << 20} and d["metrics"]["memory_note"] == ""
    assert d["fix_cost"]["peak_change_rank"] == 0
    assert d["fix_cost"]["peak_change_bytes"] == c.after.peak_bytes[0] - (64 << 20)


def test_sweep_has_the_peak_as_a_metric(capsys):
    assert main(["sweep", VLLM, "--variant", "copy_before_send", "--grid", "ring_slots=2,3",
                 "--set", "decode_steps=1", "--set", "requests=1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    two, three = (r["peak_bytes"] for r in rows)
    assert isinstance(two, int) and three - two == 256 * MiB  # one slot: two 128 MiB tensors
