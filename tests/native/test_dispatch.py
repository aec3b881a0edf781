"""The one dispatch point to the compiled HB pass falls back to the pure-Python reference, rather
than guessing or crashing, whenever it must: ``STREAMSIM_NATIVE=0``, the module not built, an op
kind it was not written for (new kinds arrive in streamsim/kinds.py before the compiled code knows
them), clocks kept, an ordering error the reference words."""
from __future__ import annotations

import dataclasses

import pytest

from streamsim import native
from streamsim.analysis import hb
from streamsim.analysis.findings import RAW, USE_AFTER_FREE, WAR, WAW
from streamsim.kinds import OP_KINDS
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.trace import Trace, issue_keys

from .built import required

NAMES = (RAW, WAR, WAW, USE_AFTER_FREE)
RACE = ('{"op": "launch", "stream": "a", "writes": ["x"]}\n'
        '{"op": "launch", "stream": "b", "reads": ["x"]}\n')
needs_build = required("_hb", "the compiled HB pass")  # (under CI, not built fails: built.py)


def race_trace(tmp_path) -> Trace:
    path = tmp_path / "race.jsonl"
    path.write_text(RACE)
    return simulate_oplog(load_oplog(path))


def test_covered_kinds_are_kinds():
    """Every kind the compiled pass claims is an op kind (a renamed kind cannot stay covered by
    its old name); kinds it does not list are allowed: they take the reference."""
    assert native.COVERED_KINDS <= set(OP_KINDS), sorted(native.COVERED_KINDS - set(OP_KINDS))


