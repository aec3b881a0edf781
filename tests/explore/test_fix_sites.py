"""`compare` shows where the proposed fix sits against a variant that fixes the same bug (issue 27,
"costs that explain themselves"): for each root cause of the baseline, each variant that removes
it, where its sync is (the line, the action it comes before, how far ahead of the racing op) or
why it needs none, and the two costs, time and peak memory. Before, `compare` printed only the
table: the demo's proposed fix (+0.0%) and `fixed_54962` (+0.4%) fixed the same bug at different
places and nothing said so."""
from __future__ import annotations

import json
import pathlib
import types

from streamsim import load_model
from streamsim.explore.compare import compare_json, compare_variants, fix_sites, render_compare

ROOT = pathlib.Path(__file__).resolve().parents[2]

MODEL = '''"""One send buffer overwritten by the next step's forward, and three ways to stop it."""
VARIANTS = {"racy": "no wait", "wait_early": "wait the previous send first thing in the step",
            "wait_late": "wait right before the forward", "copy": "send a fresh copy"}
BASELINE = "racy"


def build(sim, p, variant):
    sim.group("pp", [0, 1])

    def stage0(host):
        hidden, work = host.buffer("hidden", 64 << 20), None
        for t in range(3):
            host.step = t
            if work and variant == "wait_early":
                work.wait()  # WAIT_EARLY
            host.host_work("prepare", dur=50)  # PREPARE
            if work and variant == "wait_late":
                work.wait()  # WAIT_LATE
            host.launch("forward", writes=[hidden], dur=900)  # FORWARD
            if variant == "copy":
                sent = host.buffer("sent", 64 << 20)
                host.copy(sent, hidden, dur=10)
            else:
                sent = hidden
            work = host.group("pp").isend(sent, dst=1)  # ISEND

    def stage1(host):
        inp = host.buffer("hidden_in", 64 << 20)
        for t in range(3):
            host.step = t
            host.group("pp").irecv(inp, src=0).wait()
            host.launch("consume", reads=[inp], dur=3000)
    sim.spawn(0, stage0)
    sim.spawn(1, stage1)
'''


def line(path: pathlib.Path, mark: str) -> str:
    n = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if f"# {mark}" in text)
    return f"{path}:{n}"


def run(tmp_path):
    path = tmp_path / "stop.py"
    path.write_text(MODEL)
    model = load_model(str(path))
    return path, model, compare_variants(model, list(model.variants))


def test_each_variant_without_the_root_cause_says_where_its_sync_sits_and_what_it_costs(tmp_path):
    path, model, rows = run(tmp_path)
    [item] = fix_sites(rows, model)
    assert item.index == 1 and item.root_cause.kind == "WAR"
    assert (item.fix_kind, item.fix_label, item.fix_location) == \
        ("wait_handle", "forward", line(path, "FORWARD"))
    assert item.fix_cost is not None and item.fix_cost.hazards_after == 0
    by = {v.variant: v for v in item.variants}
    assert list(by) == ["wait_early", "wait_late", "copy"]  # (the model's order; racy is the base)
    early, late, copy = by["wait_early"], by["wait_late"], by["copy"]
    assert (early.kind, early.location) == ("handle", line(path, "WAIT_EARLY"))
    assert early.before.label == "prepare" and early.ahead_us == 50.0  # the prepare between
    assert (late.kind, late.location, late.before.label) == \
        ("handle", line(path, "WAIT_LATE"), "forward")
    assert late.ahead_us == 0.0  # where the proposed fix goes: right before the forward
    assert copy.kind is None and copy.note == \
        f"none: at {line(path, 'ISEND')} it issues `isend(sent)` instead"
    # the costs, against the baseline, in a fix cost's words: the copy costs memory, not time
    assert copy.cost.peak_text() == "+192.0 MiB peak on rank 0"  # (a copy a step)
    assert early.cost.makespan_change >= late.cost.makespan_change >= 0


def test_compare_prints_the_section_in_text_markdown_and_json_and_the_same_each_time(tmp_path):
    path, model, rows = run(tmp_path)
    text = render_compare(rows, model)
    assert text == render_compare(run(tmp_path)[2], model)  # deterministic
    section = text.split("\n\n", 1)[1]
    assert section.startswith("proposed fixes of racy's root causes against the variants without "
                              "them (where the sync sits; cost vs racy):\n[1] WAR on 'hidden'")
    assert f"proposed    handle wait before `forward` at {line(path, 'FORWARD')}" in section
    assert f"wait_early  handle wait `isend#1.wait()` at {line(path, 'WAIT_EARLY')}, before " \
           f"`prepare` at {line(path, 'PREPARE')}, 50.0 us ahead of `forward`" in section
    assert section.rstrip().endswith("every proposed fix at once (2 syncs): +0.0% makespan, "
                                     "peak memory unchanged, 0 hazards left")
    md = render_compare(rows, model, markdown=True)
    assert "**Proposed fixes of racy's root causes" in md and "| fix | sync | after |" in md
    got = compare_json(rows, model, types.SimpleNamespace(seed=None))
    json.dumps(got)  # (serialisable)
    [item] = got["fix_sites"]
    assert item["root_cause"] == 1 and item["proposed_fix"]["before"] == {
        "label": "forward", "location": line(path, "FORWARD")}
    early = next(v for v in item["variants"] if v["variant"] == "wait_early")
    assert early["sync"] == {"kind": "handle", "label": "isend#1.wait()",
                             "location": line(path, "WAIT_EARLY"),
                             "before": {"label": "prepare", "location": line(path, "PREPARE")},
                             "ahead_us": 50.0}
    copy = next(v for v in item["variants"] if v["variant"] == "copy")
    assert copy["sync"] is None and copy["peak_change_bytes"] == 192 << 20
    assert copy["verdict"] == "clean" and copy["note"].startswith("none: at ")


def test_the_demo_shows_why_the_proposed_wait_is_cheaper_than_pr_54962s():
    """vLLM: root cause [1]'s proposed wait sits right before the `copy_` (+0.0%); fixed_54962's at
    the top of execute_model, 440.5 us ahead of it (+0.4%); copy_before_send waits for nothing and
    pays in memory."""
    model = load_model(str(ROOT / "models" / "vllm_pp.py"))
    rows = compare_variants(model, list(model.variants))
    first = fix_sites(rows, model)[0]
    assert first.proposed() == ("handle wait before `copy_ into intermediate_tensors.residual` "
                                "at models/vllm_pp.py:517")
    assert f"{first.fix_cost.makespan_change:+.1%}" == "+0.0%"
    pr = next(v for v in first.variants if v.variant == "fixed_54962")
    assert pr.kind == "handle" and pr.location != first.fix_location and pr.ahead_us > 0
    assert f"{pr.cost.makespan_change:+.1%}" == "+0.4%"
    copy = next(v for v in first.variants if v.variant == "copy_before_send")
    assert copy.kind is None and copy.cost.peak_text() == "+768.0 MiB peak on rank 3"
