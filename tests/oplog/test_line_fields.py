"""A parsed line's rarely set fields (``schema.RARE_FIELDS``: a wait's ``blocking`` and
``inferred``, a batch member's ``batch``, an alloc's ``label``, ...) are kept in one tuple a
line, ``Line.rare``, not a slot each: 8 slots fewer, 64 bytes a line (a 1,000,000-line log's
check peaked 62 MB lower). What must not change is what a line says: every field reads as
before, on both readers (the compiled one and the reference), and a line is made of its fields
as before."""
from __future__ import annotations

import json
import sys

import pytest

from streamsim.oplog import Line, parse_oplog
from streamsim.oplog.schema import LINE_FIELDS, RARE_DEFAULTS, RARE_FIELDS

LOG = "".join(json.dumps(x) + "\n" for x in [
    {"op": "group", "group": "g", "backend": "nccl", "ranks": [0, 1]},
    {"op": "alloc", "buffer": "a", "nbytes": 64, "label": "act"},
    {"op": "launch", "writes": ["a"], "dur": 3},
    {"op": "isend", "group": "g", "tensors": ["a"], "peer": 1, "handle": "s0", "batch": 0},
    {"op": "isend", "group": "g", "tensors": ["a"], "peer": 1, "handle": "s1", "batch": 0},
    {"op": "wait", "handle": "s0", "blocking": True},
    {"op": "wait", "handle": "s1", "blocking": True},
    {"op": "irecv", "rank": 1, "group": "g", "tensors": ["b"], "peer": 0, "handle": "r0",
     "batch": 0},
    {"op": "irecv", "rank": 1, "group": "g", "tensors": ["b"], "peer": 0, "handle": "r1",
     "batch": 0},
    {"op": "wait", "rank": 1, "handle": "r0", "inferred": "completion"},
    {"op": "wait", "rank": 1, "handle": "r1"},
    {"op": "free", "buffer": "a"},
])


@pytest.fixture(params=["native", "python"])
def lines(request, monkeypatch):
    monkeypatch.setenv("STREAMSIM_NATIVE", "1" if request.param == "native" else "0")
    return parse_oplog(LOG, "t.jsonl").lines


def test_rare_fields_read_as_the_log_says_on_both_readers(lines):
    alloc, launch, send0, send1, wait0, wait1, recv0, recv1, inferred, plain, free = lines
    assert alloc.label == "act" and launch.label is None
    assert (send0.batch, send1.batch, recv0.batch, launch.batch) == (0, 0, 0, None)
    assert (wait0.blocking, wait1.blocking, plain.blocking) == (True, True, False)
    assert (inferred.inferred, plain.inferred) == ("completion", None)
    assert not any(ln.any_source or ln.channel or ln.root is not None or ln.ranks is not None
                   for ln in lines)


def test_a_line_of_default_rare_fields_keeps_none_and_equal_ones_share_one_tuple(lines):
    """(The memory saved: a tuple only where a rare field is set, one object for equal ones.)"""
    alloc, launch, send0, send1, wait0, wait1, recv0, recv1, inferred, plain, free = lines
    assert launch.rare is None and plain.rare is None and free.rare is None
    assert send0.rare is send1.rare is recv0.rare is recv1.rare
    assert wait0.rare is wait1.rare
    assert alloc.rare is not send0.rare


def test_both_readers_make_equal_lines(monkeypatch):
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    reference = parse_oplog(LOG, "t.jsonl").lines
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert parse_oplog(LOG, "t.jsonl").lines == reference


def test_a_line_is_made_of_its_fields_as_before():
    """The constructor takes every field, by name or in the order lines always had them, and
    ``dataclasses.replace`` keeps the rare ones or changes them."""
    import dataclasses
    made = Line(6, "wait", "t.jsonl", 0, "main", "compute", "", 1.0, None, (), (), None, None,
                None, None, "s0", None, True)
    assert made.blocking is True and made.handle == "s0" and made.rare[1] is True
    by_name = Line(lineno=6, op="wait", path="t.jsonl", handle="s0", blocking=True)
    assert by_name == made
    assert Line(1, "launch", "t.jsonl").rare is None
    assert tuple(getattr(Line(1, "launch", "t.jsonl"), f) for f in RARE_FIELDS) == RARE_DEFAULTS
    assert set(LINE_FIELDS) >= set(RARE_FIELDS) and "rare" not in LINE_FIELDS
    moved = dataclasses.replace(made, lineno=9)
    assert moved.lineno == 9 and moved.blocking is True and moved.handle == "s0"
    assert dataclasses.replace(made, blocking=False).rare is None
    assert dataclasses.replace(made, batch=4).rare[1:3] == (True, 4)


def test_a_line_is_208_bytes():
    """A slot added to every line costs 8 bytes a line (8 MB a million lines): one that few
    lines set belongs in RARE_FIELDS."""
    assert sys.getsizeof(Line(1, "launch", "t.jsonl")) <= 208
