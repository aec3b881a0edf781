"""The compiled keying of a run's fixes (streamsim/native/_metrics.pyx: ``keying``) gives what its
pure-Python reference, ``fixcost._keying`` (``key_fixes`` and ``injection_keys`` under it), gives:
the same distinct fixes (the very objects), the same keyed fixes by value and in order, the same
sync number for each fix and each hazard, and the same host actions named, in the same order; for
the fixes of every model variant with hazards and of generated op logs of several ranks and threads
(every fix kind), and for hand-made corners it must leave to the reference. Each comparison asserts
that the compiled path ran. (What the keyed fixes cost, in the reports, is compared byte for byte
on both paths by test_differential.py.)"""
from __future__ import annotations

import dataclasses

import pytest

from streamsim import native
from streamsim.analysis.checks import analyse
from streamsim.analysis.findings import Fix, Hazard
from streamsim.oplog import simulate_oplog
from streamsim.oplog.leanrun import LeanRun, LeanTrace
from streamsim.pipeline import fixcost

from .built import model_trace, model_variants, required
from .test_differential import generated_log, load_oplog_text

pytestmark = required("_metrics", "the compiled metrics")
LOGS = 300


@pytest.fixture(autouse=True)
def compiled_on(monkeypatch):
    """The compiled keying on, even in a run with STREAMSIM_NATIVE=0 (the suite's pure-Python
    run): these tests compare it with the reference."""
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)


def assert_keyed_alike(trace, hazards, what: str) -> tuple:
    compiled = native.keying(trace, hazards, Fix, Hazard)
    assert compiled is not None, f"{what}: the compiled keying declined"
    fixes, keyed, sync_of, sync, host = compiled
    r_fixes, r_keyed, r_sync_of, r_sync, r_host = fixcost._keying(trace, hazards)
    assert len(fixes) == len(r_fixes) and all(a is b for a, b in zip(fixes, r_fixes)), \
        f"{what}: other distinct fixes"
    assert keyed == r_keyed, f"{what}: keyed otherwise"
    assert all(type(a) is type(b) for a, b in zip(keyed, r_keyed)), what
    assert sync_of == r_sync_of, f"{what}: fixes numbered otherwise"
    assert sync == r_sync, f"{what}: hazards numbered otherwise"
    assert list(host.items()) == list(r_host.items()), f"{what}: other host actions (or order)"
    return fixes, keyed


def test_every_model_variant_is_keyed_as_the_reference_keys_it():
    keyed = 0
    for path, variant in model_variants():
        trace = model_trace(path, variant)
        hazards = analyse(trace).hazards
        if any(h.fix for h in hazards):
            assert_keyed_alike(trace, hazards, f"{path.name}:{variant}")
            keyed += 1
    assert keyed >= 5, keyed


def test_generated_logs_are_keyed_as_the_reference_keys_them():
    kinds, shared = set(), 0
    for seed in range(LOGS):
        trace = simulate_oplog(load_oplog_text(generated_log(seed)))
        hazards = list(analyse(trace).hazards)
        fixes, keyed = assert_keyed_alike(trace, hazards, f"generated log {seed}")
        kinds |= {f.kind for f in fixes}
        if hazards:  # a subset, reversed: other first fixes, other numbers
            assert_keyed_alike(trace, hazards[::-2], f"generated log {seed}, a subset")
        # each fix again, naming an op its host action issued (key_fixes keys that action): two
        # distinct fixes, one sync
        issued = {}
        for op in trace.ops:
            if op.agent.kind != "host" and op.issuer is not None:
                issued.setdefault(op.issuer, op.id)
        moved = [dataclasses.replace(h, fix=dataclasses.replace(h.fix, before=issued[h.fix.before]))
                 for h in hazards if h.fix is not None and h.fix.kind not in
                 ("record_stream", "handoff") and h.fix.before in issued]
        fixes, keyed = assert_keyed_alike(trace, hazards + moved, f"generated log {seed}, moved")
        shared += len(fixes) - len(keyed)
    assert kinds == {"wait_handle", "event", "event_sync", "record_stream", "handoff"}, kinds
    assert shared > 50, "too few fixes keyed to one sync: the numbering by keyed identity untested"


