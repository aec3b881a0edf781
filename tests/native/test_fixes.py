"""The compiled fix proposals (streamsim/native/_fixes.pyx) are the reference's
(streamsim/analysis/fixes.py, ``with_fix`` of each hazard): the same Hazard records with the same
Fix, field for field (the fix's text too, and its stream agents by value), on every model of
models/ (each variant: steps, micro-batches, comm ops whose wait goes on the stream current at
their issue, gloo channels), on generated op logs (tests/native/test_differential.py's
generator: several ranks and threads, NCCL and gloo, frees and ``record_stream``), replayed plain
and with jitter, and on hand-made traces of the corners the generators do not reach. Each
comparison also asserts that the compiled path ran. Skipped where ``_fixes`` was not built; under
CI a missing module fails instead."""
from __future__ import annotations

import collections

import pytest

from streamsim import native
from streamsim.analysis import fixes as F
from streamsim.analysis.findings import Hazard
from streamsim.analysis.hb import hb_pass
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.sim.runner import simulate
from streamsim.trace import HOST, STREAM, Agent, Op, Trace

from .built import model_trace, model_variants, required, variant_id
from .test_metrics import _generator, lean_runs

pytestmark = required("_fixes", "the compiled fixes")

LOGS = 300
SEEN: collections.Counter = collections.Counter()  # fix kinds compared (None: no fix)


def assert_same(monkeypatch, trace: Trace, what: str) -> None:
    """Every hazard of ``trace`` with its fix: the compiled path ran and gave the reference's."""
    hazards = hb_pass(trace).hazards
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compiled = native.with_fixes(trace, hazards)
    assert compiled is not None, f"{what}: the compiled fixes did not run"
    reference = [F.with_fix(trace, h) for h in hazards]
    assert len(compiled) == len(reference), what
    for a, b in zip(compiled, reference):
        assert type(a) is Hazard and (a.fix is None or type(a.fix) is type(b.fix)), what
        assert a == b, f"{what}: {a} != {b}"
        SEEN[None if b.fix is None else b.fix.kind] += 1
    # and the hazards the HB pass hands over, made by their slots (hb._hazards, compiled)
    from streamsim.analysis.findings import RAW, USE_AFTER_FREE, WAR, WAW
    rows = native.hb_rows(trace, None, (RAW, WAR, WAW, USE_AFTER_FREE))[0]
    made = native.hazards(rows, Hazard)
    assert made is not None, f"{what}: the compiled hazards did not run"
    reference = [Hazard(r[2], r[3], r[4], (r[5], r[6]), *r[7:]) for r in rows]
    assert [type(h) for h in made] == [Hazard] * len(rows), what
    assert made == reference, f"{what}: the HB pass's hazards made otherwise"
    assert all(type(getattr(a, f)) is type(getattr(b, f)) for a, b in zip(made, reference)
               for f in Hazard.__slots__), what


@pytest.mark.parametrize("path,variant", model_variants(), ids=variant_id)
def test_every_model_variant_gets_the_references_fixes(monkeypatch, path, variant):
    assert_same(monkeypatch, model_trace(path, variant),
                f"{path.name} --variant {variant}")


def test_generated_logs_get_the_references_fixes(monkeypatch, tmp_path):
    gen = _generator()
    path = tmp_path / "gen.jsonl"
    before = SEEN.copy()
    for i in range(LOGS):
        path.write_text(gen.generated_log(i))
        seed, jitter = gen.TIMINGS[i % len(gen.TIMINGS)]
        assert_same(monkeypatch, simulate_oplog(load_oplog(path), seed=seed, jitter=jitter),
                    f"generated log {i} (seed {seed}, jitter {jitter})")
    # every kind of fix was compared here, each many times (no fix: the hand-made corners)
    for kind in ("event", "event_sync", "wait_handle", "record_stream", "handoff"):
        assert SEEN[kind] - before[kind] >= 10, (kind, sorted(SEEN.items(), key=str))


