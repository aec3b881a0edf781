"""The files a run writes (report.md/json/html, hb.svg/png/dot, timeline.png, trace.json): their
structure, not only their existence; atomic writing; and the graph/timeline commands."""
from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import networkx as nx
import pytest

from streamsim import simulate
from streamsim.analysis.checks import analyse
from streamsim.cli.main import main
from streamsim.report.draw_hb import draw_hb
from streamsim.analysis.metrics import compute_metrics
from streamsim.report.outputs import ALL_FILES, HB_FILES, render_outputs, write_outputs
from streamsim.report.perfetto import chrome_trace
from streamsim.report.report import Report
from streamsim.report.jsonread import op_of
from streamsim.analysis.slices import cap_nodes, hazard_graph, issue_order
from streamsim.report.timeline import select_ops
from streamsim.trace import HOST, STREAM, Access, Agent, View, trace_from_ops
from streamsim.analysis.why import explain

PIPE = '''"""Two ranks; rank 0 overwrites its send buffer while the isend may still read it."""
from streamsim import Param

PARAMS = [Param("steps", int, 3, "steps"), Param("tag", str, "<b>&amp;", "text to escape")]
VARIANTS = {"racy": "no wait", "fixed": "wait the previous send", "ring": "wait the send of two steps back"}


def build(sim, p, variant):
    sim.group("pp", [0, 1])

    def stage0(host):
        hidden = host.buffer("hidden", 1 << 20)
        works = []
        for t in range(p.steps):
            host.step = t
            if variant == "fixed" and works:
                works[-1].wait()
            if variant == "ring" and len(works) >= 2:
                works[-2].wait()
            host.launch("forward", writes=[hidden.during(0.9, 1.0)], dur=900)
            works.append(host.group("pp").isend(hidden, dst=1))

    def stage1(host):
        hidden_in = host.buffer("hidden_in", 1 << 20)
        for t in range(p.steps):
            host.step = t
            host.launch("forward", reads=[hidden_in], dur=2000)
            host.group("pp").irecv(hidden_in, src=0).wait()

    sim.spawn(0, stage0)
    sim.spawn(1, stage1)
'''

DEADLOCK = '''"""Both ranks send a large object before receiving: a rendezvous deadlock."""
VARIANTS = {"both_send_first": "deadlock"}


def build(sim, p, variant):
    sim.group("cpu", [0, 1], backend="gloo")

    def prog(host, me, other):
        host.launch("forward", dur=100)
        host.group("cpu").send_object(1 << 20, dst=other)
        host.group("cpu").recv_object(src=other)

    sim.spawn(0, prog, 0, 1)
    sim.spawn(1, prog, 1, 0)
'''


def _report(path: str, variant: str | None = None, params=()) -> Report:
    trace = simulate(path, variant, params)
    return Report(source=path, trace=trace, findings=analyse(trace),
                  metrics=compute_metrics(trace), model=trace.meta["model"],
                  variant=trace.meta["variant"], params=dict(trace.meta["params"]))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("models")
    paths = {}
    for name, text in (("pipe", PIPE), ("dead", DEADLOCK)):
        p = d / f"{name}.py"
        p.write_text(text)
        paths[name] = str(p)
    return paths


@pytest.fixture(scope="module")
def racy(models, tmp_path_factory):
    """The racy pipeline run through the CLI with --out: (report, out dir)."""
    out = tmp_path_factory.mktemp("out")
    assert main(["run", models["pipe"], "--variant", "racy", "--out", str(out)]) == 1
    return _report(models["pipe"], "racy"), str(out)


def _read(out: str, name: str) -> str:
    with open(os.path.join(out, name), encoding="utf-8") as f:
        return f.read()


def test_run_writes_every_file_and_no_temp_file(racy):
    _, out = racy
    assert sorted(os.listdir(out)) == sorted(ALL_FILES)


def test_report_json_matches_the_findings(racy):
    report, out = racy
    d = json.loads(_read(out, "report.json"))
    hs = report.findings.hazards
    assert len(d["hazards"]) == len(hs) > 0
    assert [h["kind"] for h in d["hazards"]] == [h.kind for h in hs]
    t = report.trace
    assert [(op_of(d, h["first"])["name"], op_of(d, h["second"])["name"]) for h in d["hazards"]] == \
        [(t.op(h.first).name, t.op(h.second).name) for h in hs]
    assert [h["manifest"] for h in d["hazards"]] == [h.manifest for h in hs]
    assert d["summary"] == report.summary()


