"""The reader's fast path (msgspec) reads a line exactly as the checker does, or leaves it to it."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from streamsim.oplog import read
from streamsim.oplog.read import parse_oplog
from streamsim.sim.errors import ModelError

_names = st.sampled_from(["a", "b", "s1", "", "x y", "é"])
_values = st.one_of(st.integers(-2, 3), st.sampled_from([2**31, 2**63, 1e15, 1e16, -0.0, 2.5, True,
                                                         None, "1", [], {}]), _names)
_refs = st.one_of(st.lists(_names, max_size=3), st.lists(st.one_of(
    _names, st.fixed_dictionaries({"buffer": _names}, optional={
        "offset": st.integers(0, 4), "nbytes": st.integers(0, 4), "window": st.sampled_from(
            [[0, 1], [0.25, 0.75], [0.5, 0.25], [0, 2], [True, 1], "x", [0], [1e400, 1]])})),
    max_size=2), _values)
_fields = {"rank": _values, "host": _values, "stream": _values, "name": _values, "dur": _values,
           "step": _values, "event": _values, "reads": _refs, "writes": _refs, "handle": _values,
           "site": _values, "t": st.one_of(_values, st.sampled_from([0, 1, 1.5, 7, 7.0, 1e15])),
           "buffer": _values, "nbytes": _values, "label": _values, "blocking": _values,
           "inferred": st.one_of(_values, st.just("completion")), "tensors": _refs,
           "peer": _values, "group": st.one_of(_values, st.sampled_from(["pp", "cpu"])),
           "inputs": _refs, "outputs": _refs, "batch": st.one_of(_values, st.sampled_from([0, 1])),
           "any_source": st.one_of(_values, st.booleans())}
_ops = st.sampled_from(["launch", "host", "record", "wait_event", "sync_event", "sync_stream",
                        "sync_device", "alloc", "free", "record_stream", "wait", "isend", "irecv",
                        "send_object", "all_reduce", "all_gather", "broadcast", "reduce",
                        "nonsense", 3])
# a line that issues handle "b" (a wait on it is then valid): drawn before some lines
_ISSUE = '{"op": "isend", "tensors": ["a"], "peer": 1, "handle": "b"}' 


@st.composite
def _line(draw) -> str:
    keys = draw(st.lists(st.sampled_from(sorted(_fields)), max_size=4, unique=True))
    obj = {"op": draw(_ops), **{k: draw(_fields[k]) for k in keys}}
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0 and keys:  # a key given twice
        text = text[:-1] + f', "{keys[0]}": {json.dumps(obj[keys[0]])}}}'
    if draw(st.integers(0, 19)) == 0:
        text = text[:-1]  # malformed
    return text


def _outcome(text: str, path: str):
    """The parsed log, or the first error message, read by ``path``: ``compiled`` (the compiled
    reader, streamsim/native/_decode.pyx, where built), ``fast`` (the Python fast path) or
    ``checker`` (neither: every line through the checker)."""
    with pytest.MonkeyPatch.context() as m:
        if path != "compiled":
            m.setenv("STREAMSIM_NATIVE", "0")
        if path == "checker":
            m.setattr(read, "SMALL_LOG", float("inf"))  # (every log: the checker's alone)
        try:
            return parse_oplog(text, "f.jsonl")
        except ModelError as e:
            return str(e)


@settings(max_examples=400, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=6))
def test_fast_path_reads_every_line_as_the_checker(lines):
    """Right or wrong types, ranges, missing and repeated keys, ref objects, other ops: the parsed
    log, or the first error message, is the same with and without the fast path, compiled or
    not."""
    text = "\n".join(lines) + "\n"
    if any('"wait"' in x for x in lines):
        text = _ISSUE + "\n" + text
    checker = _outcome(text, "checker")
    assert _outcome(text, "fast") == checker
    assert _outcome(text, "compiled") == checker


@pytest.mark.parametrize("line", [
    '{"op": "launch", "writes": ["a"], "writes": ["b"]}',
    '{"op": "record", "event": "e", "event": "f"}',
    '{"op": "launch", "dur": 1, "dur": 2}',
])
def test_a_key_given_twice_is_still_an_error(line):
    """msgspec keeps the last of two equal keys; the reader still names the repeated field."""
    with pytest.raises(ModelError, match="duplicate field"):
        parse_oplog(line + "\n", "d.jsonl")


def test_the_fast_path_takes_the_common_lines():
    """A kernel, an event record and wait, a sync: read without the checker's JSON decoder."""
    from streamsim.oplog.fastpath import fast_spec
    parser = read._Parser("f.jsonl")
    for line in ('{"op": "launch", "stream": "s0", "reads": ["a"], "writes": ["b"], "dur": 2}',
                 '{"op": "record", "event": "e"}', '{"op": "wait_event", "event": "e"}',
                 '{"op": "sync_device"}'):
        assert fast_spec(parser, line) is not None, line


@pytest.mark.parametrize("first", ['{"op": "launch", "writes": ["x"]}', '{"op": "sync_device"}',
                                   '{"op": "alloc", "buffer": "x"}',
                                   '{"op": "record", "event": "e", "t": 1, "site": "a.py:1 f"}'])
def test_a_config_after_a_fast_line_is_an_error(first):
    """A ``config`` declaration comes before the first op: after a line the fast path took, it
    was accepted and its launch overhead applied to the ops before it (the fast paths did not
    note that an op had been seen)."""
    text = first + '\n{"op": "config", "launch_overhead": 5}\n'
    want = "f.jsonl:2: a 'config' declaration comes once, before the first op"
    assert _outcome(text, "checker") == _outcome(text, "fast") == _outcome(text, "compiled") == want


_SEND = '{"op": "isend", "tensors": ["a"], "peer": 1, "batch": 0%s}'


@pytest.mark.parametrize("lines, error", [
    ([_SEND % "", '{"op": "launch"}', _SEND % ""], "was ended by an earlier line"),
    ([_SEND % "", _SEND % ', "group": "qq"'], "every line of a batch names the same group"),
    ([_SEND % "", _SEND % ', "stream": "s1"'], "every line of a batch names the same group"),
    ([_SEND % "", _SEND % "", '{"op": "irecv", "tensors": ["b"], "peer": 1, "batch": 1}'], None),
    (['{"op": "group", "group": "g", "backend": "gloo"}', _SEND % ', "group": "g"'],
     "is for NCCL groups"),
])
def test_the_batch_rule_reads_the_same(lines, error):
    """A batch's lines are consecutive lines of one thread on one group and stream: a fast path
    takes a batched send only when the rule holds, so the checker words each breach."""
    text = "\n".join(lines) + "\n"
    got = [_outcome(text, path) for path in ("checker", "fast", "compiled")]
    assert got[0] == got[1] == got[2]
    if error is None:
        assert not isinstance(got[0], str), got[0]
    else:
        assert error in got[0], got[0]


def test_a_lone_surrogate_in_text_is_left_to_the_checker():
    """Text handed to parse_oplog (not a file, which is decoded strictly) may hold a lone surrogate:
    msgspec raised UnicodeEncodeError, a traceback; the line goes to the checker instead."""
    text = '{"op": "launch", "name": "a\ud800b"}\n'
    assert _outcome(text, "fast") == _outcome(text, "checker") == _outcome(text, "compiled")