def test_a_run_kept_as_columns_gets_the_references_fixes_without_its_ops(monkeypatch, tmp_path):
    """A run the compiled replay kept as columns (``LeanTrace``) has its fixes proposed from
    them: the reference's fixes of its hazards, with no op made but those the reference is asked
    for (a comm op's stream current at its issue, ``_current_stream``; a hand-off, proposed by
    ``propose_fix``). Every kind of fix is compared here, and most logs make no op at all."""
    kinds: collections.Counter = collections.Counter()
    none_made = 0
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    for i, trace, lean in lean_runs(tmp_path, LOGS):
        hazards = hb_pass(trace).hazards
        compiled = native.with_fixes(lean, hazards)
        assert compiled == [F.with_fix(trace, h) for h in hazards], f"generated log {i}"
        asked = set()  # the ops the reference is asked about
        for h in hazards:
            x, y = trace.op(h.first), trace.op(h.second)
            if x.agent.kind == HOST or y.agent.is_comm:
                asked.update(range(len(trace)) if x.agent.kind == HOST else (h.second,))
        made = set(lean.__dict__["_alone"])
        assert made <= asked and not lean.made, f"generated log {i}: ops made {made - asked}"
        none_made += bool(hazards) and not made
        kinds.update(h.fix.kind for h in compiled if h.fix is not None)
    assert none_made >= 20, none_made
    for kind in ("event", "event_sync", "wait_handle", "record_stream", "handoff"):
        assert kinds[kind] >= 10, (kind, kinds)


def _op(i: int, agent: Agent, kind: str = "launch", **kw) -> Op:
    return Op(id=i, agent=agent, index=i, kind=kind, name=kw.pop("name", f"op{i}"), enqueued=i,
              start=float(i), end=i + 0.5, start_seq=2 * i, end_seq=2 * i + 1, **kw)


def test_hand_made_corners_get_the_references_fixes(monkeypatch):
    """A comm op's wait on the stream current at its issue (a name, and an Agent), a gloo
    handle, a micro-batch and a step in the text, an op of another type than Op and a hazard of
    another type than Hazard (both the reference's), a use after its free (no fix), a host
    action with an issuer (its fix goes before it), a free first in a hazard of another kind."""
    host, compute = Agent(0, HOST, "main"), Agent(0, STREAM, "compute")
    side, nccl = Agent(0, STREAM, "side"), Agent(0, STREAM, "nccl:pp")
    gloo = Agent(0, STREAM, "gloo:cpu")

    class Sub(Op):
        __slots__ = ()
    ops = [_op(0, host, "host"), _op(1, compute, issuer=0, location="f.py:1", step=2,
                                      attrs={"microbatch": 1}),
           _op(2, host, "host"), _op(3, nccl, "isend", issuer=2, handle="h0"),
           _op(4, host, "host"), _op(5, nccl, "irecv", issuer=4,
                                      attrs={"current_stream": "side"}),
           _op(6, host, "host"), _op(7, nccl, "irecv", issuer=6, attrs={"current_stream": side}),
           _op(8, host, "host"), _op(9, gloo, "isend", issuer=8, handle="g0"),
           _op(10, host, "free", name="free"), _op(11, side, issuer=10),
           Sub(id=12, agent=side, index=12, kind="launch", name="sub", enqueued=12, start=12.0,
               end=12.5, start_seq=24, end_seq=25, issuer=10),
           _op(13, host, "host", issuer=0), _op(14, compute, "free", issuer=10)]
    trace = Trace(ops=tuple(ops), agents=(host, compute, side, nccl, gloo))
    hazards = [Hazard("WAR", 0, "b", (0, 8), 1, 5, "read", "write", False),
               Hazard("RAW", 0, "b", (0, 8), 1, 7, "write", "read", True),
               Hazard("WAR", 0, "b", (0, 8), 3, 5, "read", "write", False),
               Hazard("WAR", 0, "b", (0, 8), 3, 1, "read", "write", False),
               Hazard("WAR", 0, "b", (0, 8), 9, 1, "read", "write", False),
               Hazard("WAR", 0, "b", (0, 8), 9, 0, "read", "write", False),
               Hazard("use-after-free", 0, "b", (0, 8), 10, 11, "free", "read", True),
               Hazard("WAW", 0, "b", (0, 8), 1, 12, "write", "write", False),
               Hazard("RAW", 0, "b", (0, 8), 1, 13, "write", "read", False),
               Hazard("WAW", 0, "b", (0, 8), 14, 5, "write", "write", False)]

    class SubHazard(Hazard):
        __slots__ = ()
    hazards.append(SubHazard("WAR", 0, "b", (0, 8), 1, 11, "read", "write", False))
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compiled = native.with_fixes(trace, hazards)
    reference = [F.with_fix(trace, h) for h in hazards]
    assert compiled == reference == native.with_fixes(trace, tuple(hazards))  # (any sequence)
    assert [h.fix and h.fix.kind for h in reference] == [
        "event", "event", "wait_handle", "wait_handle", "wait_handle", "wait_handle", None,
        "event", "event_sync", "event", "event"]
    assert "micro-batch 1" in reference[0].fix.text and "step 2" in reference[0].fix.text
    assert reference[0].fix.wait_stream == side and reference[1].fix.wait_stream == side
    assert reference[8].fix.before == 13


