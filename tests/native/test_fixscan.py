"""The compiled scans of fix costing (streamsim/native/_metrics.pyx: ``keyed_host_ops``,
``delayed_ops``) give what the pure-Python reference in streamsim/pipeline/fixcost.py gives: the
same dict, keys in the same order, each value equal and each op the very op object, for the fixes
of every model variant with hazards and of generated op logs, both on the run the fixes were found
in (``Keying``) and on the run re-simulated with them (``fix_shift``: its agents are other, equal,
objects). Each comparison asserts that the compiled path ran. (The reports' fix costs, which these
scans feed, are compared byte for byte on both paths by test_differential.py.)"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from streamsim import native
from streamsim.analysis.checks import analyse, distinct_fixes
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.pipeline import fixcost
from streamsim.sim.inject import key_fixes
from streamsim.sim.model import load_model
from streamsim.sim.runner import simulate

from .built import MODELS, required

pytestmark = required("_metrics", "the compiled metrics")
LOGS = 300


def wanted_of(trace) -> set:
    """The injection keys fix costing asks about for ``trace``'s fixes (as ``Keying`` does)."""
    fixes = distinct_fixes(analyse(trace).hazards)
    return {kf.before for kf in key_fixes(trace, fixes, dedupe=False)}


def assert_same(monkeypatch, trace, wanted: set, what: str) -> None:
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.keyed_host_ops(trace, wanted) is not None, what
    compiled_host = fixcost._keyed_host_ops(trace, wanted)
    assert native.delayed_ops(trace, compiled_host) is not None, what
    compiled = fixcost._delayed_ops(trace, wanted)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    host = fixcost._keyed_host_ops(trace, wanted)
    reference = fixcost._delayed_ops(trace, wanted)
    assert list(compiled_host.items()) == list(host.items()), f"{what}: keyed host ops differ"
    assert list(compiled) == list(reference), f"{what}: delayed ops' keys differ (or order)"
    assert all(compiled[k] is reference[k] for k in reference), f"{what}: another op chosen"
    assert_same_critical_rank(monkeypatch, trace, what)


def assert_same_critical_rank(monkeypatch, trace, what: str) -> None:
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compiled = native.critical_rank(trace)
    assert compiled is not None, what
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert compiled == (fixcost.critical_rank(trace),), f"{what}: another critical rank"


def fixed_runs():
    """(model path, variant) of every model variant whose run has fixes to cost."""
    out = []
    for p in MODELS:
        model = load_model(str(p))
        for v in model.variants:
            if analyse(simulate(model, v, model.resolve(()))).hazards:
                out.append((p, v))
    return out


