"""What the reports say, word for word where a definition is at stake: a manifest hazard, a
deadlock's blocked agents, a run without step labels."""
from __future__ import annotations

import json

from streamsim import check_oplog, render_markdown, render_text, run_model
from streamsim.cli.main import main

# The send reads `x` during the last tenth of its 100 us; the next forward rewrites `x` in 10 us
# right after the first forward, long before the send's read begins: the windows never overlap,
# yet the write landed before the read, so the data sent is not the data meant (manifest).
EARLY_WRITE = "".join(json.dumps(o) + "\n" for o in (
    {"op": "launch", "name": "forward", "writes": ["x"], "dur": 1},
    {"op": "isend", "tensors": [{"buffer": "x", "window": [0.9, 1.0]}], "peer": 1, "dur": 100,
     "handle": "s"},
    {"op": "launch", "name": "forward2", "writes": ["x"], "dur": 10},
    {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, "handle": "r"},
    {"op": "wait", "rank": 1, "handle": "r"},
))

DEADLOCK = '''"""Both ranks isend a large tensor and wait on it before receiving: a deadlock."""
VARIANTS = {"dead": "deadlock"}


def build(sim, p, variant):
    sim.group("pp", [0, 1])

    def prog(host, other):
        x, y = host.buffer("hidden", 64 << 20), host.buffer("inp", 64 << 20)
        host.group("pp").isend(x, dst=other).wait(blocking=True)
        host.group("pp").irecv(y, src=other).wait()
    sim.spawn(0, prog, 1)
    sim.spawn(1, prog, 0)
'''


def test_manifest_without_overlap_says_the_definition_not_an_overlap(tmp_path):
    """The demo's pattern 2 said "the access windows overlapped in this run" for windows that did
    not overlap. MANIFEST means the second access started before the first ended, and every form
    of the report now says exactly that, with this run's two times."""
    log = tmp_path / "early.jsonl"
    log.write_text(EARLY_WRITE)
    report = check_oplog(str(log))
    [h] = report.findings.hazards
    assert h.kind == "WAR" and h.manifest
    md = render_markdown(report)
    assert ("**MANIFEST**: the second access started before the first ended (it started at "
            "1.0 µs, the first ended at 101.0 µs)") in md
    assert "overlapped" not in md
    assert "MANIFEST: the second access started before the first ended" in render_text(report)


def test_manifest_with_overlap_states_the_definition_and_the_overlap(tmp_path):
    """When the windows do overlap, the definition comes first and the overlap follows."""
    log = tmp_path / "overlap.jsonl"
    log.write_text(EARLY_WRITE.replace('"window": [0.9, 1.0]', '"window": [0.0, 1.0]'))
    md = render_markdown(check_oplog(str(log)))
    assert "**MANIFEST**: the second access started before the first ended (the windows " \
           "overlapped during \\[1.0, 11.0\\] µs (10.0 µs))" in md  # (Markdown escapes brackets)


def test_a_rendezvous_deadlock_names_the_peer_once(tmp_path, capsys):
    """The deadlock read "isend(hidden) to rank1 to rank1": the op's name already says its peer."""
    model = tmp_path / "dead.py"
    model.write_text(DEADLOCK)
    assert main(["run", str(model)]) == 1
    out = capsys.readouterr().out
    assert "rank0/nccl:pp: rendezvous isend(hidden) to rank1 waits for the matching receive" in out
    assert "to rank1 to rank1" not in out


def test_a_run_without_steps_prints_no_step_metrics(tmp_path):
    """An op log without step fields has no steps: the report says so instead of printing
    "0 steps, mean step 0.0 us" (a latency of zero would be a lie)."""
    log = tmp_path / "early.jsonl"
    log.write_text(EARLY_WRITE)
    report = check_oplog(str(log))
    assert report.metrics.steps == 0
    text, md = render_text(report), render_markdown(report)
    assert "no step labels (no step metrics)" in text and "no step labels" in md
    assert "mean step" not in text and "mean step" not in md and "0 steps" not in text


def test_run_with_jitter_and_no_seed_shows_the_seed_it_used(tmp_path):
    """`run --jitter 0.3` without --seed printed `seed: None` but drew from seed 0: the report
    (text and JSON) now shows 0, and `--seed 0` gives the same run byte for byte."""
    model = tmp_path / "dead.py"
    model.write_text(DEADLOCK)
    implicit = run_model(str(model), jitter=0.3, fix_cost=False)
    explicit = run_model(str(model), jitter=0.3, seed=0, fix_cost=False)
    assert implicit.seed == 0 and "seed: 0  jitter: 0.3" in render_text(implicit)
    assert render_text(implicit) == render_text(explicit)
    assert run_model(str(model), fix_cost=False).seed is None  # nothing random: no seed


def test_equal_instance_briefs_are_counted_not_repeated(tmp_path):
    """The demo listed 'step 6 -> step 7 on rank1, latent' twice in a row (two byte ranges of one
    buffer): equal briefs are shown once with their count."""
    log = tmp_path / "three_reads.jsonl"
    log.write_text("".join(json.dumps(o) + "\n" for o in (
        *({"op": "launch", "name": "send", "stream": "comm", "step": 0, "dur": 10,
           "reads": [{"buffer": "x", "offset": 4 * i, "nbytes": 4}]} for i in range(3)),
        {"op": "launch", "name": "forward", "step": 1, "writes": ["x"]},
    )))
    text = render_text(check_oplog(str(log), fix_cost=False))
    assert "3 instances" in text
    assert "other instances: step 0 -> step 1 on rank0, manifest (x2)" in text


