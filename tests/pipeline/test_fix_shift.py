"""Costs that explain themselves (issue 27, point 3): how far a fix moved the ops it delays, how
much of it reached the makespan, which rank is the critical path; and ``--apply-fixes``, the
fixed run itself."""
from __future__ import annotations

import json
import os

import pytest

from streamsim import analyse, load_model, run_model, simulate
from streamsim.analysis.checks import distinct_fixes
from streamsim.cli import main
from streamsim.pipeline.fixcost import critical_rank, fix_shift
from streamsim.sim.inject import key_fixes
from streamsim.trace import HOST

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VLLM = os.path.join(ROOT, "models", "vllm_pp.py")

# A side-stream read of x for 1,000 us and a compute write of x for 500 us, unordered. The fix (an
# event) starts the write at 1,000 us: it moves by 1,000 us and the makespan by 500 us; with a
# second rank busy for 5,000 us, that rank is the critical path and absorbs it.
SIDE = '''\
"""A side-stream read and a compute-stream write of one buffer, with nothing between them."""
from streamsim import Param
PARAMS = [Param("other_us", float, 0.0, "a second rank's kernel (0: no second rank)")]
VARIANTS = {"racy": "no sync"}
def build(sim, p, variant):
    def rank0(host):
        x = host.buffer("x", 1 << 20)
        host.launch("read", reads=[x], dur=1000, stream="side")
        host.launch("write", writes=[x], dur=500)
    def rank1(host):
        host.launch("long", dur=p.other_us)
    sim.spawn(0, rank0)
    if p.other_us:
        sim.spawn(1, rank1)
'''


@pytest.fixture
def side(tmp_path):
    path = tmp_path / "side.py"
    path.write_text(SIDE)
    return str(path)


def test_a_fix_that_reaches_the_makespan_says_how_much(side):
    c = run_model(side, "racy").fix_cost
    assert (c.shift.delayed, c.shift.moved, c.shift.max_us, c.shift.total_us) == (1, 1, 1000, 1000)
    assert c.shift.critical_rank == 0 and c.reached_us == 500
    assert c.explain() == ("moves 1 op by up to 1.0 ms (1.0 ms in all); 500.0 us reached the "
                           "makespan (rank 0 is the critical path)")


