"""Root causes end to end: what run, check, compare, sweep and shrink report after the analysis moved
to issue order (the reported pairs no longer depend on timing or run length, fixes close in one
pass, instances are grouped by the two sites that race)."""
from __future__ import annotations

import json
import os

import pytest

from streamsim import analyse, load_model, parse_oplog, run_model, simulate, simulate_oplog
from streamsim.cli import main
from streamsim.explore.shrink import shrink, shrink_model
from streamsim.explore.sweep import sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VLLM = os.path.join(ROOT, "models", "vllm_pp.py")

OVERWRITE = '''\
"""The README's model: a forward overwrites what the previous step's isend still reads."""
from streamsim import Param
PARAMS = [Param("steps", int, 3, "forward+send steps")]
VARIANTS = {"racy": "no wait", "fixed": "wait the previous send first"}
def build(sim, p, variant):
    sim.group("pp", [0, 1])
    def stage0(host):
        hidden, work = host.buffer("hidden", 64 << 20), None
        for t in range(p.steps):
            host.step = t
            if work and variant == "fixed": work.wait()
            host.launch("forward", writes=[hidden.during(0.9, 1.0)], dur=900)
            work = host.group("pp").isend(hidden, dst=1)
    def stage1(host):
        inp = host.buffer("hidden_in", 64 << 20)
        for t in range(p.steps):
            host.step = t
            host.group("pp").irecv(inp, src=0).wait()
            host.launch("forward", reads=[inp], dur=2000)
    sim.spawn(0, stage0); sim.spawn(1, stage1)
'''

# One latent WAR (the second send and the next forward), in 20 lines that also hold a matched
# receive, waits and unrelated work: shrinking it must keep the receive with its send.
LATENT20 = [
    {"op": "launch", "rank": 0, "name": "forward", "writes": ["hidden"], "dur": 100},
    {"op": "isend", "rank": 0, "name": "send", "tensors": ["hidden"], "peer": 1, "handle": "s0",
     "dur": 10, "nbytes": 1 << 20},
    {"op": "irecv", "rank": 1, "name": "recv", "tensors": ["inp"], "peer": 0, "handle": "r0",
     "nbytes": 1 << 20},
    {"op": "wait", "rank": 1, "handle": "r0"},
    {"op": "launch", "rank": 1, "name": "stage1", "reads": ["inp"], "writes": ["out1"], "dur": 50},
    {"op": "host", "rank": 0, "name": "prepare", "dur": 500},
    {"op": "launch", "rank": 0, "name": "forward", "writes": ["hidden"], "dur": 100},
    {"op": "isend", "rank": 0, "name": "send", "tensors": ["hidden"], "peer": 1, "handle": "s1",
     "dur": 10, "nbytes": 1 << 20},
    {"op": "irecv", "rank": 1, "name": "recv", "tensors": ["inp"], "peer": 0, "handle": "r1",
     "nbytes": 1 << 20},
    {"op": "wait", "rank": 1, "handle": "r1"},
    {"op": "launch", "rank": 1, "name": "stage1", "reads": ["inp"], "writes": ["out1"], "dur": 50},
    {"op": "host", "rank": 0, "name": "prepare", "dur": 500},
    {"op": "wait", "rank": 0, "handle": "s0"},
    {"op": "wait", "rank": 0, "handle": "s1"},
    {"op": "launch", "rank": 1, "name": "other", "writes": ["tmp"], "dur": 5},
    {"op": "launch", "rank": 1, "name": "other", "reads": ["tmp"], "dur": 5},
    {"op": "host", "rank": 1, "name": "log", "dur": 5},
    {"op": "host", "rank": 1, "name": "log", "dur": 5},
    {"op": "launch", "rank": 0, "name": "post", "writes": ["o"], "dur": 5},
    {"op": "host", "rank": 0, "name": "log", "dur": 5},
]


@pytest.fixture
def overwrite(tmp_path):
    path = tmp_path / "overwrite.py"
    path.write_text(OVERWRITE)
    return str(path)


