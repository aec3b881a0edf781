"""The compiled JSON tables (streamsim/native/_jsonv4.pyx) write the reference's text
(streamsim/report/jsonv4.py: a block of ``ops.rows`` or ``hazards`` through orjson, made json's
by ``jsontext.repaired``), byte for byte: on every model's report (each variant: micro-batches,
steps, fixes of every kind), on generated op logs (several ranks, jitter), and on hand-made ops and
hazards holding every value a JSON writer treats apart (strings with quotes, backslashes, control
characters, DEL, non-ASCII and characters above U+FFFF, lone surrogates; floats below 1e-4, above
1e16, -0.0, NaN and infinities; ints past 64 bits; booleans and None). A value it does not write
(a list, an op of a subclass) makes it decline, and the reference writes the block. Each
comparison asserts that the compiled writer ran. Skipped where ``_jsonv4`` was not built; under CI
a missing module fails instead."""
from __future__ import annotations

import json
import math

import pytest

from streamsim import native
from streamsim.analysis.checks import analyse
from streamsim.analysis.findings import Findings, Fix, Hazard
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.report.jsontext import encode_compact, repaired
from streamsim.report.jsonv4 import hazard_v4, named_ops, op_row
from streamsim.sim.runner import simulate
from streamsim.trace import HOST, STREAM, Agent, Op, Trace

from .built import model_trace, model_variants, required, variant_id
from .test_metrics import _generator, lean_runs

pytestmark = required("_jsonv4", "the compiled JSON tables")



def reference_rows(trace: Trace, ids: list[int]) -> str:
    return repaired(b",".join(b'\n      "%d":%s' % (i, encode_compact(op_row(trace.op(i))))
                              for i in ids))


def reference_hazards(hazards: list[Hazard]) -> str:
    return repaired(b",".join(b"\n    " + encode_compact(hazard_v4(h)) for h in hazards))