def test_a_run_kept_as_columns_is_keyed_from_them_as_the_reference_keys_its_ops():
    """A check's first run, kept as the compiled replay's columns (``LeanTrace``), is keyed
    from them (``_metrics.keying_columns``) and the starts of its delayed ops read from them
    (``delayed_starts_columns``): the same keyed fixes, numbers and host actions as the
    reference keys from the run's ops, the same starts (equal floats, the same keys in the
    same order), and no op made by the keying."""
    kinds, compared = set(), 0
    for seed in range(LOGS):
        log = load_oplog_text(generated_log(seed))
        run = simulate_oplog(log, lean=True)
        if not isinstance(run, LeanRun):
            continue
        lean = LeanTrace(run)
        findings = analyse(lean)
        hazards = list(findings.hazards)
        if not any(h.fix is not None for h in hazards):
            continue
        made = simulate_oplog(log)
        before = set(lean.__dict__["_alone"])  # (the ops the analysis made)
        got = native.keying(lean, hazards, Fix, Hazard)
        assert got is not None, f"generated log {seed}: the compiled keying declined"
        assert not lean.made, f"generated log {seed}: keying made every op"
        fixes, keyed, sync_of, sync, host = got
        r_fixes, r_keyed, r_sync_of, r_sync, r_host = fixcost._keying(made, hazards)
        assert all(a is b for a, b in zip(fixes, r_fixes)) and len(fixes) == len(r_fixes), seed
        assert keyed == r_keyed and sync_of == r_sync_of and sync == r_sync, seed
        assert list(host.items()) == list(r_host.items()), seed
        starts = fixcost.Keying(lean, findings).delayed_start
        assert set(lean.__dict__["_alone"]) == before, f"generated log {seed}: ops made"
        want = fixcost._starts(fixcost._delayed_ops(made, None, r_host))
        assert list(starts.items()) == list(want.items()), f"generated log {seed}: starts"
        assert all(type(x) is float for x in starts.values())
        kinds |= {f.kind for f in fixes}
        compared += 1
    assert compared >= 100, compared
    assert kinds == {"wait_handle", "event", "event_sync", "record_stream", "handoff"}, kinds


def test_a_run_of_lines_of_two_paths_is_keyed_from_its_ops():
    """The columns keep one path for every line (an op's location is it and its line number);
    a hand-built log whose lines name two paths keeps none there, so the keying of its run
    reads the run's ops instead (made then) and keys as the reference keys them: the keys'
    locations name both paths."""
    compared = 0
    for seed in range(60):
        log = load_oplog_text(generated_log(seed))
        lines = [dataclasses.replace(ln, path="other.jsonl") if ln.lineno % 2 else ln
                 for ln in log.lines]
        two = dataclasses.replace(log, lines=lines)
        run = simulate_oplog(two, lean=True)
        if not isinstance(run, LeanRun):
            continue
        lean = LeanTrace(run)
        hazards = list(analyse(lean).hazards)
        if not any(h.fix is not None for h in hazards):
            continue
        made = simulate_oplog(two)
        got = native.keying(lean, hazards, Fix, Hazard)
        assert got is not None and lean.made, f"generated log {seed}"
        keyed, r_keyed = got[1], fixcost._keying(made, hazards)[1]
        assert keyed == r_keyed, f"generated log {seed}"
        paths = {kf.before[2].rpartition(":")[0] for kf in keyed}
        compared += len(paths) == 2
    assert compared >= 10, compared


def test_a_rerun_with_syncs_injected_is_keyed_as_the_reference_keys_it():
    """A run re-simulated with some of its fixes has injected host actions (a key never counts
    them): its own hazards' fixes are keyed alike too."""
    checked = injected = 0
    for seed in range(120):
        log = load_oplog_text(generated_log(seed))
        trace = simulate_oplog(log)
        findings = analyse(trace)
        some = fixcost.Keying(trace, findings).of(findings.hazards[::3])
        if not some:
            continue
        fixed = simulate_oplog(log, fixes=some)
        hazards = analyse(fixed).hazards
        if any(h.fix is not None for h in hazards):
            assert_keyed_alike(fixed, hazards, f"generated log {seed}, re-run")
            checked += 1
            injected += sum(bool(op.attrs.get("injected")) for op in fixed.ops)
    assert checked >= 20 and injected > 0, (checked, injected)