@pytest.fixture
def latent20(tmp_path):
    path = tmp_path / "latent20.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in LATENT20))
    return str(path)


def causes(findings) -> set[tuple]:
    return {(rc.kind, rc.buffer, rc.first.label, rc.second.label) for rc in findings.root_causes}


def identity(trace, h) -> tuple:
    a, b = trace.op(h.first), trace.op(h.second)
    return (a.agent, a.index, b.agent, b.index, h.kind, h.buffer, h.range)


def test_the_readme_model_reports_one_root_cause_whatever_the_length(overwrite):
    """steps=N has N-1 instances (send t, forward t+1) of one root cause: the count grows with the
    run, not in jumps as when execution order decided which pair a later write hid."""
    rows = sweep(overwrite, "racy", {"steps": [1, 2, 3, 4, 5]}, jobs=1)
    assert [r.hazards for r in rows] == [0, 1, 2, 3, 4]
    assert [r.root_causes for r in rows] == [0, 1, 1, 1, 1]
    trace = simulate(overwrite, "racy", {"steps": 4})
    steps = [(trace.op(h.first).step, trace.op(h.second).step) for h in analyse(trace).hazards]
    assert steps == [(0, 1), (1, 2), (2, 3)]


def test_a_model_reports_the_same_pairs_under_every_seed(overwrite):
    """Jitter changes manifest/latent, never which pairs are reported."""
    base = simulate(overwrite, "racy", {"steps": 5})
    pairs = {identity(base, h) for h in analyse(base).hazards}
    for seed in (1, 2, 3, 4, 5):
        t = simulate(overwrite, "racy", {"steps": 5}, seed=seed, jitter=0.5)
        assert {identity(t, h) for h in analyse(t).hazards} == pairs


@pytest.mark.parametrize("p2p_streams", ["per_pair", "per_group"])
def test_vllm_regression_is_one_root_cause_per_buffer_fixed_by_the_prs_wait(p2p_streams):
    """The demo's report: one root cause per buffer, each the isend of one step (one model line)
    and the later write that overwrites the sent tensor (the forward's launch, or the copy_ into a
    middle stage's receive buffer), each fixed by waiting that isend's handle before the write
    (PR #54962), whichever stream the p2p ops run on; all fixes applied once leave nothing, each
    alone at most the others' instances."""
    rep = run_model(VLLM, "regressed_49274", {"p2p_streams": p2p_streams})
    graph = {("WAR", buf, f"isend({buf})", "forward")
             for buf in ("cudagraph_pool", "cudagraph_outputs.hidden_states",
                         "cudagraph_outputs.residual")}
    receive = ("WAR", "intermediate_tensors.residual", "isend(intermediate_tensors.residual)",
               "copy_ into intermediate_tensors.residual")
    assert causes(rep.findings) == (graph | {receive} if p2p_streams == "per_pair" else graph)
    buffers = [rc.buffer for rc in rep.findings.root_causes]
    assert len(buffers) == len(set(buffers))  # one per buffer
    for n, rc in enumerate(rep.findings.root_causes):
        assert rc.fix_kind == "wait_handle"
        assert rc.fix.startswith("before `") and "previous step's `isend(" in rc.fix
        assert rep.root_cause_costs[n].hazards_after <= len(rep.findings.hazards) - \
            len(rc.instances)
    assert rep.fix_cost.hazards_after == 0 and not rep.fix_cost.deadlock_after
    assert sum(len(rc.instances) for rc in rep.findings.root_causes) == len(rep.findings.hazards)


@pytest.mark.parametrize("which", ["readme", "vllm"])
def test_shrinking_a_model_run_keeps_its_root_cause_and_adds_nothing(which, overwrite, tmp_path):
    model, variant, params = ((overwrite, "racy", {}) if which == "readme" else
                              (VLLM, "regressed_49274",
                               {"pp": 3, "requests": 1, "decode_steps": 2}))
    original = analyse(simulate(model, variant, params))
    out = str(tmp_path / "small.jsonl")
    res = shrink_model(load_model(model), out, variant, params)
    small = analyse(simulate_oplog(out))
    assert res.hazard in {(k, b, f, s) for k, b, f, s in causes(small)}
    assert res.hazard in {(k, b, f, s) for k, b, f, s in causes(original)}
    assert small.deadlock is None
    assert {w.kind for w in small.warnings} <= {w.kind for w in original.warnings}