def assert_same(monkeypatch, trace: Trace, hazards: list[Hazard], what: str) -> None:
    """The rows of the ops the hazards name and the hazards' entries: written by the compiled
    writer, the reference's text."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    from streamsim.analysis.findings import Findings
    ids = named_ops(Findings(hazards=tuple(hazards))) or [op.id for op in trace.ops]
    # (the ids the hazards name, compiled: as the reference collects them)
    compiled_ids = native.hazard_op_ids(tuple(hazards), len(trace.ops))
    assert compiled_ids is not None, f"{what}: the compiled named ids declined"
    assert compiled_ids == named_ops(Findings(hazards=tuple(hazards))), f"{what}: other ids"
    assert named_ops(Findings(hazards=tuple(hazards)), len(trace.ops)) == compiled_ids, what
    rows = native.op_rows(trace.ops, ids)
    assert rows is not None, f"{what}: the compiled op rows declined"
    assert rows == reference_rows(trace, ids), what
    entries = native.hazard_entries(list(hazards))
    assert entries is not None, f"{what}: the compiled hazard entries declined"
    assert entries == reference_hazards(hazards), what


@pytest.mark.parametrize("path,variant", model_variants(), ids=variant_id)
def test_every_model_variant_has_the_references_tables(monkeypatch, path, variant):
    trace = model_trace(path, variant)
    assert_same(monkeypatch, trace, list(analyse(trace).hazards), f"{path.name} {variant}")


def test_a_run_kept_as_columns_has_the_references_rows_without_its_ops(monkeypatch, tmp_path):
    """A run the compiled replay kept as columns (``LeanTrace``) has the rows of every op written
    from them (``native.op_rows_of``): the reference's text of the same run's ops, with no op
    made (the ops of a made trace, or of a subclass, are read as before). A log whose name
    json escapes has its locations written as the reference writes them too."""
    compared = 0
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    runs = [*lean_runs(tmp_path, 100), *lean_runs(tmp_path, 50, name='lo"g\\ é\t.jsonl')]
    for i, trace, lean in runs:
        ids = list(range(len(trace.ops)))
        assert native.op_rows(None, ids, lean.columns) == reference_rows(trace, ids), \
            f"generated log {i}"
        assert native.op_rows_of(lean, ids[::3]) == reference_rows(trace, ids[::3]), i
        assert not lean.__dict__["_alone"] and not lean.made, f"generated log {i}: ops made"
        assert native.op_rows(None, [len(ids)], lean.columns) is None  # (no such op: declined)
        compared += 1
    assert compared >= 50, compared


def test_generated_logs_have_the_references_tables(monkeypatch, tmp_path):
    gen = _generator()
    path = tmp_path / "gen.jsonl"
    for i in range(150):
        path.write_text(gen.generated_log(i))
        seed, jitter = gen.TIMINGS[i % len(gen.TIMINGS)]
        trace = simulate_oplog(load_oplog(path), seed=seed, jitter=jitter)
        assert_same(monkeypatch, trace, list(analyse(trace).hazards), f"generated log {i}")


STRINGS = ['plain', 'q"uote', 'back\\slash', 'tab\tnew\nline\rcr', '\x00\x01\x1f\x7f',
           '\b\f', 'é', 'ß€', '\U0001f600 emoji', 'lone \ud800 surrogate', '', '/slash',
           'café', 'del\x7f', 'end"', 'x' * 300]  # (a plain run, then a character escaped)
FLOATS = [0.0, -0.0, 1e-05, 1e-4, 0.00012, 5e-324, 1e16, 1.5e300, 1.7976931348623157e308,
          123.456, 1 / 3, 100.0, float("nan"), float("inf"), float("-inf")]
INTS = [0, 7, -3, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63, 2 ** 70, -2 ** 70]


def corners() -> tuple[Trace, list[Hazard]]:
    """Ops and hazards holding every value the writers treat apart."""
    agents = [Agent(0, HOST, "main"), Agent(1, STREAM, 'we"ird\\é'), Agent(2 ** 64, STREAM, "big")]
    ops = []
    for k in range(max(len(STRINGS), len(FLOATS), len(INTS)) * 2):
        s, x, n = STRINGS[k % len(STRINGS)], FLOATS[k % len(FLOATS)], INTS[k % len(INTS)]
        mb = (s, x, n, None, True, False)[k % 6]
        ops.append(Op(id=k, agent=agents[k % 3], index=k, kind="launch", name=s, enqueued=x,
                      start=x, end=FLOATS[(k + 3) % len(FLOATS)], start_seq=2 * k,
                      end_seq=2 * k + 1, location=STRINGS[(k + 1) % len(STRINGS)] or None,
                      step=n if k % 2 else None, line=k if k % 3 else None,
                      attrs={"microbatch": mb} if k % 5 else {}))
    trace = Trace(ops=tuple(ops), agents=tuple(agents))
    hazards = []
    for k in range(len(ops) - 1):
        fix = None if k % 4 == 0 else Fix(
            ("event", "wait_handle", "record_stream")[k % 3], STRINGS[k % len(STRINGS)], k + 1,
            k if k % 2 else None, (k + 2) % len(ops) if k % 3 else None,
            agents[k % 3] if k % 2 else None, agents[(k + 1) % 3] if k % 5 else None)
        hazards.append(Hazard(("RAW", "WAR", "WAW", "use-after-free")[k % 4], INTS[k % len(INTS)],
                              STRINGS[k % len(STRINGS)], (INTS[k % len(INTS)], k), k, k + 1,
                              "read", "write", bool(k % 2), fix))
    return trace, hazards


def test_every_kind_of_value_is_written_as_the_reference_writes_it(monkeypatch):
    trace, hazards = corners()
    assert_same(monkeypatch, trace, hazards, "corners")
    text = native.op_rows(trace.ops, [op.id for op in trace.ops])
    rows = json.loads("{" + text + "}")  # (and it is JSON: NaN and infinities as null)
    assert rows[str(len(FLOATS) - 3)][6] is None and math.isnan(FLOATS[-3])


def test_a_value_it_does_not_write_leaves_the_block_to_the_reference(monkeypatch):
    """A list where a row has a micro-batch, an op of a subclass, a hazard of a subclass, a fix
    placed by injection key (a tuple): None, and the report's writer uses the reference."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    trace, hazards = corners()

    class SubOp(Op):
        __slots__ = ()

    class SubHazard(Hazard):
        __slots__ = ()
    listed = Op(id=0, agent=trace.ops[0].agent, index=0, kind="launch", name="x", enqueued=0.0,
                start=0.0, end=1.0, start_seq=0, end_seq=1, attrs={"microbatch": [1, 2]})
    sub = SubOp(id=0, agent=trace.ops[0].agent, index=0, kind="launch", name="x", enqueued=0.0,
                start=0.0, end=1.0, start_seq=0, end_seq=1)
    for op in (listed, sub):
        assert native.op_rows((op,), [0]) is None
    h = hazards[1]
    keyed = Hazard(h.kind, h.rank, h.buffer, h.range, h.first, h.second, h.first_mode,
                   h.second_mode, h.manifest, Fix("event", "t", (0, "launch", "f.py:1", 0)))
    sub_h = SubHazard(h.kind, h.rank, h.buffer, h.range, h.first, h.second, h.first_mode,
                      h.second_mode, h.manifest, h.fix)
    for bad in (keyed, sub_h):
        assert native.hazard_entries([h, bad]) is None
    assert reference_rows(Trace(ops=(listed,), agents=(listed.agent,)), [0]).endswith(
        "[1,2],null]")


def test_the_comparison_catches_a_wrong_character(monkeypatch):
    """The test can fail: a writer that escapes one character otherwise is caught."""
    trace, hazards = corners()
    compiled = native.op_rows
    monkeypatch.setattr(native, "op_rows",
                        lambda ops, ids: compiled(ops, ids).replace("\\u00e9", "\\u00E9"))
    with pytest.raises(AssertionError, match="corners"):
        assert_same(monkeypatch, trace, hazards, "corners")


