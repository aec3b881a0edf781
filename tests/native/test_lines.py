"""An op log's lines as C rows (``streamsim.native._lines.Rows``): what the compiled reader hands
over as ``OpLog.lines`` and the compiled replay reads. A row gives back the very ``Line`` it was
made of (every field, its shared objects the same ones); the compiled reader keeps no ``Line``
object; a ``Line`` a row cannot hold as it is (a hand-built log's) leaves the replay to the
reference, to the same trace.

Skipped where the compiled modules were not built; under CI a missing module fails instead.
"""
from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest

from streamsim import native
from streamsim.oplog import read
from streamsim.oplog import replay as replay_mod
from streamsim.oplog.read import parse_oplog
from streamsim.oplog.replay import simulate_oplog
from streamsim.oplog.schema import Line

from .built import required
from .test_replay import covered_log, difference

pytestmark = [required("_lines", "the rows of an op log"),
              required("_replay", "the compiled replay"),
              required("_decode", "the compiled reader")]

# a log with a field of every kind a row holds: a wait's target, a query's result, a collective's
# ranks and root (the rare tuple), a declared group's dur None, t and site, steps, handles
EVERY_FIELD = "\n".join([
    '{"op": "group", "group": "pp", "ranks": [0, 1], "latency": 2.0}',
    '{"op": "alloc", "buffer": "x", "nbytes": 64, "label": "act", "t": 1.5, "site": "a.py:1 f"}',
    '{"op": "launch", "writes": ["x"], "dur": 2.0, "step": 3, "t": 2.0}',
    '{"op": "isend", "group": "pp", "tensors": ["x"], "peer": 1, "handle": "h"}',
    '{"op": "query", "handle": "h", "result": false}',
    '{"op": "wait", "handle": "h", "blocking": true}',
    '{"op": "irecv", "rank": 1, "group": "pp", "tensors": ["y"], "peer": 0, "handle": "r"}',
    '{"op": "wait", "rank": 1, "handle": "r"}',
    '{"op": "free", "buffer": "x", "t": 9.25}',
]) + "\n"


def rows():
    from streamsim.native import _lines
    return _lines


def lines_alive() -> int:
    """How many ``Line`` objects are alive (the garbage collector tracks them)."""
    return sum(type(o) is Line for o in gc.get_objects())


def compiled_read(text: str, monkeypatch, path: str = "t.jsonl"):
    """``text`` read by the compiled reader (a log this small: else the checker's alone)."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    monkeypatch.setattr(read, "SMALL_LOG", 0)
    return parse_oplog(text, path)


def test_a_row_gives_back_the_line_it_was_made_of(monkeypatch):
    """The pure-Python reader's Lines made rows read back equal, field by field, each shared
    field the very object the Line held; a query's result and a None dur and target too."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    lines = parse_oplog(EVERY_FIELD, "t.jsonl").lines
    assert type(lines) is tuple
    got = rows().rows_of(lines)
    assert len(got) == len(lines) and got == lines and list(got) == list(lines)
    for a, b in zip(got, lines):
        for f in dataclasses.fields(Line):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert x == y and type(x) is type(y), (a.lineno, f.name, x, y)
            if f.name in ("op", "path", "host", "reads", "writes", "site", "rare"):
                assert x is y, (a.lineno, f.name)
    assert got[-1] == lines[-1] and got[1:3] == lines[1:3]
    assert {ln.result for ln in got} == {None, False}
    assert pickle.loads(pickle.dumps(got)) == lines  # (a copy elsewhere: the Lines' tuple)


def test_the_compiled_reader_keeps_no_line(monkeypatch):
    """The compiled reader's lines are rows, 96 bytes each, and no ``Line`` object is alive
    once it has read a log (one is made only when Python reads a line)."""
    text = covered_log(3)
    gc.collect()
    before = lines_alive()
    log = compiled_read(text, monkeypatch)
    gc.collect()
    assert lines_alive() <= before  # (other tests' Lines may be alive: none is added)
    assert type(log.lines).__name__ == "Rows"
    assert rows().row_size() == 96
    assert log.lines.row_bytes() == 96 * len(log.lines)
    one = log.lines[0]  # (a Line made when read, alive while it is held)
    assert type(one) is Line and lines_alive() <= before + 1
    assert lines_alive() >= 1
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert log.lines == parse_oplog(text, "t.jsonl").lines


def test_the_replay_reads_rows_and_lines_to_one_trace(monkeypatch):
    """The compiled replay gives one trace whether it is handed the compiled reader's rows or
    the pure-Python reader's Lines (which it makes rows)."""
    text = covered_log(5)
    from_rows = compiled_read(text, monkeypatch)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    from_lines = parse_oplog(text, "t.jsonl")
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert type(from_lines.lines) is tuple and type(from_rows.lines).__name__ == "Rows"
    a = replay_mod._replayed_natively(from_rows, None, 0.0, 5_000_000, 1e12)
    b = replay_mod._replayed_natively(from_lines, None, 0.0, 5_000_000, 1e12)
    assert a is not None and b is not None
    assert difference(a, b) is None


@pytest.mark.parametrize("field, value", [("dur", 2), ("t", 2), ("result", 1),
                                          ("target", 2.0), ("lineno", True)])
def test_a_line_a_row_cannot_hold_is_left_to_the_reference(monkeypatch, field, value):
    """A hand-built Line whose own field is not of the readers' type (an int dur or t, a result
    that is not a bool, a target or line number that is not an int) is refused by the rows, and
    the log replays through the reference (the compiled replay declines), to its trace."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    log = parse_oplog(EVERY_FIELD, "t.jsonl")
    k = {"result": 3, "target": 4}.get(field, 1)  # (the query, the wait; else the launch)
    odd = list(log.lines)
    odd[k] = dataclasses.replace(odd[k], **{field: value})
    with pytest.raises(TypeError):
        rows().rows_of(odd)
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    hand = dataclasses.replace(log, lines=tuple(odd))
    assert replay_mod._replayed_natively(hand, None, 0.0, 5_000_000, 1e12) is None
    if field in ("dur", "t"):  # (an int equal to the float: the reference reads it so)
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        assert simulate_oplog(hand).ops == simulate_oplog(log).ops


def test_a_line_never_set_is_refused():
    """A Line with a field never set (``object.__new__``) is no row's."""
    ln = object.__new__(Line)
    with pytest.raises(TypeError):
        rows().rows_of([ln])


def test_rows_are_read_only_sequences(monkeypatch):
    """Indexing, negative indexing, slicing, iteration and length as a tuple's; out of range an
    IndexError; rows compare equal to the tuple of their Lines, and are not hashable."""
    log = compiled_read(EVERY_FIELD, monkeypatch)
    lines = log.lines
    as_tuple = tuple(lines)
    assert lines[-1] == as_tuple[-1] and lines[0] == as_tuple[0]
    assert lines[::2] == as_tuple[::2] and lines[5:100] == as_tuple[5:]
    with pytest.raises(IndexError):
        lines[len(lines)]
    assert lines == as_tuple and as_tuple == lines and not (lines != as_tuple)
    assert lines != as_tuple[:-1]
    with pytest.raises(TypeError):
        hash(lines)
    assert log.lines[3] is not log.lines[3] and log.lines[3] == log.lines[3]
    assert native.modules().count("_lines") == 1
