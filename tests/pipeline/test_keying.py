"""Fix costing keys a run's fixes once (``fixcost.Keying``) and then hands each re-run the keyed
fixes of a group of hazards (all of them, one root cause's instances). That must be exactly what
keying the group from scratch gives, ``key_fixes(trace, distinct_fixes(group))``: the same keyed
fixes, by value and in order (a re-run injects them in that order), for every group fix costing
asks about and for arbitrary subsets, on every model variant with hazards and on generated op logs
of several ranks and threads (every fix kind, hand-offs included). And the ops the fixes' syncs
delay in the run (their starts, ``Keying.delayed_start``, found from the host actions the fixes
name) are what a scan of the trace for their keys finds (``_delayed_ops``, as for a re-run)."""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from streamsim.analysis.checks import analyse, distinct_fixes
from streamsim.oplog import simulate_oplog
from streamsim.pipeline.fixcost import Keying, _delayed_ops, _starts
from streamsim.sim.inject import key_fixes
from streamsim.sim.model import load_model
from streamsim.sim.runner import simulate

from ..native.test_differential import generated_log, load_oplog_text

MODELS = sorted((Path(__file__).resolve().parents[2] / "models").glob("*.py"))
LOGS = 150


def groups_of(findings, rng: random.Random) -> list[list]:
    """The groups fix costing keys (all hazards, each root cause's instances), their reverse,
    the hazards with no fix (a use after free), and random subsets."""
    hs = list(findings.hazards)
    out = [hs] + [[hs[i] for i in rc.instances] for rc in findings.root_causes]
    out.append(hs[::-1])
    out.append([h for h in hs if h.fix is None])
    for _ in range(3):
        out.append([h for h in hs if rng.random() < 0.5])
    return out


def assert_keyed_alike(trace, what: str, rng: random.Random) -> int:
    findings = analyse(trace)
    keying = Keying(trace, findings)
    wanted = {kf.before for kf in key_fixes(trace, distinct_fixes(findings.hazards))}
    scanned = _delayed_ops(trace, wanted)  # (the delayed ops as a re-run's are found: a scan)
    assert list(keying.delayed_start.items()) == list(_starts(scanned).items()), \
        f"{what}: the delayed ops found from the fixes' own ops differ from the scan's"
    assert keying.of(findings.hazards) == key_fixes(trace, distinct_fixes(findings.hazards)), \
        f"{what}: the findings' own hazards keyed otherwise"  # (Keying.of's short cut)
    for k, group in enumerate(groups_of(findings, rng)):
        want = key_fixes(trace, distinct_fixes(group))
        assert keying.of(group) == want, f"{what}: group {k} keyed otherwise"
        # (how fix costing counts the groups it re-runs, without keying them: pipeline._costs)
        assert bool(want) == any(h.fix is not None for h in group), f"{what}: group {k}"
    stripped = [dataclasses.replace(h, fix=None) for h in findings.hazards]  # (none has a fix)
    assert keying.of(stripped) == [] and not any(h.fix is not None for h in stripped), what
    return len(findings.hazards)


def test_every_model_variant_keys_each_group_as_from_scratch():
    rng = random.Random(0)
    seen = 0
    for p in MODELS:
        model = load_model(str(p))
        for v in model.variants:
            seen += assert_keyed_alike(simulate(model, v, model.resolve(())), f"{p.name}:{v}", rng)
    assert seen > 0


def test_generated_logs_key_each_group_as_from_scratch():
    rng = random.Random(1)
    kinds = set()
    for seed in range(LOGS):
        trace = simulate_oplog(load_oplog_text(generated_log(seed)))
        assert_keyed_alike(trace, f"generated log {seed}", rng)
        kinds |= {h.fix.kind for h in analyse(trace).hazards if h.fix is not None}
    assert kinds == {"wait_handle", "event", "event_sync", "record_stream", "handoff"}, kinds


def test_a_hazard_it_did_not_key_is_keyed_all_the_same():
    """A group may hold a hazard that is not one of the findings keyed (an equal copy): its fix
    is keyed by its places, as key_fixes would."""
    model = load_model(str(MODELS[0]))
    for v in model.variants:
        trace = simulate(model, v, model.resolve(()))
        findings = analyse(trace)
        if findings.hazards:
            break
    else:
        pytest.skip("no model variant with hazards")
    keying = Keying(trace, findings)
    copies = [type(h)(*(getattr(h, f) for f in h.__slots__)) for h in findings.hazards]
    assert keying.of(copies) == key_fixes(trace, distinct_fixes(copies))


def test_a_fix_before_a_stream_op_names_the_host_action_that_issued_it():
    """Keying finds the host action each key names from the op its fix names: that op, or the
    host action that issued it (a fix may name a stream op: key_fixes keys its issuer). The
    fixes of the runs above all name host actions; here each names an op its action issued."""
    import dataclasses
    from streamsim.pipeline.fixcost import _keyed_host_ops, _named_host_ops
    from streamsim.trace import HOST
    moved = 0
    for seed in range(40):
        trace = simulate_oplog(load_oplog_text(generated_log(seed)))
        issued = {}  # host action -> the first op it issued
        for op in trace.ops:
            if op.agent.kind != HOST and op.issuer is not None:
                issued.setdefault(op.issuer, op.id)
        fixes = [dataclasses.replace(f, before=issued.get(f.before, f.before))
                 if f.kind != "record_stream" else f  # (its before: the action that frees)
                 for f in distinct_fixes(analyse(trace).hazards) if f.kind != "handoff"]
        moved += sum(f.before in issued.values() for f in fixes)
        keyed = key_fixes(trace, fixes, dedupe=False)
        named = _named_host_ops(trace, fixes, keyed)
        assert named == _keyed_host_ops(trace, {kf.before for kf in keyed}), f"log {seed}"
    assert moved >= 20, moved