def test_streamsim_native_0_forces_pure_python(monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    trace = race_trace(tmp_path)
    assert not native.available() and native.path() == "python"
    assert native.hb_rows(trace, issue_keys(trace), NAMES) is None
    assert len(hb.hb_pass(trace).hazards) == 1  # (the reference ran)


def test_an_unbuilt_core_is_pure_python(monkeypatch, tmp_path):
    """A machine without a compiler: nothing to import, every pass in Python."""
    monkeypatch.setattr(native, "_compiled", None)
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    trace = race_trace(tmp_path)
    assert not native.built() and not native.available()
    assert len(hb.hb_pass(trace).hazards) == 1


@needs_build
def test_the_compiled_pass_runs_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    trace = race_trace(tmp_path)
    assert native.available() and native.path() == "native"
    rows, position, agent_of = native.hb_rows(trace, issue_keys(trace), NAMES)
    assert [r[2] for r in rows] == [RAW] and sorted(position) == list(range(len(trace.ops)))


@needs_build
def test_an_uncovered_kind_takes_the_reference(monkeypatch, tmp_path):
    """An op of a kind the compiled pass does not list: it declines, and hb_pass gives the
    reference's result."""
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    trace = race_trace(tmp_path)
    ops = list(trace.ops)
    ops[0] = dataclasses.replace(ops[0], kind="a_kind_added_later")  # (not covered)
    odd = dataclasses.replace(trace, ops=tuple(ops))
    assert native.hb_rows(odd, issue_keys(odd), NAMES) is None
    monkeypatch.setattr(native, "COVERED_KINDS", native.COVERED_KINDS | {"a_kind_added_later"})
    assert native.hb_rows(odd, issue_keys(odd), NAMES) is not None  # (it was the kind)


@needs_build
def test_kept_clocks_take_the_reference(monkeypatch, tmp_path):
    """The compiled pass keeps no clocks: hb_pass(keep_clocks=True) never asks it."""
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    asked = []
    monkeypatch.setattr(native, "hb_rows", lambda *a: asked.append(a))
    got = hb.hb_pass(race_trace(tmp_path), keep_clocks=True)
    assert not asked and got.hb.starts


@needs_build
def test_an_ordering_cycle_is_worded_by_the_reference(monkeypatch, tmp_path):
    """A trace whose edges form a cycle: the compiled pass declines, the reference raises its
    message."""
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    trace = race_trace(tmp_path)
    ops = list(trace.ops)
    first = min((op for op in ops if op.issuer is not None), key=lambda op: op.id)
    last = max(ops, key=lambda op: op.id)
    ops[first.id] = dataclasses.replace(first, after=(last.id,))
    ops[last.id] = dataclasses.replace(last, after=(*last.after, first.id))
    cyclic = dataclasses.replace(trace, ops=tuple(ops))
    assert native.hb_rows(cyclic, issue_keys(cyclic), NAMES) is None
    with pytest.raises(ValueError, match="cycle"):
        hb.hb_pass(cyclic)


STRIDED = ('{"op": "alloc", "stream": "a", "buffer": "x", "nbytes": 128}\n'
           '{"op": "launch", "stream": "a", "writes": [{"buffer": "x", "offset": 0, "sizes": [4, 4],'
           ' "strides": [8, 2], "itemsize": 4}]}\n'
           '{"op": "launch", "stream": "b", "writes": [{"buffer": "x", "offset": 4, "sizes": [4, 4],'
           ' "strides": [8, 2], "itemsize": 4}]}\n'
           '{"op": "launch", "stream": "b", "reads": ["x"]}\n')


@needs_build
def test_a_strided_view_runs_compiled_with_mixed_segments(monkeypatch, tmp_path):
    """Even and odd columns of one buffer written by two streams do not race; the full read
    after them races with the write it is not ordered after. The compiled pass keeps the
    reference's mixed segments (tests/native/test_hb_strided.py holds the two equal)."""
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    path = tmp_path / "strided.jsonl"
    path.write_text(STRIDED)
    trace = simulate_oplog(load_oplog(path))
    rows, _, _ = native.hb_rows(trace, issue_keys(trace), NAMES)
    assert [r[2] for r in rows] == [RAW]  # the full read, not the columns
    assert [h.kind for h in hb.hb_pass(trace).hazards] == [RAW]


@needs_build
@pytest.mark.parametrize("odd", ["op subclass", "after list", "access subclass",
                                 "view subclass", "accesses list"])
def test_what_its_slots_cannot_read_takes_the_reference(monkeypatch, tmp_path, odd):
    """The compiled pass reads ops, accesses and views from their slots (native/_slots.pxd):
    an op of a subclass (which may put a property where a slot was), a list where it reads a
    tuple, an access or view of a subclass: it declines, and hb_pass gives the reference's
    hazards (the same ones)."""
    from streamsim.trace import Access, Op, View
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    trace = race_trace(tmp_path)
    ops = list(trace.ops)
    i = next(k for k, op in enumerate(ops) if op.accesses)
    op = ops[i]
    if odd == "op subclass":
        class Sub(Op):
            __slots__ = ()
        ops[i] = Sub(*(getattr(op, f) for f in Op.__slots__))
    elif odd == "after list":
        ops[i] = dataclasses.replace(op, after=list(op.after))
    elif odd == "accesses list":
        ops[i] = dataclasses.replace(op, accesses=list(op.accesses))
    else:
        class SubAccess(Access):
            __slots__ = ()

        class SubView(View):
            __slots__ = ()
        acc = op.accesses[0]
        if odd == "access subclass":
            acc = SubAccess(acc.view, acc.mode, acc.window)
        else:
            v = acc.view
            acc = Access(SubView(v.rank, v.buffer, v.offset, v.nbytes, v.pattern), acc.mode,
                         acc.window)
        ops[i] = dataclasses.replace(op, accesses=(acc, *op.accesses[1:]))
    other = dataclasses.replace(trace, ops=tuple(ops))
    assert native.hb_rows(trace, issue_keys(trace), NAMES) is not None
    assert native.hb_rows(other, issue_keys(other), NAMES) is None
    assert [(h.kind, h.first, h.second) for h in hb.hb_pass(other).hazards] == \
        [(h.kind, h.first, h.second) for h in hb.hb_pass(trace).hazards]


@needs_build
def test_a_byte_position_past_64_bits_takes_the_reference(monkeypatch):
    """A hand-built trace may name bytes past 2**64 (an op log or a model cannot: the reader and
    the API refuse them): the compiled pass's positions are 64-bit, so it declines and the
    reference (Python ints) finds the race. It once raised OverflowError instead."""
    from streamsim.trace import READ, STREAM, WRITE, Access, Agent, Op, View
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    a, b = Agent(0, STREAM, "a"), Agent(0, STREAM, "b")
    v = View(0, "x", 2 ** 64 + 5, 10)
    trace = Trace(ops=(Op(0, a, 0, "launch", "w", 0.0, 0.0, 1.0, 0, 1, (Access(v, WRITE),)),
                       Op(1, b, 0, "launch", "r", 0.0, 0.0, 1.0, 2, 3, (Access(v, READ),))),
                  agents=(a, b))
    assert native.hb_rows(trace, issue_keys(trace), NAMES) is None
    assert [(h.kind, h.range) for h in hb.hb_pass(trace).hazards] == \
        [(RAW, (2 ** 64 + 5, 2 ** 64 + 15))]


@needs_build
def test_an_index_or_line_past_a_c_int_takes_the_reference(monkeypatch):
    """The compiled pass keeps an op's index, issuer and line in C ints (4 bytes an op each,
    where 8 were): a hand-built trace whose op names an index or a line past 2**31 - 1 (an op
    log's lines and a run's indices cannot be) has the pass decline, and the reference, with
    Python ints, finds the same race as the pass does with small numbers."""
    from streamsim.trace import HOST, READ, STREAM, WRITE, Access, Agent, Op, View
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    host, a, b = Agent(0, HOST, "main"), Agent(0, STREAM, "a"), Agent(0, STREAM, "b")
    v = View(0, "x", 0, 10)

    def trace_of(index: int, line: int) -> Trace:
        return Trace(ops=(
            Op(0, host, index, "launch", "w", 0.0, 0.0, 0.0, 0, 1, (), line=line),
            Op(1, a, 0, "launch", "w", 0.0, 0.0, 1.0, 2, 3, (Access(v, WRITE),), issuer=0),
            Op(2, host, index + 1, "launch", "r", 0.0, 0.0, 0.0, 4, 5, (), line=line + 1),
            Op(3, b, 0, "launch", "r", 0.0, 0.0, 1.0, 6, 7, (Access(v, READ),), issuer=2)),
            agents=(host, a, b))
    small = trace_of(3, 10)
    assert native.hb_rows(small, None, NAMES) is not None
    want = [(h.kind, h.first, h.second) for h in hb.hb_pass(small).hazards]
    assert want == [(RAW, 1, 3)]
    for index, line in ((2 ** 31, 10), (3, 2 ** 31), (2 ** 40, 2 ** 40)):
        big = trace_of(index, line)
        assert native.hb_rows(big, None, NAMES) is None, (index, line)
        assert [(h.kind, h.first, h.second) for h in hb.hb_pass(big).hazards] == want


@needs_build
def test_a_hazard_count_is_the_number_of_hazards_on_both_paths(monkeypatch):
    """Fix costing counts what a re-run's fixes left (``hb.hazard_count``): the compiled pass
    counts its findings without making them; the count is the number of hazards the pass
    reports, on both paths, for every model's run and generated logs with hazards."""
    from .built import model_trace, model_variants
    from .test_replay import covered_log
    from .test_differential import load_oplog_text
    traces = [model_trace(p, v) for p, v in model_variants()]
    traces += [simulate_oplog(load_oplog_text(covered_log(seed))) for seed in range(30)]
    some = 0
    for trace in traces:
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        compiled = native.hazard_count(trace, (RAW, WAR, WAW, USE_AFTER_FREE))
        assert compiled is not None  # (the compiled pass counted it)
        counts = {compiled, hb.hazard_count(trace), len(hb.analyse_hazards(trace, fixes=False))}
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        counts |= {hb.hazard_count(trace), len(hb.analyse_hazards(trace, fixes=False))}
        assert len(counts) == 1, counts
        some += compiled > 0
    assert some >= 10, some


_NOT_BY_ID = r'''
import dataclasses, sys
from streamsim import native
from streamsim.analysis.findings import RAW, USE_AFTER_FREE, WAR, WAW
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.trace import issue_keys
trace = simulate_oplog(load_oplog(sys.argv[1]))
ops = list(trace.ops)
which = sys.argv[2]
if which == "past":
    ops[1] = dataclasses.replace(ops[1], id=10 ** 6)
elif which == "negative":
    ops[1] = dataclasses.replace(ops[1], id=-3)
elif which == "twice":
    ops[1] = dataclasses.replace(ops[1], id=0)
else:
    ops[0], ops[1] = ops[1], ops[0]
bad = dataclasses.replace(trace, ops=tuple(ops))
names = (RAW, WAR, WAW, USE_AFTER_FREE)
print(native.hazard_count(bad, names), native.hb_rows(bad, None, names))
'''


@needs_build
@pytest.mark.parametrize("which", ["past", "negative", "twice", "swapped"])
def test_ops_not_stored_by_id_take_the_reference(monkeypatch, tmp_path, which):
    """A hand-built trace whose ops are not stored by id (``Trace.op``'s rule: an id past the
    ops, a negative one, one id twice, two ops swapped): the compiled pass, whose per-op arrays
    are indexed by id, declines, and the reference says what is wrong. It once wrote past its
    arrays (a segmentation fault) or read the wrong op. Run in a child, so that a crash fails
    this test, not the suite."""
    import subprocess
    import sys
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    path = tmp_path / "race.jsonl"
    path.write_text(RACE)
    got = subprocess.run([sys.executable, "-c", _NOT_BY_ID, str(path), which],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.split() == ["None", "None"], got.stdout
