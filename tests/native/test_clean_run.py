"""A check's first run kept as columns (``simulate_oplog(..., lean=True)``) is analysed from
them: its trace (``LeanTrace``) makes its ``Op`` objects only when they are read, and the
compiled HB pass, the metrics and the scan for handles never waited read its columns instead
(``native._columns_of``). Its findings and metrics are those the pure-Python reference finds on
its trace (every field; floats bit for bit); a clean run's report makes no op but the ones it
names, each alone (a handle never waited, described); a run with hazards makes them all when
its fixes are proposed. The HB pass on the columns gives the rows the pass on the ops gives.
Its ops, when made, or one made alone, are the reference's, field for field.

The logs: generated logs of every kind the replay covers (test_replay's), and the same logs
with every ``reads``/``writes`` list emptied, most of them clean (their notes, handles never
waited, allocations and frees kept), under both timings.

Skipped where the compiled modules were not built; under CI a missing module fails instead.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle

import pytest

from streamsim import native
from streamsim.analysis.checks import analyse
from streamsim.analysis.hb import HAZARD_KINDS, hazard_count
from streamsim.analysis.liveness import HANDLE_NEVER_WAITED, unwaited_handles
from streamsim.analysis.metrics import compute_metrics
from streamsim.oplog.leanrun import LeanRun, LeanTrace
from streamsim.oplog.replay import simulate_oplog
from streamsim.pipeline import check_oplog
from streamsim.report.jsonout import dumps_json
from streamsim.report.report import render_text
from streamsim.trace import Trace, View

from .built import required
from .test_differential import load_oplog_text
from .test_replay import TIMINGS, covered_log, difference

pytestmark = [required("_replay", "the compiled replay"), required("_hb", "the compiled HB pass"),
              required("_metrics", "the compiled metrics")]

GENERATED = int(os.environ.get("STREAMSIM_CLEAN_LOGS", "200"))
CHUNK = 100


def stripped(text: str) -> str:
    """``text`` with every ``reads`` and ``writes`` list emptied: the same ops, syncs, handles,
    notes and allocations, mostly without a hazard."""
    out = []
    for line in text.splitlines():
        d = json.loads(line)
        for key in ("reads", "writes"):
            if key in d:
                d[key] = []
        out.append(json.dumps(d))
    return "\n".join(out) + "\n"


def logs(chunk: int):
    """(what, log) of the chunk's generated logs, each as written and stripped."""
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        text = covered_log(seed)
        yield f"log seed {seed}", load_oplog_text(text)
        yield f"stripped log seed {seed}", load_oplog_text(stripped(text))


def reference(log, s, j, monkeypatch) -> Trace:
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    try:
        return simulate_oplog(log, seed=s, jitter=j)
    finally:
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")