def test_shrinking_a_latent_war_keeps_the_send_with_its_receive(latent20, tmp_path):
    """The 20-line log shrinks to its racing send and forward *with* the matching receive (and
    the waits whose absence would add a warning): no deadlock, no unmatched send, as `check` shows."""
    out = str(tmp_path / "small.jsonl")
    res = shrink(latent20, out)
    assert res.hazard == ("WAR", "hidden", "send", "forward")
    small = analyse(simulate_oplog(out))
    assert causes(small) == {("WAR", "hidden", "send", "forward")}
    assert small.deadlock is None and small.warnings == ()
    ops = [json.loads(x)["op"] for x in open(out) if not x.startswith("#")]
    assert "isend" in ops and "irecv" in ops and res.ops < 20


def test_check_costs_the_fixes_of_an_op_log_and_writes_the_fixed_log(latent20, tmp_path, capsys):
    """`check` re-simulates an op log with its fixes as `run` does, and `--fixed-out` writes the log
    with them as lines: only lines are added, and the fixed log checks clean."""
    fixed = tmp_path / "fixed.jsonl"
    assert main(["check", latent20, "--fixed-out", str(fixed)]) == 1
    out = capsys.readouterr().out
    assert "fix cost (re-simulated with this fix at every instance)" in out
    assert "every proposed fix applied at once" in out and f"wrote {fixed}" in out
    original = open(latent20).read().splitlines()
    written = fixed.read_text().splitlines()
    added = [x for x in written if x not in original]
    assert [x for x in written if x in original] == original
    assert any(json.loads(x)["op"] == "wait" for x in added if not x.startswith("#"))
    assert main(["check", str(fixed)]) == 0


def test_the_fixed_log_keeps_the_readers_lines(latent20, tmp_path, capsys):
    """`--fixed-out` split the log with str.splitlines, which also breaks at U+2028 (legal raw in a
    JSON string, and read as part of the line by the reader): it crashed with a JSON traceback.
    With a BOM and CRLF endings as well, it now writes the fixed log, which checks clean."""
    lines = open(latent20).read().splitlines()
    first = json.loads(lines[0])
    first["name"] = "forward\u2028(fused)"
    lines[0] = json.dumps(first, ensure_ascii=False)
    log = tmp_path / "odd.jsonl"
    log.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    fixed = tmp_path / "fixed.jsonl"
    assert main(["check", str(log), "--fixed-out", str(fixed), "--no-fix-cost"]) == 1
    capsys.readouterr()
    assert main(["check", str(fixed), "--no-fix-cost"]) == 0