@pytest.mark.parametrize("path,variant", fixed_runs(),
                         ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_model_fix_scans_match_the_reference(monkeypatch, path, variant):
    """A model variant's fixes: on its run, and on its run re-simulated with them."""
    model = load_model(str(path))
    values = model.resolve(())
    trace = simulate(model, variant, values)
    fixes = distinct_fixes(analyse(trace).hazards)
    keyed = key_fixes(trace, fixes)
    wanted = {kf.before for kf in key_fixes(trace, fixes, dedupe=False)}
    assert_same(monkeypatch, trace, wanted, f"{path.name} {variant}")
    fixed = simulate(model, variant, values, fixes=keyed)
    assert_same(monkeypatch, fixed, wanted, f"{path.name} {variant} re-run with its fixes")


def test_generated_log_fix_scans_match_the_reference(monkeypatch, tmp_path):
    """Generated op logs (tests/native/test_differential.py's generator) with hazards: on the
    replay and on the replay with its fixes injected."""
    spec = importlib.util.spec_from_file_location(
        "_differential_logs", Path(__file__).with_name("test_differential.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    path = tmp_path / "gen.jsonl"
    compared = 0
    for i in range(LOGS):
        path.write_text(gen.generated_log(i))
        log = load_oplog(path)
        trace = simulate_oplog(log)
        fixes = distinct_fixes(analyse(trace).hazards)
        if not fixes:
            continue
        wanted = {kf.before for kf in key_fixes(trace, fixes, dedupe=False)}
        assert_same(monkeypatch, trace, wanted, f"generated log {i}")
        fixed = simulate_oplog(log, fixes=key_fixes(trace, fixes))
        assert_same(monkeypatch, fixed, wanted, f"generated log {i} with its fixes")
        compared += 1
    assert compared >= LOGS // 4, compared


def assert_same_shift(monkeypatch, trace, fixed, keyed, starts, what: str) -> int:
    """``fix_shift`` with the compiled ``shift`` and with the reference: the same FixShift, its
    floats by their bits; returns how many ops it found delayed."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.shift(starts, fixed, keyed) is not None, what
    compiled = fixcost.fix_shift(trace, fixed, keyed, starts)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    reference = fixcost.fix_shift(trace, fixed, keyed, starts)
    assert compiled == reference, f"{what}: another shift"
    for a, b in ((compiled.total_us, reference.total_us), (compiled.max_us, reference.max_us)):
        assert type(a) is type(b) and repr(a) == repr(b), what  # (a -0.0, an int 0: told apart)
    return reference.delayed


def test_fix_shifts_match_the_reference(monkeypatch, tmp_path):
    """How far each group's fixes moved the ops they delay (every fix at once, each root
    cause's alone, and a subset that names one action twice), on every model variant with
    hazards and on generated op logs: the compiled walk's FixShift is the reference's."""
    spec = importlib.util.spec_from_file_location(
        "_differential_logs", Path(__file__).with_name("test_differential.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    runs = []  # (what, trace, rerun)
    for p, v in fixed_runs():
        model = load_model(str(p))
        values = model.resolve(())
        runs.append((f"{p.name} {v}", simulate(model, v, values),
                     lambda keyed, model=model, v=v, values=values: simulate(
                         model, v, values, fixes=keyed)))
    path = tmp_path / "gen.jsonl"
    for i in range(LOGS // 3):
        path.write_text(gen.generated_log(i))
        log = load_oplog(path)
        runs.append((f"generated log {i}", simulate_oplog(log),
                     lambda keyed, log=log: simulate_oplog(log, fixes=keyed)))
    found = twice = 0
    for what, trace, rerun in runs:
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        findings = analyse(trace)
        keying = fixcost.Keying(trace, findings)
        groups = [findings.hazards] + [[findings.hazards[k] for k in rc.instances]
                                       for rc in findings.root_causes[:3]]
        for g, group in enumerate(groups):
            keyed = keying.of(group)
            if not keyed:
                continue
            twice += len(keyed) - len({kf.before for kf in keyed})
            found += assert_same_shift(monkeypatch, trace, rerun(keyed), keyed,
                                       keying.delayed_start, f"{what}, group {g}")
    assert found > 500 and twice > 0, (found, twice)


def test_the_shifts_are_listed_in_the_keys_order(monkeypatch, tmp_path):
    """The shifts a re-run's fixes made are summed in the keys' order (``_key_order``: agent,
    kind, location, n), so the list handed to ``sum`` is the reference's, in order: from a
    trace (``shift``) and from a lean re-run's columns (``measure_columns``), which rank an op
    log's locations by their digits (a line number orders as a string: "12" < "123" < "13").
    The logs' shifts are checked to differ from those in line-number order often enough that a
    numeric order would fail."""
    from streamsim.analysis.hb import HAZARD_KINDS
    spec = importlib.util.spec_from_file_location(
        "_differential_logs", Path(__file__).with_name("test_differential.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from programs import write_random_program  # (logs of hundreds of lines with hazards)
    paths = []
    for i in range(LOGS // 3):
        paths.append(tmp_path / f"gen{i}.jsonl")
        paths[-1].write_text(gen.generated_log(i))
    for i in range(5):
        paths.append(tmp_path / f"random{i}.jsonl")
        write_random_program(str(paths[-1]), 300, streams=4, buffers=40, seed=i)
    compared = numeric_differs = 0
    for i, path in enumerate(paths):
        log = load_oplog(path)
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        trace = simulate_oplog(log)
        findings = analyse(trace)
        if not findings.hazards:
            continue
        keying = fixcost.Keying(trace, findings)
        keyed = keying.of(findings.hazards)
        fixed = simulate_oplog(log, fixes=keyed)
        lean = simulate_oplog(log, fixes=keyed, lean=True)
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        wanted = {kf.before for kf in keyed}
        after = fixcost._delayed_ops(fixed, wanted)
        shifts = [(k, after[k].start - keying.delayed_start[k])
                  for k in sorted(wanted, key=fixcost._key_order)
                  if keying.delayed_start.get(k) is not None and after.get(k) is not None]
        want = [d for _, d in shifts if d > 1e-6]
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        got = native.shift(keying.delayed_start, fixed, keyed)
        assert got == (len(shifts), want), f"{path.name}: another order"
        if not isinstance(lean, type(trace)):
            measured = native.measure_columns(lean.columns, HAZARD_KINDS, keying.delayed_start,
                                              keyed)
            assert measured is not None and measured[3] == (len(shifts), want), \
                f"{path.name}: another order from the columns"
        by_number = [d for _, d in sorted(shifts, key=lambda x: (
            fixcost._key_order(x[0])[:2], int(x[0][2].rpartition(":")[2]), x[0][3]))
            if d > 1e-6]
        numeric_differs += by_number != want
        compared += 1
    assert compared >= 50 and numeric_differs >= 5, (compared, numeric_differs)


def test_a_key_of_another_shape_takes_the_reference(monkeypatch):
    """The compiled keyed_host_ops groups keys as (agent, kind, location, n): any other key
    makes it decline rather than guess."""
    model = load_model(str(MODELS[0]))
    trace = simulate(model, next(iter(model.variants)), model.resolve(()))
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.keyed_host_ops(trace, {("a", "b", "c")}) is None


def _op(i: int, agent, kind: str, location: str = "", **kw):
    from streamsim.trace import Op
    return Op(id=i, agent=agent, index=i, kind=kind, name=f"op{i}", enqueued=float(i),
              start=float(i), end=float(i) + 1.0, start_seq=2 * i, end_seq=2 * i + 1,
              location=location, **kw)


def test_hand_built_corners_match_the_reference(monkeypatch):
    """A keyed host action that enqueued two stream ops (the first is the one delayed), a stream
    op listed before the action that issued it, a host op whose issuer is keyed (not a stream op:
    ignored), an injected action (not counted), two equal host agents that are distinct objects
    (one thread: its count goes on), a wanted line's action at an n not wanted."""
    from streamsim.trace import HOST, STREAM, Agent, Trace
    main, main_again = Agent(0, HOST, "main"), Agent(0, HOST, "main")
    compute = Agent(0, STREAM, "compute")
    ops = [_op(0, compute, "launch", issuer=2),  # (before its issuer)
           _op(1, main, "launch", "m.py:1"),  # n 0
           _op(2, main_again, "launch", "m.py:1"),  # n 1 (the same thread)
           _op(3, compute, "launch", issuer=1), _op(4, compute, "launch", issuer=1),
           _op(5, main, "launch", "m.py:1", attrs={"injected": True}),  # not counted
           _op(6, main, "launch", "m.py:1"),  # n 2
           _op(7, main, "host", issuer=6),  # a host op: not a stream op of action 6
           _op(8, main, "launch", "m.py:1")]  # n 3: not wanted
    trace = Trace(ops=tuple(ops), agents=(main, compute), end_time=9.0)
    wanted = {(main, "launch", "m.py:1", 0), (main, "launch", "m.py:1", 1),
              (main, "launch", "m.py:1", 2)}
    assert_same(monkeypatch, trace, wanted, "hand-built")
    delayed = fixcost._delayed_ops(trace, wanted)
    assert [op.id for op in delayed.values()] == [0, 3, 6]  # (as the reference: tested above)


def test_critical_rank_corners_match_the_reference(monkeypatch):
    """The rank a run ends on: the last kernel's, the smallest rank on a tie (a later op of a
    larger rank ending as late does not take it, a later one of a smaller rank does); with no
    kernel, the last op's; no ops, None. An end that is not a float takes the reference."""
    import dataclasses
    from streamsim.trace import HOST, STREAM, Agent, Trace
    ranks = [Agent(r, STREAM, "compute") for r in range(3)]
    host = Agent(0, HOST, "main")

    def trace_of(*ops):
        return Trace(ops=tuple(ops), agents=(host, *ranks), end_time=9.0)
    tie = trace_of(_op(0, ranks[1], "launch"), dataclasses.replace(
        _op(1, ranks[2], "launch"), end=1.0), dataclasses.replace(_op(2, ranks[0], "launch"),
                                                                 end=1.0),
        _op(3, host, "host"))  # (a later host op: not a kernel)
    no_kernel = trace_of(_op(0, ranks[2], "record"), _op(1, ranks[1], "free"))
    for what, trace, rank in (("a tie", tie, 0), ("no kernel", no_kernel, 1),
                              ("no ops", trace_of(), None)):
        assert_same_critical_rank(monkeypatch, trace, what)
        assert fixcost.critical_rank(trace) == rank, what
    ints = trace_of(dataclasses.replace(_op(0, ranks[1], "launch"), end=3))
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.critical_rank(ints) is None
    assert fixcost.critical_rank(ints) == 1
