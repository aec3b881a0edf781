"""The records a test reads are public, named alike in Python and JSON, and print short."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

from markdown_it import MarkdownIt

import streamsim
from streamsim import compare_variants, dumps_json, load_model, run_model, simulate, sweep

VLLM = "models/vllm_pp.py"
RECORDS = ("Report", "Findings", "Hazard", "Fix", "RootCause", "Site", "Deadlock", "Blocked",
           "Warning", "Metrics", "FixCost", "Trace", "Op", "Agent", "View", "Access", "Stall",
           "Note", "CompareRow", "SweepRow", "RunResult", "ExploreResult", "PatternStats",
           "Pattern", "ShrinkResult")


def test_every_record_a_test_reads_is_exported_as_a_class():
    for name in RECORDS:
        assert name in streamsim.__all__, name
        assert isinstance(getattr(streamsim, name), type), name


def test_import_streamsim_stays_cheap():
    """The new exports are lazy too: importing the package loads no analysis, networkx or
    matplotlib (the command line's start-up pays for them only when it needs them)."""
    code = ("import sys, streamsim; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('networkx', 'matplotlib') or m.startswith(('streamsim.analysis', "
            "'streamsim.explore', 'streamsim.report'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_site_has_the_same_field_names_in_python_and_json(pipeline_model):
    report = run_model(pipeline_model(), "racy", fix_cost=False)
    (rc,) = report.findings.root_causes
    (js,) = json.loads(dumps_json(report))["root_causes"]
    names = [f.name for f in dataclasses.fields(streamsim.Site)]
    assert list(js["first_site"]) == names == ["label", "location"]
    assert js["first_site"]["label"] == rc.first.label == "isend(hidden)"
    assert js["second_site"]["location"] == rc.second.location


def test_reports_traces_and_rows_print_short():
    """repr() of a report (or a compare row, a trace, findings) printed the whole trace, ~460 KB
    for the vLLM model: now one line that says what it is."""
    report = run_model(VLLM, "regressed_49274", fix_cost=False)
    assert repr(report) == "<Report vllm_pp.py:regressed_49274 4 root causes, 150 hazards>"
    t = report.trace
    assert repr(t) == f"<Trace {len(t.ops):,} ops, {len(t.agents)} agents>"
    assert repr(report.findings) == ("<Findings 4 root causes, 150 hazards (6 manifest), "
                                     "no deadlock, 0 warnings>")
    model = load_model(VLLM)
    (row,) = compare_variants(model, ["fixed_54962"], ["pp=2", "decode_steps=2"])
    assert repr(row) == "<CompareRow fixed_54962: <Report vllm_pp.py:fixed_54962 0 root causes, " \
        "0 hazards>>"
    (point,) = sweep(model, "ring_no_wait", {"ring_slots": [1]}, ["pp=2", "decode_steps=2"],
                     jobs=1)
    assert repr(point) == (f"<SweepRow ring_no_wait ring_slots=1: {point.verdict}, "
                           f"{point.hazards} hazard{'s' * (point.hazards != 1)}>")


def test_a_stalled_trace_says_so(pipeline_model):
    from streamsim import Simulation
    sim = Simulation()
    sim.group("pp", [0, 1])
    sim.spawn(0, lambda host: host.group("pp").irecv(host.buffer("x", 8), src=1).wait())
    sim.spawn(1, lambda host: host.group("pp").irecv(host.buffer("y", 8), src=0).wait())
    assert repr(sim.run()).endswith(", stalled>")


def test_the_api_reference_page_renders_lists_not_one_paragraph():
    """pdoc renders the package docstring as Markdown: its name lists must be lists (the old
    docstring's indented lines ran into one paragraph), each group under its own heading."""
    html = MarkdownIt().render(streamsim.__doc__)
    items = " ".join(re.findall(r"<li>(.*?)</li>", html, flags=re.S))
    unlisted = [n for n in streamsim.__all__ if not re.search(rf"<code>{n}\b", items)]
    assert not unlisted, f"public names not in a list item: {unlisted}"
    assert all(f"<strong>{h}</strong>" in html for h in
               ("Write a model", "Run and check", "Read a report", "Explore"))
