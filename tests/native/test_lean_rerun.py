"""A fix costing re-run kept as columns (``simulate_oplog(..., lean=True)``: the compiled replay's
``Columns``, streamsim/native/_cols.pxd) is measured from its columns (``native.measure_columns``:
the hazards its fixes left, its metrics, the shift of the ops the fixes delay, the rank it ends
on) to the very cost the pure-Python reference measures on its trace: every field of the
``FixCost``, floats bit for bit, on generated logs of every kind the replay covers, each re-run
fix costing makes of them (all fixes at once, each root cause's alone), with seeds and jitter.
Its ``trace()`` is the trace the simpy replay gives; and a measure that declines leaves the run
to be measured from that trace, to the same cost.

Skipped where the compiled modules were not built; under CI a missing module fails instead.
"""
from __future__ import annotations

import os

import pytest

from streamsim import native
from streamsim.analysis.checks import analyse
from streamsim.analysis.hb import HAZARD_KINDS, hazard_count
from streamsim.analysis.liveness import deadlock_from_stall
from streamsim.analysis.metrics import compute_metrics
from streamsim.oplog import replay as replay_mod
from streamsim.oplog.leanrun import LeanRun
from streamsim.oplog.replay import simulate_oplog
from streamsim.pipeline import fixcost
from streamsim.trace import Trace

from .built import required
from .test_differential import load_oplog_text
from .test_replay import TIMINGS, covered_log, difference, keyed_fix_sets

pytestmark = [required("_replay", "the compiled replay"), required("_hb", "the compiled HB pass"),
              required("_metrics", "the compiled metrics")]

GENERATED = int(os.environ.get("STREAMSIM_LEAN_LOGS", "400"))
CHUNK = 100


def reference_cost(trace: Trace, fixed: Trace, keyed: list, monkeypatch) -> fixcost.FixCost:
    """What the pure-Python reference measures of the re-run ``fixed`` of ``trace``."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    try:
        return fixcost._measured(trace, fixed, keyed, hazard_count(fixed),
                                 deadlock_from_stall(fixed) is not None, compute_metrics(trace))
    finally:
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")


def lean_cost(trace: Trace, run: LeanRun, keyed: list) -> fixcost.FixCost | None:
    """What fix costing measures of the re-run kept as columns (None: a measure declined)."""
    starts = fixcost._starts(fixcost._delayed_ops(trace, {kf.before for kf in keyed}))
    return fixcost._measured_lean(run, keyed, compute_metrics(trace), starts)


@pytest.mark.parametrize("chunk", range(max(1, GENERATED // CHUNK)))
def test_a_rerun_measured_from_its_columns_costs_what_its_trace_does(monkeypatch, chunk):
    """Every re-run the compiled replay runs is kept as columns, and each of its measures reads
    them (None from ``_measured_lean`` fails: a measure declined); its cost equals the
    reference's, with the hazards left, steps, peak memory and delayed ops the reference finds
    (the counts below check that the logs reach them)."""
    reached = {"left": 0, "moved": 0, "steps": 0, "memory": 0, "runs": 0, "batched": 0}
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        log = load_oplog_text(covered_log(seed))
        for s, j in TIMINGS:
            monkeypatch.setenv("STREAMSIM_NATIVE", "0")
            trace = simulate_oplog(log, seed=s, jitter=j)
            for keyed in keyed_fix_sets(trace):
                reference = simulate_oplog(log, seed=s, jitter=j, fixes=keyed)
                monkeypatch.setenv("STREAMSIM_NATIVE", "1")
                run = simulate_oplog(log, seed=s, jitter=j, fixes=keyed, lean=True)
                if isinstance(run, Trace):  # (left to the engine: test_replay says which)
                    assert replay_mod._replayed_natively(log, s, j, 5_000_000, 1e12, keyed) \
                        is None, f"log seed {seed}: its compiled re-run not kept as columns"
                    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
                    continue
                reached["batched"] += any(ln.batch is not None for ln in log.lines)
                where = f"log seed {seed}, seed {s} jitter {j}, fixes {[f.text for f in keyed]}"
                got = lean_cost(trace, run, keyed)
                assert got is not None, f"{where}: a measure of the columns declined"
                want = reference_cost(trace, reference, keyed, monkeypatch)
                assert repr(got) == repr(want), f"{where}:\n{got}\nagainst\n{want}"
                diff = difference(reference, run.trace())
                assert diff is None, f"{where}: its trace(): {diff}"
                reached["runs"] += 1
                reached["left"] += got.hazards_after > 0
                reached["moved"] += got.shift.moved > 0
                reached["steps"] += got.after.steps > 0
                reached["memory"] += bool(got.after.peak_bytes)
                monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert reached["runs"] >= 100 and min(reached.values()) >= 50, reached  # (batched: logs
    # with a batch_isend_irecv, whose lanes are agents equal to their stream)


def test_a_measure_that_declines_leaves_the_run_to_its_trace(monkeypatch):
    """When a compiled measure declines the columns (here the HB pass, as for a kind it does not
    cover), fix costing makes the re-run's trace and measures it: the same cost."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (the suite may run with it 0: this is about 1)
    log = load_oplog_text(covered_log(3))
    trace = simulate_oplog(log)
    keying = fixcost.Keying(trace, analyse(trace))
    keyed = keying.of(keying._hazards)
    assert keyed

    def rerun(fixes):
        return simulate_oplog(log, fixes=fixes, lean=True)
    assert isinstance(rerun(keyed), LeanRun)
    before = compute_metrics(trace)
    lean = fixcost.cost_of(trace, keying._hazards, rerun, before, keying)
    covered = native.COVERED_KINDS
    monkeypatch.setattr(native, "COVERED_KINDS", frozenset())
    assert native.measure_columns(rerun(keyed).columns, HAZARD_KINDS,
                                  keying.delayed_start, keyed) is None
    declined = fixcost.cost_of(trace, keying._hazards, rerun, before, keying)
    monkeypatch.setattr(native, "COVERED_KINDS", covered)
    assert repr(lean) == repr(declined)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert isinstance(rerun(keyed), Trace)  # (the pure-Python path keeps no columns)
    assert repr(fixcost.cost_of(trace, keying._hazards, rerun, before, keying)) == repr(lean)


def _columns_of(text: str):
    run = simulate_oplog(load_oplog_text(text), lean=True)
    assert isinstance(run, LeanRun)
    return run.columns


KERNELS = "\n".join(f'{{"op": "launch", "stream": "s{i % 2}", "name": "k", "dur": 1.0, '
                    f'"writes": ["b{i % 3}"]}}' for i in range(6))


def test_columns_hold_a_byte_an_op_where_ops_share_their_step_and_join_nothing(monkeypatch):
    """A run's columns hold an array of their own only where the run's serves nowhere: an op's
    kind is one byte; its step, joins and line are no array of the columns' own while every
    op has one step, none joins anything and none is a fix's sync (8 bytes an op each, held
    by a default check through all its re-runs)."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (the compiled replay's columns, whatever
    # the suite runs under)
    cols = _columns_of(KERNELS)
    n = len(cols)
    assert n == 12  # (each kernel line: its launch and the kernel)
    assert cols.own_bytes == n
    stepped = KERNELS.replace('"dur": 1.0,', '"dur": 1.0, "step": 1,', 1)
    assert _columns_of(stepped).own_bytes == n + 8 * n  # (the first op's step differs)
    cols.trace_parts()
    assert cols.own_bytes == 0