def test_trace_json_is_a_chrome_trace_with_one_slice_per_op(racy):
    report, out = racy
    events = json.loads(_read(out, "trace.json"))["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(report.trace.ops)
    assert sorted(e["args"]["op"] for e in xs) == list(range(len(report.trace.ops)))
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in xs)
    assert min(e["ts"] for e in xs) == 0
    starts = [e["id"] for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert starts and len(starts) == len(set(starts))
    assert sorted(e["id"] for e in ends) == sorted(starts)
    assert all(e["bp"] == "e" for e in ends)
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert procs == {0: "rank0", 1: "rank1"}
    assert {(e["pid"], e["tid"]) for e in xs} <= set(threads)
    assert set(threads.values()) >= {"main (host)", "compute", "nccl:pp"}
    instants = [e for e in events if e["ph"] == "i"]
    assert len(instants) == len(report.findings.hazards)
    assert all(e["s"] in ("g", "p", "t") and e["ts"] >= 0 for e in instants)


def test_flow_events_follow_message_and_after_edges():
    ag = lambda r, k, n: Agent(r, k, n)  # noqa: E731
    h0, c0, n0, n1 = ag(0, HOST, "main"), ag(0, STREAM, "compute"), ag(0, STREAM, "nccl:pp"), \
        ag(1, STREAM, "nccl:pp")
    t = trace_from_ops([
        dict(agent=h0, kind="launch", name="forward", start=5.0, end=5.0),
        dict(agent=c0, kind="launch", name="forward", start=5.0, end=9.0, issuer=0),
        dict(agent=n0, kind="isend", name="isend", start=9.0, end=12.0, after=(1,)),
        dict(agent=n1, kind="irecv", name="irecv", start=10.0, end=13.0, joins=(2,)),
    ])
    events = chrome_trace(t)["traceEvents"]
    flows = {e["id"]: [] for e in events if e["ph"] == "s"}
    for e in events:
        if e["ph"] in ("s", "f"):
            flows[e["id"]].append((e["ph"], e["pid"], e["tid"], e["cat"]))
    cats = sorted(v[0][3] for v in flows.values())
    assert cats == ["after:isend", "message"]  # the issuer edge is drawn by neither
    msg = next(v for v in flows.values() if v[0][3] == "message")
    assert [p[:2] for p in msg] == [("s", 0), ("f", 1)]
    assert min(e["ts"] for e in events if e["ph"] == "X") == 0  # rebased from 5 us


def test_dot_parses_back_with_both_hazard_ops_and_the_missing_edge(racy):
    report, out = racy
    g = nx.drawing.nx_pydot.read_dot(os.path.join(out, "hb.dot"))
    h = report.findings.hazards[0]
    x, y = issue_order(report.trace, h)
    assert {str(h.first), str(h.second)} <= set(g.nodes)
    roles = {n: d.get("role", "").strip('"') for n, d in g.nodes(data=True)}
    assert roles[str(x.id)] == "first" and roles[str(y.id)] == "second"  # in issue order
    missing = [(u, v) for u, v, d in g.edges(data=True) if d.get("kind", "").strip('"') == "missing"]
    assert missing == [(str(x.id), str(y.id))]  # from the op issued first, as the fix orders them


def test_pictures_are_real_png_and_svg(racy):
    _, out = racy
    for name in ("hb.png", "timeline.png"):
        with open(os.path.join(out, name), "rb") as f:
            data = f.read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000, name
    root = ET.parse(os.path.join(out, "hb.svg")).getroot()
    assert root.tag.endswith("svg") and sum(1 for _ in root.iter()) > 100


def test_markdown_names_both_accesses_buffer_verdict_fix_and_pictures(racy):
    report, out = racy
    md = _read(out, "report.md")
    h = report.findings.hazards[0]
    t = report.trace
    assert t.op(h.first).name in md and t.op(h.second).name in md
    assert "`hidden`" in md and "[0, 1048576)" in md
    assert ("MANIFEST" in md) and ("latent" in md)  # the racy run has both
    rc = report.findings.root_causes[0]
    assert h.fix is not None and rc.fix is not None and rc.fix in md  # the fix, said in code terms
    assert "Why nothing orders them" in md and "Missing edge" in md
    assert "![happens-before slice](hb.svg)" in md and "![timeline](timeline.png)" in md
    assert "makespan" in md and "re-simulated" in md


def test_html_is_self_contained_escaped_and_inlines_both_pictures(racy):
    _, out = racy
    page = _read(out, "report.html")
    assert page.count("<svg") == 2 and "<img" not in page
    assert "src=\"http" not in page and "href=\"http" not in page and "@import" not in page
    assert "&lt;b&gt;&amp;amp;" in page and "<b>&amp;" not in page  # the tag parameter, escaped
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # the two inlined SVGs do not share element ids
    ET.fromstring(page.split("<figure", 1)[1].split(">", 1)[1].split("<figcaption", 1)[0])


def test_outputs_are_reproducible(models):
    report = _report(models["pipe"], "racy")
    assert render_outputs(report) == render_outputs(report)


def test_a_failing_renderer_writes_nothing(models, tmp_path, monkeypatch):
    report = _report(models["pipe"], "racy")
    out = tmp_path / "out"

    def boom(*a, **k):
        raise RuntimeError("renderer failed")
    monkeypatch.setattr("streamsim.report.outputs.dumps_chrome_trace", boom)  # the last file rendered
    with pytest.raises(RuntimeError):
        write_outputs(report, str(out))
    assert not out.exists() or os.listdir(out) == []


def test_a_failure_mid_write_leaves_the_earlier_run_whole(models, tmp_path, monkeypatch):
    """A write that fails part-way (disk full on the third file) leaves every file of the earlier
    run as it was: no half-written file, no temp file, and no set mixed from the two runs."""
    out = str(tmp_path)
    write_outputs(_report(models["pipe"], "racy"), out)
    before = {n: open(os.path.join(out, n), "rb").read() for n in os.listdir(out)}
    import streamsim.report.atomic as atomic
    real = atomic._write_file
    calls = []

    def flaky(path, data, shown):  # (issue 19: the set is now staged as a folder, file by file)
        calls.append(path)
        if len(calls) == 3:  # the third file fails after writing part of its bytes
            real(path, b"partial", shown)
            raise OSError(28, "No space left on device", shown)
        return real(path, data, shown)
    monkeypatch.setattr(atomic, "_write_file", flaky)
    other = _report(models["pipe"], "fixed")
    assert render_outputs(other)["report.md"] != before["report.md"]  # a run that differs
    with pytest.raises(OSError):
        write_outputs(other, out)
    after = {n: open(os.path.join(out, n), "rb").read() for n in os.listdir(out)}
    assert len(calls) == 3 and after == before
    assert not [n for n in os.listdir(tmp_path.parent)
                if n.startswith(f".{tmp_path.name}.streamsim-")]  # no staging folder left


def test_a_clean_run_says_why_there_is_no_hb_picture_and_drops_stale_ones(models, tmp_path):
    out = str(tmp_path)
    write_outputs(_report(models["pipe"], "racy"), out)
    assert all(os.path.exists(os.path.join(out, n)) for n in HB_FILES)
    write_outputs(_report(models["pipe"], "fixed"), out)
    assert not any(os.path.exists(os.path.join(out, n)) for n in HB_FILES)
    md = _read(out, "report.md")
    assert "No happens-before picture" in md and "hb.svg" not in md
    assert os.path.exists(os.path.join(out, "timeline.png"))


def test_deadlock_outputs_show_the_blocked_ops_and_the_cycle(models, tmp_path):
    out = str(tmp_path)
    assert main(["run", models["dead"], "--out", out]) == 1
    md = _read(out, "report.md")
    assert "## Deadlock" in md and "Wait-for cycle" in md and "rank0/main → rank1/main" in md
    g = nx.drawing.nx_pydot.read_dot(os.path.join(out, "hb.dot"))
    waits = [(u, v) for u, v, d in g.edges(data=True) if d.get("kind", "").strip('"') == "waits_for"]
    blocked = {n for n, d in g.nodes(data=True) if d.get("role", "").strip('"') == "blocked"}
    assert len(waits) == 2 and {u for u, _ in waits} == blocked and len(blocked) == 2


def test_why_names_the_chain_that_orders_the_second_op_up_to_an_older_send(models):
    report = _report(models["pipe"], "ring", ["steps=5"])
    t = report.trace
    # the send of step 1 vs the forward of step 2: that forward waited the send of step 0 only,
    # and the forward of step 3 is the first to wait the send of step 1
    h = next(h for h in report.findings.hazards
             if {t.op(h.first).step, t.op(h.second).step} == {1, 2})
    why = explain(t, h)
    x, y = t.op(why.x), t.op(why.y)
    assert why.y_covered is not None and why.x_reaches is not None
    older = t.op(why.y_covered[0].src)
    assert older.agent == x.agent and older.index < x.index and older.kind == "isend"
    assert "handle" in [link.kind for link in why.y_covered] and why.y_covered[-1].dst == y.id
    later = t.op(why.x_reaches[-1].dst)
    assert later.agent == y.agent and later.index > y.index


def test_pictures_cap_their_nodes_and_say_so(models):
    report = _report(models["pipe"], "racy")
    h = report.findings.hazards[0]
    g = hazard_graph(report.trace, h)
    capped, dropped = cap_nodes(g, (h.first, h.second), 5)
    assert capped.number_of_nodes() == 5 and dropped == g.number_of_nodes() - 5
    assert {h.first, h.second} <= set(capped)
    fig = draw_hb(g, report.trace, max_nodes=5)
    assert any("showing 5 of" in t.get_text() for t in fig.texts)
    sel = select_ops(report.trace, h, window=0, max_ops=4)
    assert len(sel.ops) == 4 and any("showing 4 of" in n for n in sel.notes)


def test_graph_and_timeline_commands_pick_the_format_from_the_extension(models, tmp_path, capsys):
    m = models["pipe"]
    dot = tmp_path / "g.dot"
    assert main(["graph", m, "--variant", "racy", "-o", str(dot)]) == 1
    assert dot.read_text().startswith("digraph")
    svg = tmp_path / "g.svg"
    assert main(["graph", m, "--variant", "racy", "--window", "0", "-o", str(svg)]) == 1
    ET.parse(svg)
    png = tmp_path / "t.png"
    assert main(["timeline", m, "--variant", "racy", "--window", "1", "-o", str(png)]) == 1
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["timeline", m, "--variant", "fixed", "-o", str(tmp_path / "t.pdf")]) == 0
    assert (tmp_path / "t.pdf").read_bytes()[:4] == b"%PDF"
    assert main(["graph", m, "--variant", "fixed", "-o", str(tmp_path / "clean.png")]) == 0
    capsys.readouterr()
    assert main(["graph", m, "-o", str(tmp_path / "g.txt")]) == 2
    assert "extension" in capsys.readouterr().err
    assert not (tmp_path / "g.txt").exists()