def test_ids_that_are_not_positions_leave_the_named_ops_to_the_reference(monkeypatch):
    """The compiled collection flags ids by position: an id past the trace's ops, or not an int,
    or a hazard with a field never set, makes it decline, and the reference collects them as
    they are."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    from streamsim.analysis.findings import Findings
    h = Hazard("RAW", 0, "x", (0, 4), 1, 3, "write", "read", True,
               Fix("event", "t", 2, None, 0, None, None))
    assert native.hazard_op_ids((h,), 4) == [0, 1, 2, 3]
    for bad in (Hazard("RAW", 0, "x", (0, 4), 1, 7, "write", "read", True),
                Hazard("RAW", 0, "x", (0, 4), 1.0, 3, "write", "read", True)):
        assert native.hazard_op_ids((bad,), 4) is None
        assert named_ops(Findings(hazards=(bad,)), 4) == sorted({bad.first, bad.second})
    unset = object.__new__(Hazard)  # (no field set: declined, not an AttributeError)
    assert native.hazard_op_ids((h, unset), 4) is None


def test_the_writer_gives_a_float_the_text_repr_gives_it():
    """A float's text is ``repr``'s (``null`` for a NaN or an infinity): on 1,000,000 floats
    of the kinds a report holds and of none (decimals of 0 to 9 places across every magnitude
    the writer takes without dtoa, their neighbours one ulp away, running sums of durations
    (a third of them 17 digits, of which two neighbours read back), exact ties between two
    decimals, the edges of that range and of 2**53, and random bits), each written as one
    writer writes them in turn (its cache of recent texts too)."""
    from streamsim.native._jsonv4 import float_texts
    import random
    import struct
    rng = random.Random(7)
    xs: list[float] = []
    for _ in range(200_000):
        places = rng.randrange(10)
        x = round(rng.uniform(-1, 1) * 10.0 ** rng.uniform(-5, 16), places)
        xs += [x, math.nextafter(x, math.inf), math.nextafter(x, -math.inf)]
    t = 0.0
    for _ in range(200_000):
        t += round(rng.uniform(0, 50), rng.randrange(5))
        xs.append(t)
    for _ in range(20_000):  # (halves of odd eighths near 1e14: decimals of two places
        j = rng.randrange(2 ** 46, 2 ** 49) * 2 + 1  # half-way between two that read back)
        xs += [j / 8, j / 16, -j / 4]
    edges = [1e-4, 1e15, 2.0 ** 53, 0.0, -0.0, 5e-324, 1.7976931348623157e308]
    edges += [2.0 ** 53 / 10 ** k for k in range(18)]
    for x in edges:
        y = x
        for _ in range(50):
            xs += [y, -y]
            y = math.nextafter(y, math.inf)
        y = x
        for _ in range(50):
            xs += [y, -y]
            y = math.nextafter(y, -math.inf)
    while len(xs) < 1_000_000:
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        xs.append(x)
    xs += [math.nan, math.inf, -math.inf]
    want = "\n".join(repr(x) if math.isfinite(x) else "null" for x in xs)
    got = float_texts(xs)
    if got != want:
        bad = next(x for x, a, b in zip(xs, got.split("\n"), want.split("\n")) if a != b)
        raise AssertionError(f"{bad!r} written as {float_texts([bad])!r}")


def test_the_writer_takes_the_named_ops_a_block_at_a_time(monkeypatch, tmp_path):
    """The JSON writer takes the ids of the ops a report names a block at a time, made from a
    flag an op (``native.hazard_op_id_blocks``), never a list of them all, nor a set to add the
    ops a warning names (at 1,000,000 lines of the random program 742,258 ints in a list and
    in a set: the peak of ``check --format json`` 397.1 -> 293.0 MiB).
    Joined, the blocks are the reference's ids, warnings' ops included; none is longer than
    asked; a warning's op that is no position leaves it to the reference."""
    from streamsim.analysis.checks import analyse
    from streamsim.analysis.findings import Warning
    from streamsim.report.jsonv4 import _named_op_blocks
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compared = 0
    for i, trace, lean in lean_runs(tmp_path, 60):
        f = analyse(trace)
        n = len(trace.ops)
        warned = Findings(hazards=f.hazards, warnings=(Warning("x", "m", n - 1),
                                                       Warning("x", "m", 0)))
        for findings in (f, warned):
            want = named_ops(findings)
            got = native.hazard_op_id_blocks(findings.hazards, n,
                                             [w.op for w in findings.warnings], 7)
            assert got is not None, f"log {i}: declined"
            blocks = list(got)
            assert all(0 < len(b) <= 7 for b in blocks), f"log {i}"
            assert [x for b in blocks for x in b] == want, f"log {i}"
            assert [x for b in _named_op_blocks(findings, n) for x in b] == want, f"log {i}"
        compared += 1
    assert compared >= 50
    assert native.hazard_op_id_blocks((), 4, [7], 8) is None  # (no op 7: the reference)