def test_a_fix_the_critical_path_absorbs_says_so(side, capsys):
    r = run_model(side, "racy", {"other_us": 5000.0})
    c = r.fix_cost
    assert c.makespan_change == 0 and c.shift.moved == 1 and c.shift.critical_rank == 1
    assert c.explain().endswith("absorbed: rank 1 is the critical path")
    assert main(["run", side, "--set", "other_us=5000"]) == 1
    out = capsys.readouterr().out
    assert out.count("moves 1 op by up to 1.0 ms (1.0 ms in all); absorbed: rank 1 is the "
                     "critical path") == 2  # the root cause's line and the all-fixes line
    assert main(["run", side, "--set", "other_us=5000", "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    for cost in (d["fix_cost"], d["root_causes"][0]["fix_cost"]):
        assert {k: cost[k] for k in ("delayed_ops", "moved_ops", "max_delay_us", "total_delay_us",
                                     "critical_rank")} == {
            "delayed_ops": 1, "moved_ops": 1, "max_delay_us": 1000.0, "total_delay_us": 1000.0,
            "critical_rank": 1}
    assert "applied_fixes" not in d  # (only an --apply-fixes report has it)


def _brute_shift(trace, fixed, keyed):
    """Reference: match every op of the two runs by (agent, kind, name, location, its ordinal
    among such ops, injected ones skipped), quadratically; the delayed op of a fix is the first
    stream op its host action issued, else that action."""
    def ident(t, op):
        same = [o for o in t.ops if not o.attrs.get("injected") and o.agent == op.agent
                and o.kind == op.kind and o.name == op.name and o.location == op.location
                and o.id < op.id and (o.issuer is None) == (op.issuer is None)]
        return (op.agent, op.kind, op.name, op.location, len(same))

    def host_ops(t, key):
        agent, kind, location, n = key
        hits = [o for o in t.ops if o.agent == agent and o.kind == kind
                and o.location == location and not o.attrs.get("injected")]
        return hits[n] if n < len(hits) else None

    def delayed(t, key):
        h = host_ops(t, key)
        if h is None:
            return None
        issued = [o for o in t.ops if o.issuer == h.id and o.agent.kind != HOST]
        return issued[0] if issued else h
    shifts = []
    for key in sorted({f.before for f in keyed}):
        a, b = delayed(trace, key), delayed(fixed, key)
        if a is not None and b is not None:
            assert ident(trace, a) == ident(fixed, b)  # the same op of the program
            shifts.append(b.start - a.start)
    moved = [d for d in shifts if d > 1e-6]
    return len(shifts), len(moved), max(moved, default=0.0), sum(moved)


def test_the_demo_root_cause_1_moves_the_copy_and_rank_3_absorbs_it():
    """The manifest root cause of ``make demo``: its wait moves the ``copy_`` into the residual
    and the makespan does not move, since rank 3 (the last stage) is the critical path; the shift
    as a quadratic reference matches the ops of the two runs."""
    model = load_model(VLLM)
    r = run_model(model, "regressed_49274", fix_cost=False)
    rc = r.findings.root_causes[0]
    assert rc.manifest and rc.buffer == "intermediate_tensors.residual"
    keyed = key_fixes(r.trace, distinct_fixes([r.findings.hazards[i] for i in rc.instances]))
    fixed = simulate(model, "regressed_49274", r.params, fixes=keyed, base=r.trace)
    s = fix_shift(r.trace, fixed, keyed)
    assert (s.delayed, s.moved, s.max_us, s.total_us) == pytest.approx(
        _brute_shift(r.trace, fixed, keyed))
    assert s.moved > 0 and s.max_us > 1000 and s.critical_rank == 3
    assert fixed.end_time == r.trace.end_time and critical_rank(r.trace) == 3
    assert {r.findings.hazards[i].buffer for i in rc.instances} == {rc.buffer}
    assert rc.buffer not in {h.buffer for h in analyse(fixed).hazards}  # (others remain)


def test_apply_fixes_reports_the_fixed_run(side, capsys, tmp_path):
    assert main(["run", side, "--apply-fixes"]) == 0  # the fixed run is safe: exit 0
    out = capsys.readouterr().out
    assert out.startswith("side [racy] with its proposed fixes applied: no data hazard")
    assert ("fixed run: re-simulated with the run's 1 proposed sync inserted; against the run as "
            "written: makespan 1,000.0 us -> 1,500.0 us (+50.0%)") in out
    assert "metrics: makespan 1,500.0 us" in out
    out_dir = tmp_path / "out"
    assert main(["run", side, "--apply-fixes", "--format", "json", "--out", str(out_dir)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["applied_fixes"]["makespan_us_after"] == d["metrics"]["makespan_us"] == 1500.0
    assert d["hazards"] == [] and d["fix_cost"] is None
    md = (out_dir / "report.md").read_text()
    assert "**Fixed run**: the run re-simulated with its 1 proposed sync inserted" in md
    assert "1.0 ms in all" in md


def test_apply_fixes_on_an_op_log(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    lines = [{"op": "launch", "rank": 0, "name": "read", "reads": ["x"], "stream": "side",
              "dur": 1000},
             {"op": "launch", "rank": 0, "name": "write", "writes": ["x"], "dur": 500}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["check", str(log)]) == 1
    capsys.readouterr()
    assert main(["check", str(log), "--apply-fixes"]) == 0
    out = capsys.readouterr().out
    assert out.split("\n")[0].endswith("log.jsonl with its proposed fixes applied: no data "
                                        "hazard, no deadlock, 0 warnings")
    assert "fixed run: re-simulated with the run's 1 proposed sync inserted" in out
    assert "500.0 us reached the makespan (rank 0 is the critical path)" in out
    assert main(["check", str(log), "--apply-fixes", "--fixed-out", str(tmp_path / "f")]) == 2
    assert "choose one" in capsys.readouterr().err


def test_injection_keys_sort_in_their_own_order_by_the_agents_fields():
    """fix_shift sums the shifts in the keys' sorted order; it sorts by ``_key_order`` (the
    Agent's fields in its place) rather than by the keys themselves: the same order, for agents
    of other ranks, kinds and names, and equal agents that are distinct objects."""
    import random
    from streamsim.pipeline.fixcost import _key_order
    from streamsim.trace import HOST, STREAM, Agent
    rng = random.Random(0)
    agents = [Agent(r, k, n) for r in (0, 1, 10) for k in (HOST, STREAM)
              for n in ("main", "compute", "nccl:pp", "aux")]
    keys = {(Agent(ag.rank, ag.kind, ag.name) if rng.random() < 0.5 else ag, kind, loc, n)
            for ag in agents for kind in ("launch", "wait") for loc in ("a.py:1", "a.py:10")
            for n in (0, 2, 11) if rng.random() < 0.6}
    assert len(keys) > 100
    for _ in range(5):
        shuffled = list(keys)
        rng.shuffle(shuffled)
        assert sorted(shuffled, key=_key_order) == sorted(shuffled)