def test_window_keeps_only_the_steps_around_the_hazard(models):
    report = _report(models["pipe"], "racy")
    h = report.findings.hazards[0]
    steps = {report.trace.op(h.first).step, report.trace.op(h.second).step}
    sel = select_ops(report.trace, h, window=0)
    assert {op.step for op in sel.ops} - {None} == steps


def test_markdown_on_stdout_has_no_picture_links(models, capsys):
    assert main(["run", models["pipe"], "--variant", "racy", "--format", "markdown",
                 "--no-fix-cost"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("# streamsim report") and "](hb.svg)" not in md
    assert "Cost not measured" in md


def test_access_windows_give_the_manifest_overlap():
    c, n = Agent(0, STREAM, "compute"), Agent(0, STREAM, "nccl:pp")
    v = View(0, "x", 0, 64)
    t = trace_from_ops([
        dict(agent=n, kind="isend", name="send", start=0.0, end=100.0,
             accesses=(Access(v, "read"),)),
        dict(agent=c, kind="launch", name="fwd", start=0.0, end=100.0,
             accesses=(Access(v, "write", (0.9, 1.0)),)),
    ])
    h = analyse(t).hazards[0]
    why = explain(t, h)
    assert h.manifest and why.overlap == (90.0, 100.0)


def test_why_agrees_with_brute_force_reachability_on_the_hb_graph(models):
    from streamsim.analysis.hbgraph import full_graph, split_graph
    report = _report(models["pipe"], "ring", ["steps=6"])
    t = report.trace
    s = split_graph(full_graph(t))
    assert report.findings.hazards
    for h in report.findings.hazards:
        why = explain(t, h)
        x, y = t.op(why.x), t.op(why.y)
        after_x = [b for b, e in nx.descendants(s, (x.id, "s"))
                   if e == "s" and b != x.id and t.op(b).agent == y.agent]
        before_y = [a for a, e in nx.ancestors(s, (y.id, "s"))
                    if e == "s" and a != y.id and t.op(a).agent == x.agent]
        want_after = min(after_x, key=lambda b: t.op(b).index) if after_x else None
        want_before = max(before_y, key=lambda a: t.op(a).index) if before_y else None
        assert (why.x_reaches[-1].dst if why.x_reaches else None) == want_after
        assert (why.y_covered[0].src if why.y_covered else None) == want_before
        for chain in (why.x_reaches or (), why.y_covered or ()):
            for a, b in zip(chain, chain[1:]):
                assert a.dst == b.src  # a connected chain


def test_a_long_trace_gets_a_local_graph_around_the_hazard(models, monkeypatch):
    import streamsim.analysis.slices as slices
    report = _report(models["pipe"], "racy", ["steps=12"])
    h = report.findings.hazards[0]
    whole = hazard_graph(report.trace, h)
    monkeypatch.setattr(slices, "FULL_GRAPH_LIMIT", 10)
    monkeypatch.setattr(slices, "LOCAL_SEQ", 40)
    g = slices.hb_graph(report.trace, (h.first, h.second))
    assert "local" in g.graph and g.number_of_nodes() < len(report.trace.ops)
    local = hazard_graph(report.trace, h)
    assert {h.first, h.second} <= set(local) and set(local) <= set(whole)
    assert local.edges[issue_order(report.trace, h)[0].id,
                       issue_order(report.trace, h)[1].id]["kind"] == "missing"


def test_timeline_of_an_empty_or_instant_trace_draws_and_says_so():
    """An empty op log (no ops) and a run that stalls at time 0 (no span) still draw: the empty one
    says there is nothing, the instant one gets one tick instead of a row of equal labels."""
    import matplotlib.pyplot as plt
    from streamsim.oplog import parse_oplog, simulate_oplog
    from streamsim.report.timeline import draw_timeline
    empty = draw_timeline(simulate_oplog(parse_oplog("", "empty.jsonl")))
    assert "no ops in this trace" in [t.get_text() for t in empty.axes[0].texts]
    stalled = simulate_oplog(parse_oplog(
        '{"op":"irecv","peer":1,"tensors":["b"],"handle":"r"}\n'
        '{"op":"wait","handle":"r","blocking":true}\n', "stall.jsonl"))
    assert stalled.stall is not None and stalled.end_time == 0.0
    instant = draw_timeline(stalled)
    instant.canvas.draw()
    labels = [t.get_text() for t in instant.axes[0].get_xticklabels()]
    assert labels == ["0"]  # one tick (digits follow the tick step, none here)
    plt.close(empty)
    plt.close(instant)


def test_a_report_explains_the_first_root_causes_only(tmp_path, capsys, monkeypatch):
    """An op log whose lines have distinct names makes every line its own root cause: explaining
    thousands of them (each a walk over the trace) made --out take minutes. The first MAX_EXPLAINED
    are explained, the table is capped, and both say how many more there are."""
    import streamsim.report.document as document
    monkeypatch.setattr(document, "MAX_EXPLAINED", 4)
    monkeypatch.setattr(document, "MAX_PATTERN_ROWS", 6)
    lines = [json.dumps({"op": "launch", "name": f"k{i}", "stream": f"s{i % 2}", "writes": ["x"],
                         "dur": 1}) for i in range(11)]  # 10 unordered writes after the first
    log = tmp_path / "many.jsonl"
    log.write_text("\n".join(lines) + "\n")
    assert main(["check", str(log), "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert md.count("instance, in full:") == 4
    assert "The other 6 root causes are not explained here" in md
    assert "4 more root causes" in md  # table: 6 rows, then the 4 others in one


def test_hb_picture_of_a_clean_run_neither_claims_ops_nor_shows_a_red_legend(monkeypatch):
    """An empty log's picture said "the run's first ops" over nothing, and every picture listed
    "conflicting / blocked op" in its legend even when no op is one."""
    import streamsim.report.outputs as outputs
    from streamsim.oplog import parse_oplog, simulate_oplog
    seen = []
    real = outputs.draw_hb

    def spy(g, trace, **kw):
        fig = real(g, trace, **kw)
        seen.append((kw["title"], [t.get_text() for lg in fig.legends for t in lg.get_texts()]))
        return fig
    monkeypatch.setattr(outputs, "draw_hb", spy)
    for text in ("", '{"op":"launch","writes":["x"]}\n'):
        trace = simulate_oplog(parse_oplog(text, "l.jsonl"))
        report = Report(source="l.jsonl", trace=trace, findings=analyse(trace),
                        metrics=compute_metrics(trace))
        outputs.graph_file(report, "png")
    (empty_title, _), (title, legend) = seen
    assert empty_title == "no ops in this trace"
    assert title.endswith("the run's first ops") and "conflicting / blocked op" not in legend


def test_pictures_of_unusual_traces_print_no_matplotlib_warnings(tmp_path, capsys):
    """A CJK op name printed one 'Glyph ... missing from font' warning per glyph (dozens of lines
    on stderr for one picture); an empty trace warned about a singular y range."""
    import warnings
    log = tmp_path / "cjk.jsonl"
    log.write_text('{"op":"launch","name":"前向传播","writes":["x"],"dur":1}\n'
                   '{"op":"launch","name":"后向传播","stream":"s2","writes":["x"],"dur":1}\n',
                   encoding="utf-8")
    from streamsim.pipeline import check_oplog
    from streamsim.oplog import parse_oplog
    from streamsim.report.outputs import graph_file
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["graph", str(log), "-o", str(tmp_path / "g.png")]) == 1
        assert main(["timeline", str(log), "-o", str(tmp_path / "t.png")]) == 1
        # (an empty op log file is refused since issue 19: the empty trace, drawn from the library)
        assert graph_file(check_oplog(parse_oplog("", "empty.jsonl")), "png")
    assert [str(w.message) for w in caught] == []


def test_hb_lane_labels_stay_inside_the_picture_however_wide_or_long():
    """Labels were placed at an axes fraction left of the lanes: a wide picture (many columns)
    pushed them off the left edge, and a long stream name did not fit the fixed label margin."""
    from streamsim.analysis.slices import hb_graph
    long = Agent(0, STREAM, "a_very_long_stream_name_for_a_test")
    ops = []
    for i in range(30):  # ~30 columns: a picture over 40 inches wide
        ops.append(dict(agent=Agent(0, HOST, "main"), kind="host", name=f"launch{i}"))
        ops.append(dict(agent=long if i % 2 else Agent(0, STREAM, "compute"), kind="launch",
                        name=f"k{i}", issuer=len(ops) - 1))
    t = trace_from_ops(ops)
    g = hb_graph(t)
    fig = draw_hb(g, t, title="wide", max_nodes=len(ops))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [x for x in fig.axes[0].texts if x.get_text().startswith("rank0 /")]
    assert len(labels) == 3 and fig.get_size_inches()[0] > 40
    assert all(x.get_window_extent(renderer).x0 >= 0 for x in labels)
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_graph_of_a_clean_run_is_small_and_claims_no_finding(monkeypatch, tmp_path, capsys):
    """`graph` of a clean vLLM run drew a strip of 60 ops thousands of pixels wide, captioned
    "those nearest to the finding" when there is none: it now draws the run's first ops, says
    so, and stays small."""
    import struct
    import streamsim.report.outputs as outputs
    seen = []
    real = outputs.draw_hb

    def spy(g, trace, **kw):
        fig = real(g, trace, **kw)
        seen.append((g.number_of_nodes(), [t.get_text() for t in fig.texts]))
        return fig
    monkeypatch.setattr(outputs, "draw_hb", spy)
    png = tmp_path / "clean.png"
    assert main(["graph", "models/vllm_pp.py", "--variant", "fixed_54962", "-o", str(png)]) == 0
    ((nodes, texts),) = seen
    assert nodes == outputs.FIRST_OPS
    assert not any("nearest to the finding" in x for x in texts)
    assert any(f"nothing to explain: the first {outputs.FIRST_OPS} of" in x for x in texts)
    width = struct.unpack(">I", png.read_bytes()[16:20])[0]
    assert width < 2600, width
