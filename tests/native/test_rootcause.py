"""The compiled grouping of hazards into root causes (streamsim/native/_rootcause.pyx) is the
reference's (streamsim/analysis/rootcause.py, ``_grouped``): the same keys (kind, buffer or
allocation site, the two Site objects by value), in the same order, each with the same hazards,
and each group's summary is the reference's (``_summary``: the most common fix kind, its first
instance, the others, manifest count, ranks, step gap), and so the same root causes, on every
model of models/ (each variant: comm ops whose default names carry their peer, micro-batches,
buffers made by ``host.buffer`` at a model line), on generated op logs (several ranks, named and unnamed lines, allocations), on a recorded-like log
(every line with a recorder's ``site``, allocations with a site: grouped by where the tensor was
made) and on hand-made hazards whose fixes cover later ones (the merged keys). Each comparison
asserts that the compiled grouping ran. Skipped where ``_rootcause`` was not built; under CI a
missing module fails instead."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from streamsim import native
from streamsim.analysis import rootcause as R
from streamsim.analysis.checks import analyse
from streamsim.analysis.findings import Fix, Hazard
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.sim.runner import simulate
from streamsim.trace import HOST, STREAM, Agent, Op, Trace

from .built import model_trace, model_variants, required, variant_id
from .test_metrics import _generator, lean_runs

pytestmark = required("_rootcause", "the compiled root-cause grouping")

def assert_same(monkeypatch, trace: Trace, hazards, what: str, seen: set | None = None) -> None:
    """``_grouped`` and ``root_causes`` of ``hazards``: the compiled grouping ran, and gave the
    reference's dict (its order too) and root causes; ``seen`` gathers which kinds of key they
    had (an allocation site, a located site, hazards merged into fewer groups)."""
    hazards = tuple(hazards)
    lives = R._Lives(trace) if hazards else None
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    made = lives.site if lives is not None and lives.made else None
    groups = native.root_cause_groups(trace, hazards, made, R._covered_by(trace, hazards))
    assert groups is not None, f"{what}: the compiled grouping declined"
    said = native.root_cause_summaries(trace, hazards, list(groups.values()))
    assert said is not None or not hazards, f"{what}: the compiled summaries declined"
    assert said == [R._summary(trace, hazards, idx) for idx in groups.values()], what
    compiled = R._grouped(trace, hazards, lives), R.root_causes(trace, hazards)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    reference = R._grouped(trace, hazards, lives), R.root_causes(trace, hazards)
    assert list(compiled[0].items()) == list(reference[0].items()), what
    assert compiled[1] == reference[1], what
    for key in reference[0] if seen is not None else ():
        seen.update(k for k, ok in (("made", isinstance(key[1], tuple)),
                                    ("located", bool(key[2].location)),
                                    ("merged", len(reference[0]) < len({
                                        (h.kind, h.buffer, R.site_of(trace.op(h.first)),
                                         R.site_of(trace.op(h.second))) for h in hazards})))
                    if ok)


@pytest.mark.parametrize("path,variant", model_variants(), ids=variant_id)
def test_every_model_variant_groups_as_the_reference(monkeypatch, path, variant):
    trace = model_trace(path, variant)
    assert_same(monkeypatch, trace, analyse(trace).hazards, f"{path.name} {variant}")


def test_generated_and_recorded_logs_group_as_the_reference(monkeypatch, tmp_path):
    gen = _generator()
    path = tmp_path / "gen.jsonl"
    seen: set[str] = set()  # (this test's own logs: not the model tests' keys)
    for i in range(200):
        path.write_text(gen.generated_log(i))
        trace = simulate_oplog(load_oplog(path))
        assert_same(monkeypatch, trace, analyse(trace).hazards, f"generated log {i}", seen)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from programs import write_recorded_program
    write_recorded_program(str(path), 3000)  # (its handle waits dropped: sends that race)
    path.write_text("".join(x for x in path.read_text().splitlines(True) if '"wait"' not in x))
    trace = simulate_oplog(load_oplog(path))
    hazards = analyse(trace).hazards
    assert hazards
    assert_same(monkeypatch, trace, hazards, "recorded-like log", seen)
    assert {"made", "located", "merged"} <= seen, seen


def test_a_run_kept_as_columns_groups_as_the_reference_without_its_ops(monkeypatch, tmp_path):
    """A run the compiled replay kept as columns (``LeanTrace``) is grouped from them: the
    reference's groups of its hazards, in order, with no op of the run made (the allocation
    sites are read from its allocations, which ``_Lives`` asks for by kind)."""
    compared = 0
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    for i, trace, lean in lean_runs(tmp_path, 200, timed=False):
        hazards = tuple(analyse(trace).hazards)
        if not hazards:
            continue
        lives = R._Lives(lean)
        before = set(lean.__dict__["_alone"])  # (the allocations _Lives read)
        made = lives.site if lives.made else None
        got = native.root_cause_groups(lean, hazards, made, R._covered_by(trace, hazards))
        assert got is not None, f"generated log {i}: the compiled grouping declined"
        assert set(lean.__dict__["_alone"]) == before, f"generated log {i}: ops made"
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        want = R._grouped(trace, hazards, R._Lives(trace))
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        assert list(got.items()) == list(want.items()), f"generated log {i}"
        compared += 1
    assert compared >= 50, compared


def test_named_lines_of_an_op_log_are_one_site_a_name(monkeypatch, tmp_path):
    """Lines that name their op: every line of that name is one site (unnamed ones: the line),
    so the same race on lines 1-2 and 3-4 is one root cause."""
    path = tmp_path / "named.jsonl"
    path.write_text('{"op": "launch", "stream": "s1", "name": "produce", "writes": ["x"]}\n'
                    '{"op": "launch", "stream": "s2", "name": "consume", "reads": ["x"]}\n' * 2
                    + '{"op": "launch", "stream": "s1", "writes": ["x"]}\n'
                    '{"op": "launch", "stream": "s2", "reads": ["x"]}\n')
    trace = simulate_oplog(load_oplog(path))
    hazards = analyse(trace).hazards
    assert_same(monkeypatch, trace, hazards, "named lines")
    groups = R._grouped(trace, hazards, R._Lives(trace))
    assert any(len(idx) > 1 and key[2] == R.Site("produce") for key, idx in groups.items())


def test_hazards_a_fix_covers_are_merged_as_the_reference_merges_them(monkeypatch):
    """One unwaited receive read by a forward and then a backward (each a wait_handle fix of
    the same op before the first consumer): the later pair of sites joins the earlier pair's
    root cause, on both paths; ops named with their peer (``irecv from rank0``) label alike."""
    host, nccl = Agent(1, HOST, "main"), Agent(1, STREAM, "nccl:pp")
    compute = Agent(1, STREAM, "compute")

    def op(i, agent, kind, name, **kw):
        return Op(id=i, agent=agent, index=i, kind=kind, name=name, enqueued=float(i),
                  start=float(i), end=i + 0.5, start_seq=2 * i, end_seq=2 * i + 1,
                  location=kw.pop("location", f"m.py:{i}"), **kw)
    ops = [op(0, host, "host", "h0"), op(1, nccl, "irecv", "irecv from rank0", issuer=0,
                                         handle="w"),
           op(2, host, "host", "h2"), op(3, compute, "launch", "forward", issuer=2),
           op(4, host, "host", "h4"), op(5, compute, "launch", "backward", issuer=4),
           op(6, host, "host", "h6"), op(7, nccl, "irecv", "irecv from rank2", issuer=6,
                                         handle="v", location="m.py:1")]
    trace = Trace(ops=tuple(ops), agents=(host, nccl, compute))
    wait = Fix("wait_handle", "wait", 2, handle_op=1, wait_stream=compute)
    hazards = (Hazard("RAW", 1, "x", (0, 8), 1, 3, "write", "read", True, wait),
               Hazard("RAW", 1, "x", (0, 8), 1, 5, "write", "read", False, wait),
               Hazard("RAW", 1, "x", (0, 8), 7, 5, "write", "read", False,
                      Fix("wait_handle", "wait", 4, handle_op=7, wait_stream=compute)))
    assert_same(monkeypatch, trace, hazards, "merged")
    groups = R._grouped(trace, hazards, R._Lives(trace))
    assert list(groups.values()) == [[0, 1, 2]], groups  # (the peer dropped from the label)


def test_a_group_of_several_fix_kinds_is_summed_up_as_the_reference_does(monkeypatch):
    """Instances of one root cause whose fixes differ: the kind most of them need is the root
    cause's (of equal counts, the first met), its example the first instance of that kind, the
    others counted; instances with no fix count for neither; manifest and ranks of all."""
    host, s1, s2 = Agent(0, HOST, "main"), Agent(0, STREAM, "s1"), Agent(0, STREAM, "s2")

    def op(i, agent, kind, name, **kw):
        return Op(id=i, agent=agent, index=i, kind=kind, name=name, enqueued=float(i),
                  start=float(i), end=i + 0.5, start_seq=2 * i, end_seq=2 * i + 1,
                  location="m.py:7", **kw)
    ops = [op(0, host, "host", "h"), op(1, s1, "launch", "produce", issuer=0, step=3),
           op(2, host, "host", "h"), op(3, s2, "launch", "consume", issuer=2, step=4)]
    trace = Trace(ops=tuple(ops), agents=(host, s1, s2))
    event = Fix("event", "record, wait", 2, record_after=0, event_stream=s1, wait_stream=s2)
    sync = Fix("event_sync", "record, sync", 2, record_after=0, event_stream=s1)

    def hz(fix, manifest, rank=0):
        return Hazard("RAW", rank, "x", (0, 8), 1, 3, "write", "read", manifest, fix)
    cases = [(sync, event, event, sync, None), (sync, event), (None, event, sync, sync),
             (None, None)]
    for fixes in cases:
        hazards = tuple(hz(f, k % 2 == 0, rank=k % 3) for k, f in enumerate(fixes))
        kinds = [getattr(f, "kind", None) for f in fixes]
        assert_same(monkeypatch, trace, hazards, f"fixes {kinds}")
    assert R._summary(trace, [hz(sync, True), hz(event, False)], [0, 1])[:3] == \
        ("event_sync", 0, 1)
    assert R._summary(trace, [hz(None, True), hz(event, False), hz(sync, False), hz(sync, True)],
                      [0, 1, 2, 3]) == ("event_sync", 2, 2, 2, (0,), 1)


def test_an_op_it_does_not_read_leaves_the_grouping_to_the_reference(monkeypatch):
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    host = Agent(0, HOST, "main")

    class SubOp(Op):
        __slots__ = ()
    ops = (Op(id=0, agent=host, index=0, kind="host", name="a", enqueued=0.0, start=0.0,
              end=1.0, start_seq=0, end_seq=1),
           SubOp(id=1, agent=host, index=1, kind="host", name="b", enqueued=1.0, start=1.0,
                 end=2.0, start_seq=2, end_seq=3))
    trace = Trace(ops=ops, agents=(host,))
    hazards = (Hazard("WAW", 0, "x", (0, 8), 0, 1, "write", "write", False),)
    assert native.root_cause_groups(trace, hazards, None, {}) is None
    assert R.root_causes(trace, hazards)[0].second == R.Site("b", "")


def test_the_comparison_catches_a_wrong_order(monkeypatch):
    """The test can fail: a grouping whose keys come in another order is caught."""
    gen = _generator()
    compiled = native.root_cause_groups
    monkeypatch.setattr(native, "root_cause_groups", lambda *a: (
        lambda g: None if g is None else dict(reversed(list(g.items()))))(compiled(*a)))
    for i in range(50):
        trace = simulate_oplog(gen.load_oplog_text(gen.generated_log(i)))
        hazards = analyse(trace).hazards
        if len(R._grouped(trace, hazards, R._Lives(trace))) > 1:
            break
    with pytest.raises(AssertionError, match="generated"):
        assert_same(monkeypatch, trace, hazards, "generated")


def test_the_grouping_holds_a_number_a_hazard_not_a_key(monkeypatch, tmp_path):
    """While it groups, the compiled grouping holds each hazard's key as its number among the
    distinct keys (a C int), not the key itself: a tuple of four a hazard, held to the end, was
    most of its memory (about 40 MB at 1,000,000 lines of the random program, for 3,000 keys).
    On a log whose hazards share few keys, what it allocates beyond the groups it returns stays
    under 20 bytes a hazard (``tracemalloc``; with the tuples, about 40: their site numbers are
    small ints here), and the groups are the reference's. (Where most
    keys differ it holds each key once and a dict of them: about a fifth more than the tuples.)"""
    import json
    import random
    import tracemalloc
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    rng = random.Random(5)
    lines = [json.dumps({"op": "launch", "name": "k",  # (a site a name: 3 kinds x 20 keys)
                         "stream": f"s{rng.randrange(4)}", "reads": [f"b{rng.randrange(20)}"],
                         "writes": [f"b{rng.randrange(20)}"], "dur": 1.0}) for _ in range(3000)]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    trace = simulate_oplog(load_oplog(str(path)))
    hazards = tuple(analyse(trace).hazards)
    assert len(hazards) >= 2000, len(hazards)
    covered = R._covered_by(trace, hazards)
    native.root_cause_groups(trace, hazards, None, covered)  # (its sites' texts made once)
    tracemalloc.start()
    try:
        got = native.root_cause_groups(trace, hazards, None, covered)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (peak - held) / len(hazards) < 20, (peak - held, len(hazards))
    assert len(got) <= 60, len(got)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert list(got.items()) == list(R._grouped(trace, hazards, None).items())