def test_a_field_never_set_leaves_the_fixes_to_the_reference(monkeypatch):
    """The compiled fixes read an op's and a hazard's fields from their slots: one never set (an
    object made without its __init__) makes them decline, as the JSON tables and the root-cause
    grouping do, rather than raise; the reference then runs (and reads what it reads). Here a
    host action whose ``issuer`` was never set: the reference never reads it."""
    host, compute = Agent(0, HOST, "main"), Agent(0, STREAM, "compute")
    bare = object.__new__(Op)
    for name in Op.__slots__:
        if name != "issuer":
            object.__setattr__(bare, name, getattr(_op(2, host, "host"), name))
    trace = Trace(ops=(_op(0, host, "host"), _op(1, compute, issuer=0), bare),
                  agents=(host, compute))
    hazards = [Hazard("WAR", 0, "b", (0, 8), 1, 2, "read", "write", False)]
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.with_fixes(trace, hazards) is None
    fixed = F.with_fixes(trace, hazards)  # (the reference's, for that hazard)
    assert fixed == [F.with_fix(trace, h) for h in hazards] and fixed[0].fix is not None


def test_the_comparison_catches_a_wrong_word(monkeypatch):
    """The test can fail: a proposal whose text differs in one word is caught."""
    gen = _generator()
    trace = next(t for t in (simulate_oplog(gen.load_oplog_text(gen.generated_log(i)))
                             for i in range(50)) if hb_pass(t).hazards)
    compiled = native.with_fixes

    def off(t, hazards):
        out = compiled(t, hazards)
        h = next(h for h in out if h.fix is not None)
        object.__setattr__(h.fix, "text", h.fix.text.replace(" on ", " at ", 1))
        return out
    monkeypatch.setattr(native, "with_fixes", off)
    with pytest.raises(AssertionError, match="generated log"):
        assert_same(monkeypatch, trace, "generated log")


def test_a_compiled_fix_makes_its_text_when_read(monkeypatch, tmp_path):
    """The compiled proposer leaves each fix's text unmade (``_fixes.Words``) until it is read:
    proposing a fix makes no text. Read, ``Fix.text`` is a ``str``, the reference's, each time;
    a fix compares, hashes, prints, pickles, copies and ``dataclasses.replace``s as the
    reference's does, and what it pickles and copies to holds the text itself. On a run kept as
    columns too (its ops read from them, none made), and read again once its ops are made (the
    columns let go: the words read the ops)."""
    import copy
    import dataclasses
    import pickle

    from streamsim.analysis.findings import Fix
    slot = Fix.__dict__["text"].slot
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    unmade = 0
    for i, trace, lean in lean_runs(tmp_path, 60):
        hazards = hb_pass(trace).hazards
        reference = [F.with_fix(trace, h) for h in hazards]
        for run in (trace, lean):
            compiled = native.with_fixes(run, hazards)
            for a, b in zip(compiled, reference):
                if a.fix is None:
                    continue
                if a.fix.kind != "handoff":  # (a hand-off: the reference's, worded at once)
                    assert type(slot.__get__(a.fix)) is not str, f"log {i}: text made"
                    unmade += 1
                assert type(a.fix.text) is str and a.fix.text == b.fix.text == a.fix.text
                assert hash(a.fix) == hash(b.fix) and repr(a.fix) == repr(b.fix)
                for other in (pickle.loads(pickle.dumps(a.fix)), copy.copy(a.fix),
                              dataclasses.replace(a.fix, before=b.fix.before)):
                    assert other == b.fix and type(slot.__get__(other)) is str, f"log {i}"
        assert lean.columns is not None and lean.ops and lean.columns is None  # (let go)
        assert compiled == reference, f"log {i}: read after the ops were made"
    assert unmade >= 200, unmade