# Rank 0 frees `x` 200 us in, while its 500 us isend (started at 100 us) still reads it.
FREE_DURING_SEND = "".join(json.dumps(o) + "\n" for o in (
    {"op": "alloc", "buffer": "x", "nbytes": 1024},
    {"op": "launch", "name": "produce", "writes": ["x"], "dur": 100},
    {"op": "isend", "tensors": ["x"], "peer": 1, "dur": 500, "handle": "s"},
    {"op": "host", "name": "other work", "dur": 200},
    {"op": "free", "buffer": "x"},
    {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, "handle": "r"},
    {"op": "wait", "rank": 1, "handle": "r"},
))


def test_a_free_during_a_send_says_the_block_may_be_reused_not_that_data_was_corrupted(tmp_path):
    """A free that overlapped a send was "MANIFEST ... corrupted in this run", yet a free corrupts
    nothing until the block is reused; and the timeline said "it ended 0.0 µs before the first
    began" (the free is an instant inside the send). Every form now says what happened."""
    from streamsim.report.timeline import draw_timeline
    log = tmp_path / "free.jsonl"
    log.write_text(FREE_DURING_SEND)
    report = check_oplog(str(log))
    [h] = report.findings.hazards
    assert h.kind == "use-after-free" and h.manifest
    said = ("the buffer was freed while the read by isend still ran (400.0 {} before it "
            "ended): the block may be handed to another allocation meanwhile (nothing is "
            "corrupted until it is reused)")
    text, md = render_text(report), render_markdown(report)
    assert f"rank0:x; MANIFEST: {said.format('us')}\n" in text
    assert f"**MANIFEST**: {said.format('µs')}." in md
    assert "corrupted in this run" not in text and "really was corrupted" not in md
    fig = draw_timeline(report.trace, h)
    [caption] = [x.get_text() for x in fig.texts if "MANIFEST" in x.get_text()]
    assert caption == ("use-after-free on x (rank 0) — MANIFEST: the buffer was freed while the "
                       "read still ran (400.0 µs before it ended)")


def test_a_free_before_the_send_began_says_so(tmp_path):
    """The send waits for a 1,000 us kernel on the stream it was issued from (NCCL's enqueue
    edge); the free, 200 us in, ran before the send even began, and during the kernel's write."""
    log = tmp_path / "free.jsonl"
    log.write_text(FREE_DURING_SEND.replace('"dur": 100}', '"dur": 1000, "stream": "side"}')
                   .replace('"peer": 1, "dur": 500', '"peer": 1, "dur": 500, "stream": "side"'))
    report = check_oplog(str(log), fix_cost=False)
    assert [(h.kind, h.manifest) for h in report.findings.hazards] == [("use-after-free", True)] * 2
    md = render_markdown(report)
    assert ("**MANIFEST**: the buffer was freed 800.0 µs before the read by isend began: the "
            "block may be handed to another allocation meanwhile") in md
    assert ("**MANIFEST**: the buffer was freed while the write by produce still ran (800.0 µs "
            "before it ended): the block") in md


def test_the_parameter_tables_show_a_seed_only_when_the_run_drew_one(tmp_path):
    """The Markdown and HTML tables said "seed `None`" for a nominal run, where the text report
    shows no seed line: both now leave seed and jitter out unless the run drew random numbers,
    and then show the seed used."""
    model = tmp_path / "dead.py"
    model.write_text(DEADLOCK)
    nominal = render_markdown(run_model(str(model), fix_cost=False))
    assert "None" not in nominal and "| seed |" not in nominal and "| jitter |" not in nominal
    jittered = render_markdown(run_model(str(model), jitter=0.3, fix_cost=False))
    assert "| seed | `0` |" in jittered and "| jitter | `0.3` |" in jittered
    log = tmp_path / "early.jsonl"
    log.write_text(EARLY_WRITE)
    assert "## Parameters" not in render_markdown(check_oplog(str(log), fix_cost=False))


def test_nothing_orders_them_names_every_kind_of_happens_before_edge(tmp_path):
    """The text and Markdown reports say what would have ordered the two accesses: every HB edge
    kind of the vocabulary, hand-offs between threads and record_stream included (the sentence
    listed six of eleven before, so a reader of a thread race was not told a hand-off orders)."""
    from streamsim.kinds import EDGE_KINDS, EDGE_TEXT
    log = tmp_path / "race.jsonl"
    log.write_text('{"op":"host","host":"loader","name":"fill","writes":["p"]}\n'
                   '{"op":"host","name":"use","reads":["p"]}\n')
    findings = check_oplog(log)
    text, md = render_text(findings), render_markdown(findings)
    line = next(x for x in text.splitlines() if "nothing orders them" in x)
    para = next(x for x in md.splitlines() if "Why nothing orders them" in x)
    for kind in EDGE_KINDS:
        words = EDGE_TEXT[kind].split(":")[0]
        assert words in line, (kind, line)
        assert words in para, (kind, para)