def test_an_action_marked_injected_is_not_counted_at_its_site():
    """A key's n counts its site's actions but an injected one: with the first of the actions at
    a fix's site marked injected (a model's loop runs one line many times), the compiled and the
    reference keys both count one fewer."""
    changed = 0
    for path, variant in model_variants():
        trace = model_trace(path, variant)
        hazards = analyse(trace).hazards
        if not any(h.fix for h in hazards):
            continue
        keyed = fixcost._keying(trace, hazards)[1]
        for ag, kind, loc, n in {kf.before for kf in keyed if kf.before[3] >= 1}:
            first = next(op for op in trace.ops if op.agent == ag and op.kind == kind
                         and op.location == loc)
            ops = list(trace.ops)
            ops[first.id] = dataclasses.replace(first, attrs={**first.attrs, "injected": True})
            marked = dataclasses.replace(trace, ops=tuple(ops))
            try:
                fixcost._keying(marked, hazards)
            except KeyError:  # (that action is a fix's place itself: the reference fails)
                assert native.keying(marked, hazards, Fix, Hazard) is None
                continue
            _, rekeyed = assert_keyed_alike(marked, hazards, f"{path.name}:{variant}, marked")
            assert rekeyed != keyed
            changed += 1
            break
    assert changed, "no model's fix sits after another action of its site"


def _a_run_with_fixes():
    for seed in range(50):
        trace = simulate_oplog(load_oplog_text(generated_log(seed)))
        hazards = list(analyse(trace).hazards)
        if sum(h.fix is not None for h in hazards) >= 3:
            return trace, hazards
    raise AssertionError("no generated log with three fixes")


def test_what_the_reference_refuses_or_words_is_left_to_it():
    """A fix of a kind no re-run applies, naming an op that is not there, or keyed already; a
    hazard of another class: the compiled keying declines, and the reference raises or keys."""
    trace, hazards = _a_run_with_fixes()
    i = next(k for k, h in enumerate(hazards) if h.fix is not None)
    h = hazards[i]

    def with_fix(**change):
        return hazards[:i] + [dataclasses.replace(h, fix=dataclasses.replace(h.fix, **change))]

    from streamsim.sim.errors import ModelError
    for change in ({"kind": "no such kind"}, {"before": len(trace.ops) + 5}):
        assert native.keying(trace, with_fix(**change), Fix, Hazard) is None, change
        with pytest.raises((ModelError, IndexError)):
            fixcost._keying(trace, with_fix(**change))
    keyed = fixcost._keying(trace, hazards)[1][0]
    # (a fix keyed already: the reference keeps it as it is)
    assert native.keying(trace, with_fix(before=keyed.before), Fix, Hazard) is None

    class Other(type(h)):
        __slots__ = ()
    other = Other(*(getattr(h, f) for f in h.__slots__))
    assert native.keying(trace, hazards[:i] + [other], Fix, Hazard) is None

    class OtherOp(type(trace.ops[0])):  # (an op of a subclass: its slots are not read)
        __slots__ = ()
    last = trace.ops[-1]
    swapped = dataclasses.replace(trace, ops=(*trace.ops[:-1], OtherOp(
        *(getattr(last, f) for f in last.__slots__))))
    assert native.keying(swapped, hazards, Fix, Hazard) is None
    assert fixcost._keying(swapped, hazards)[1] == fixcost._keying(trace, hazards)[1]


def test_keying_uses_it_and_is_the_same_on_both_paths(monkeypatch):
    """``Keying`` takes the compiled core where it is on, and what it hands each re-run, and the
    delayed ops' starts it finds, are the same with it off."""
    trace, hazards = _a_run_with_fixes()
    findings = analyse(trace)
    calls = []
    real = native.keying
    monkeypatch.setattr(native, "keying", lambda *a: calls.append(1) or real(*a))
    on = fixcost.Keying(trace, findings)
    assert calls, "Keying did not ask the compiled core"
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    off = fixcost.Keying(trace, findings)
    groups = [findings.hazards] + [[findings.hazards[k] for k in rc.instances]
                                   for rc in findings.root_causes]
    for g in groups:
        assert on.of(g) == off.of(g)
    assert list(on.delayed_start.items()) == list(off.delayed_start.items())