def test_the_pass_makes_its_hazards_and_a_check_fixes_them_in_place(monkeypatch, tmp_path):
    """A check's hazards are made by the compiled pass itself from its table, in its rows'
    order, with no row made (``native.hb_hazards``): equal to the reference pass's, each a
    ``Hazard`` with no fix, on a trace and on its run kept as columns. Then, held by no one
    else, each gets its fix in its own slot (``with_fixes(fresh=True)``): the same objects,
    equal to the reference's hazards with fixes."""
    from streamsim.analysis import hb
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compared = 0
    for i, trace, lean in lean_runs(tmp_path, LOGS):
        reference = hb._analyse(trace, False, list(trace.agents)).hazards
        fixed = [F.with_fix(trace, h) for h in reference]
        for run in (trace, lean):
            made = native.hb_hazards(run, hb.HAZARD_KINDS, Hazard)
            assert made == reference, f"log {i}"
            assert all(type(h) is Hazard and h.fix is None for h in made), f"log {i}"
            ids = [id(h) for h in made]
            got = F.with_fixes(run, made, fresh=True)
            assert [id(h) for h in got] == ids and got == fixed, f"log {i}"
        compared += len(reference)
    assert compared >= 500, compared


def test_a_list_of_hazards_holds_each_distinct_range_once(monkeypatch, tmp_path):
    """The hazards the compiled pass makes (and those ``native.hazards`` makes of rows) share one
    ``range`` tuple among equal ranges: a tuple a hazard was 64 bytes of each. The ranges are
    the reference's, equal value for value."""
    from streamsim.analysis import hb
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    hazards = shared = 0
    for i, trace, lean in lean_runs(tmp_path, LOGS):
        reference = hb._analyse(trace, False, list(trace.agents)).hazards
        rows = native.hb_rows(trace, None, hb.HAZARD_KINDS, rows_only=True)
        for made in (native.hb_hazards(lean, hb.HAZARD_KINDS, Hazard),
                     native.hazards(rows, Hazard)):
            assert [h.range for h in made] == [h.range for h in reference], f"log {i}"
            assert len({id(h.range) for h in made}) == len({h.range for h in made}), f"log {i}"
        hazards += len(reference)
        shared += len(reference) - len({h.range for h in reference})
    assert shared >= 100, (shared, hazards)


def test_hazards_and_fixes_name_an_op_named_again_by_one_int(monkeypatch, tmp_path):
    """The hazards the compiled pass makes, and the fixes the compiled proposer makes, name an
    op that a record made shortly before named by the same int object (``_slots.IdInts``): an
    int of its own was 32 bytes a name, and most ops a hazard names are named again (45,838 of
    119,824 names among the random program's 200,000 lines' hazards, as many among their
    fixes'). On a log of a few thousand ops, every repeat is one object; the values are the
    reference's."""
    import json
    import random
    from streamsim.analysis import hb
    from streamsim.oplog.leanrun import LeanTrace
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    rng = random.Random(3)
    lines = [json.dumps({"op": "launch", "name": "k", "stream": f"s{rng.randrange(4)}",
                         "reads": [f"b{rng.randrange(30)}"], "writes": [f"b{rng.randrange(30)}"],
                         "dur": 1.0}) for _ in range(1500)]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    log = load_oplog(str(path))
    trace = simulate_oplog(log)
    reference = [F.with_fix(trace, h) for h in hb._analyse(trace, False,
                                                          list(trace.agents)).hazards]
    run = LeanTrace(simulate_oplog(log, lean=True))
    made = F.with_fixes(run, native.hb_hazards(run, hb.HAZARD_KINDS, Hazard), fresh=True)
    assert made == reference
    names = [x for h in made for x in (h.first, h.second)]
    places = [x for h in made for x in (h.fix.before, h.fix.record_after)]
    for named in (names, places):
        assert len(named) - len(set(named)) >= 1000, len(named)  # (repeats, past 256)
        assert len({id(x) for x in named}) == len(set(named))