def test_json_lists_root_causes_indexing_the_hazards(latent20, capsys):
    """Since version 3: a site's fields are named as in Python (``Site.label``, ``Site.location``);
    version 2 called the label ``op``."""
    assert main(["check", latent20, "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["streamsim_json"] == 4
    (rc,) = d["root_causes"]
    assert rc["first_site"] == {"label": "send", "location": None}
    assert rc["second_site"] == {"label": "forward", "location": None}
    assert [d["hazards"][i]["kind"] for i in rc["instances"]] == ["WAR"]
    assert rc["fix"]["kind"] == "wait_handle" and rc["fix_cost"]["hazards_after"] == 0


def test_compare_shows_root_causes_beside_instances(capsys):
    assert main(["compare", VLLM, "--variant", "regressed_49274", "--variant", "fixed_54962",
                 "--set", "pp=2", "--set", "decode_steps=4"]) == 1
    text = capsys.readouterr().out
    head = text.splitlines()[1]
    assert head.split()[:4] == ["variant", "verdict", "root", "causes"] and "hazards" in head
    row = next(x for x in text.splitlines() if x.startswith("regressed_49274"))
    assert row.split()[1:3] == ["LATENT", "3"]  # the graph pool and the two graph outputs
    assert main(["compare", VLLM, "--variant", "regressed_49274", "--set", "pp=2",
                 "--set", "decode_steps=4", "--format", "json"]) == 1
    (v,) = json.loads(capsys.readouterr().out)["variants"]
    assert v["root_causes"] == 3 and v["hazards"] > 3 and v["verdict"] == "latent"


def test_compare_and_sweep_say_one_verdict_in_the_same_words(capsys):
    """compare said SAFE/UNSAFE where sweep says manifest/latent/clean: both now write the run's
    verdict (Findings.verdict) in sweep's words, for the same run the same word."""
    sets = ["--set", "pp=2", "--set", "decode_steps=4"]
    words = {}
    for variant in ("regressed_49274", "fixed_54962"):
        main(["compare", VLLM, "--variant", variant, *sets])
        compare_out = capsys.readouterr().out
        words[variant] = next(x for x in compare_out.splitlines()
                              if x.startswith(variant)).split()[1]
        main(["sweep", VLLM, "--variant", variant, *sets, "--grid", "ring_slots=3", "--jobs",
              "1", "-q"])
        sweep_row = capsys.readouterr().out.splitlines()[-1]
        assert sweep_row.split()[1] == words[variant]
        assert "SAFE" not in compare_out
    assert words == {"regressed_49274": "LATENT", "fixed_54962": "clean"}


def test_parse_and_replay_the_readme_op_log_example():
    """The op log example of the docs: line 3 overwrites what line 2's send reads."""
    text = "\n".join([
        '{"op":"launch","rank":0,"name":"forward[t]","writes":["hidden"],"dur":900}',
        '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400}',
        '{"op":"launch","rank":0,"name":"forward[t+1]","writes":["hidden"],"dur":900}',
        '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","dur":400}',
    ]) + "\n"
    t = simulate_oplog(parse_oplog(text, "ex.jsonl"))
    (h,) = analyse(t).hazards
    assert (t.op(h.first).line, t.op(h.second).line, h.kind) == (2, 3, "WAR")


def test_root_causes_are_costed_alone_within_a_budget_of_resimulated_ops(tmp_path, monkeypatch):
    """Each root cause's own cost is a re-simulation of the whole run: only as many as fit in the
    budget of re-simulated ops are measured, the first ones, and the report says so; the cost of
    all fixes at once is always measured."""
    from streamsim import check_oplog
    from streamsim.pipeline import fixcost
    from streamsim.report.report import render_text
    path = tmp_path / "three.jsonl"
    path.write_text("".join(
        f'{{"op": "launch", "stream": "s0", "name": "w{b}", "writes": ["{b}"]}}\n'
        f'{{"op": "launch", "stream": "s1", "name": "r{b}", "reads": ["{b}"]}}\n'
        for b in "abc"))
    full = check_oplog(str(path))
    assert len(full.findings.root_causes) == 3 and None not in full.root_cause_costs
    assert "measured for" not in render_text(full)
    ops = len(full.trace.ops)
    monkeypatch.setattr(fixcost, "ROOT_CAUSE_COST_BUDGET", 2 * ops + 1)  # room for two re-runs
    cut = check_oplog(str(path))
    assert [c is not None for c in cut.root_cause_costs] == [True, True, False]
    assert cut.root_cause_costs[:2] == full.root_cause_costs[:2] and cut.fix_cost == full.fix_cost
    assert (f"The cost of each root cause's fix alone was measured for the first 2 of the 3 root "
            f"causes: each is a re-simulation of the whole run ({ops} ops)") in render_text(cut)
    from streamsim.report.markdown import render_markdown
    assert "measured for the first 2 of the 3 root causes" in render_markdown(cut)
    assert "measured for" not in render_markdown(full)
    monkeypatch.setattr(fixcost, "ROOT_CAUSE_COST_BUDGET", ops - 1)
    assert check_oplog(str(path)).root_cause_costs == (None, None, None)