@pytest.mark.parametrize("chunk", range(max(1, GENERATED // CHUNK)))
def test_a_first_run_is_analysed_from_its_columns_as_from_its_trace(monkeypatch, chunk):
    """Every run the compiled replay keeps as columns, analysed as a LeanTrace (``analyse``,
    ``compute_metrics``), finds what the reference finds on its trace: the findings field by
    field (warnings worded alike), the metrics' reprs equal (every float to the bit). A clean
    one made no op; its trace, once read, is the reference's op for op."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    reached = {"clean": 0, "hazards": 0, "unwaited": 0, "notes": 0, "memory": 0}
    for what, log in logs(chunk):
        for s, j in TIMINGS:
            where = f"{what}, seed {s} jitter {j}"
            run = simulate_oplog(log, seed=s, jitter=j, lean=True)
            ref = reference(log, s, j, monkeypatch)
            if not isinstance(run, LeanRun):  # (left to the engine: test_replay says which)
                continue
            trace = LeanTrace(run)
            findings, metrics = analyse(trace), compute_metrics(trace)
            monkeypatch.setenv("STREAMSIM_NATIVE", "0")
            ref_findings, ref_metrics = analyse(ref), compute_metrics(ref)
            monkeypatch.setenv("STREAMSIM_NATIVE", "1")
            for f in ("hazards", "deadlock", "warnings", "root_causes"):  # (the Findings'
                assert getattr(findings, f) == getattr(ref_findings, f), f"{where}: {f}"
            assert repr(metrics) == repr(ref_metrics), where  # repr says only how many)
            if findings.hazards:
                reached["hazards"] += 1
            else:
                assert not trace.made, f"{where}: a clean run's ops made"
                reached["clean"] += 1
                reached["unwaited"] += any(w.kind == HANDLE_NEVER_WAITED
                                           for w in findings.warnings)
                reached["notes"] += bool(ref.notes)
                reached["memory"] += bool(metrics.peak_bytes)
            assert difference(ref, trace) is None, where
            assert trace.made and trace.columns is None, where  # (the columns let go)
    assert min(reached.values()) >= 10, reached


@pytest.mark.parametrize("chunk", range(max(1, GENERATED // CHUNK)))
def test_the_columns_give_the_traces_hb_rows_and_unwaited_handles(monkeypatch, chunk):
    """The compiled HB pass on the columns (``hb_columns``) gives the rows, positions and agents
    the pass on the trace's ops gives (manifest flags included: accesses and times read from
    the columns), and their count; ``Columns.unwaited_handles`` is the reference's list."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    some = {"with hazards": 0, "manifest": 0, "clean": 0, "unwaited": 0}
    for what, log in logs(chunk):
        run = simulate_oplog(log, seed=7, jitter=0.3, lean=True)
        if not isinstance(run, LeanRun):
            continue
        got = native._compiled.hb_columns(run.columns, HAZARD_KINDS, native.COVERED_KINDS)
        count = native._compiled.hb_columns(run.columns, HAZARD_KINDS, native.COVERED_KINDS,
                                            True)
        handles = run.columns.unwaited_handles()
        trace = run.trace()
        assert got == native._compiled.hb_rows(trace, None, HAZARD_KINDS, native.COVERED_KINDS)
        assert count == len(got[0]), what
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        assert handles == unwaited_handles(trace), what
        assert count == hazard_count(trace), what
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        some["with hazards" if count else "clean"] += 1
        some["manifest"] += any(row[-1] for row in got[0])
        some["unwaited"] += bool(handles)
    assert min(some.values()) >= 10, some


def a_lean_trace(monkeypatch) -> tuple[LeanTrace, Trace]:
    """A lean trace not made yet, and the reference's trace of the same log."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (a suite run with it 0 too)
    log = load_oplog_text(stripped(covered_log(3)))
    run = simulate_oplog(log, lean=True)
    assert isinstance(run, LeanRun)
    return LeanTrace(run), reference(log, None, 0.0, monkeypatch)


def test_a_lean_trace_is_a_trace_equal_to_the_references(monkeypatch):
    """It is a Trace; it equals the reference's both ways round; its fields
    other than the ops are read without making them; it pickles, copies and deep-copies as a
    plain Trace, and ``dataclasses.replace`` gives one of the fields it is given."""
    lean, ref = a_lean_trace(monkeypatch)
    assert isinstance(lean, Trace)
    assert (lean.notes, lean.end_time, lean.agents) == (ref.notes, ref.end_time, ref.agents)
    assert not lean.made and len(lean.columns) == len(ref.ops)
    assert lean == ref and ref == lean
    assert lean.made
    for other in (pickle.loads(pickle.dumps(lean)), copy.copy(lean), copy.deepcopy(lean)):
        assert type(other) is Trace and other == ref
    fewer = dataclasses.replace(lean, ops=lean.ops[:1])
    assert fewer.ops == ref.ops[:1] and fewer.notes == ref.notes


@pytest.mark.parametrize("chunk", range(max(1, GENERATED // CHUNK)))
def test_an_op_made_alone_is_the_one_the_trace_makes(monkeypatch, chunk):
    """``LeanTrace.op(i)`` before the ops are made (each op made alone from the columns) is the
    reference's op i, every field by value and type, attrs in order; ``ops_by_id`` gives those
    of the ids asked; ``len`` counts the ops; none of it makes them all."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    for what, log in logs(chunk):
        run = simulate_oplog(log, seed=7, jitter=0.3, lean=True)
        if not isinstance(run, LeanRun):
            continue
        lean, ref = LeanTrace(run), reference(log, 7, 0.3, monkeypatch)
        alone = Trace(ops=tuple(lean.op(i) for i in range(len(lean))), agents=lean.agents,
                      notes=lean.notes, end_time=lean.end_time, source=lean.source,
                      meta=lean.meta)
        assert difference(ref, alone) is None, what
        some = list(range(0, len(ref.ops), 3))
        assert [lean.ops_by_id(some)[i] for i in some] == [ref.ops[i] for i in some], what
        assert not lean.made and len(lean) == len(ref.ops), what
        with pytest.raises(IndexError):
            lean.op(len(ref.ops))


def test_pickling_a_lean_trace_not_made_makes_its_ops(monkeypatch):
    """(A Trace goes to a worker process whole: the columns are not picklable.)"""
    lean, ref = a_lean_trace(monkeypatch)
    got = pickle.loads(pickle.dumps(lean))
    assert lean.made and got == ref


def test_check_reports_a_clean_log_from_its_columns_as_the_reference(monkeypatch):
    """``check_oplog`` with its defaults (fix costing on) reports a clean log without making an
    op, the same text and JSON as the pure-Python path; ``apply_fixes`` replays it as a trace."""
    text = stripped(covered_log(3))
    log = load_oplog_text(text)
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    got = check_oplog(log)
    assert isinstance(got.trace, LeanTrace) and not got.findings.hazards
    assert got.findings.warnings and not got.trace.made
    out = (render_text(got), dumps_json(got))  # (JSON: a table of the ops its warnings name)
    assert not got.trace.made and "rows" in out[1]
    assert type(check_oplog(log, apply_fixes=True).trace) is Trace
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    want = check_oplog(log)
    assert type(want.trace) is Trace
    assert out == (render_text(want), dumps_json(want))


def test_a_run_of_no_op_is_analysed_from_its_columns(monkeypatch):
    """A log of no op replays to columns of none: the run's lists are empty, so their item
    arrays, which the columns point at and the HB pass borrows, are NULL. Its check reports
    nothing found, as the reference does (a MemoryError once, taken for a failed allocation)."""
    from streamsim.oplog import parse_oplog
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    run = simulate_oplog(parse_oplog("", "empty.jsonl"), lean=True)
    assert isinstance(run, LeanRun) and len(run.columns) == 0
    assert native.hb_rows(LeanTrace(run), None, HAZARD_KINDS) is not None
    report = check_oplog(parse_oplog("", "empty.jsonl"))
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    reference = check_oplog(parse_oplog("", "empty.jsonl"))
    assert render_text(report) == render_text(reference)
    assert not report.findings.hazards


@pytest.mark.parametrize("fix_cost", [False, True])
def test_a_check_makes_only_the_ops_its_report_and_fix_costing_read(monkeypatch, fix_cost):
    """``check_oplog`` of a log with hazards makes each op its fixes, root causes, report and fix
    costing read alone (``LeanTrace.op``; fix costing keys the fixes from the columns, and makes
    the ops their syncs delay), not all of them: the same text and JSON report as the
    pure-Python path, fewer ops made than the run has. Each op made alone is one object, handed
    out again on every call and kept in ``ops`` once they are all made; ``ops_of_kind`` gives
    the reference's ops either way."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compared = partial = 0
    for seed in range(40):
        log = load_oplog_text(covered_log(seed))
        got = check_oplog(log, fix_cost=fix_cost)
        if not got.findings.hazards or not isinstance(got.trace, LeanTrace):
            continue
        out = (render_text(got), dumps_json(got))
        alone = dict(got.trace.__dict__.get("_alone", {}))
        partial += not got.trace.made and 0 < len(alone) < len(got.trace)
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        want = check_oplog(log, fix_cost=fix_cost)
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        assert out == (render_text(want), dumps_json(want)), f"log seed {seed}"
        for kind in ("alloc", "wait", "launch"):
            assert got.trace.ops_of_kind(kind) == want.trace.ops_of_kind(kind), (seed, kind)
        assert all(got.trace.op(i) is op for i, op in alone.items())
        ops = got.trace.ops  # (all made now: those made alone among them)
        assert all(ops[i] is op for i, op in alone.items()) and ops == want.trace.ops
        compared += 1
    assert compared >= 10 and partial >= 5, (compared, partial)


def test_ops_by_id_makes_a_block_alone_and_keeps_it(monkeypatch):
    """``LeanTrace.ops_by_id`` makes the ops it is asked for in one call (``Columns.ops_of``),
    each the reference's, and keeps them: ``op(i)`` hands out the same objects, and ``ops``
    holds them once made."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    ran = 0
    for what, log in logs(0):
        run = simulate_oplog(log, lean=True)
        if not isinstance(run, LeanRun) or len(run.columns) < 6:
            continue
        ref = reference(log, None, 0.0, monkeypatch)
        lean = LeanTrace(run)
        some = list(range(len(lean) - 1, -1, -2))  # (out of order, and asked twice below)
        got = lean.ops_by_id(some + some[:2])
        assert not lean.made and [got[i] for i in some] == [ref.ops[i] for i in some], what
        assert all(lean.op(i) is got[i] for i in some), what
        assert all(lean.ops[i] is got[i] for i in some) and lean.ops == ref.ops, what
        ran += 1
    assert ran >= 50, ran


def test_the_pass_reads_unchecked_only_the_accesses_the_replay_vouches_for(monkeypatch):
    """The replay says its columns' accesses can be read without a check (each an ``Access`` of
    exactly a ``View``: ``Columns.accesses_readable``) only where it made every one of them so:
    a run whose log names a ref whose view is of another class (a hand-built log's) is not
    vouched for, and the HB pass leaves such a run to the reference, which counts it as the
    pass counts the same run with plain views."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    for seed in range(100):  # (the first generated log the replay keeps as columns, racy)
        log = load_oplog_text(covered_log(seed))
        plain = simulate_oplog(log, lean=True)
        if isinstance(plain, LeanRun) and native.hazard_count(LeanTrace(plain), HAZARD_KINDS):
            break
    else:
        raise AssertionError("no generated log of the first 100 has a race and replays compiled")
    assert plain.columns.accesses_readable
    want = native.hazard_count(LeanTrace(plain), HAZARD_KINDS)

    class OddView(View):  # (a View in every field: only its class differs)
        __slots__ = ()

    def odd(ref):
        v = ref.view
        return dataclasses.replace(ref, view=OddView(v.rank, v.buffer, v.offset, v.nbytes,
                                                     v.pattern))
    lines = tuple(dataclasses.replace(ln, reads=tuple(map(odd, ln.reads)),
                                      writes=tuple(map(odd, ln.writes))) for ln in log.lines)
    run = simulate_oplog(dataclasses.replace(log, lines=lines), lean=True)
    assert isinstance(run, LeanRun) and not run.columns.accesses_readable
    assert native.hazard_count(LeanTrace(run), HAZARD_KINDS) is None  # (declined: its check)
    assert hazard_count(LeanTrace(run)) == want  # (the reference's count, on its trace)
