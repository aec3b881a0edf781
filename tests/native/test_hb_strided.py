"""The compiled HB pass on strided views (``x[:, 0::2]``: a view that touches only some bytes of
its hull): it keeps the reference's mixed segments (streamsim/analysis/hb.py), so it gives the
reference's hazards (every field, in order) and issue positions, and it runs (a trace with a
strided view no longer hands the whole pass to the reference). The reference itself is held to
oracles byte by byte in tests/analysis/test_hb.py."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsim import native
from streamsim.analysis import hb
from streamsim.analysis.findings import RAW, USE_AFTER_FREE, WAR, WAW
from streamsim.trace import Trace, issue_keys

from ..analysis.test_hb import random_traces
from .built import required

pytestmark = required("_hb", "the compiled core")
NAMES = (RAW, WAR, WAW, USE_AFTER_FREE)


@pytest.fixture(autouse=True, scope="module")
def compiled_on():
    """The compiled pass on, even in a run with STREAMSIM_NATIVE=0 (the suite's pure-Python
    run): these tests compare it with the reference."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("STREAMSIM_NATIVE", raising=False)
        yield


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_traces(strided=True))
def test_strided_traces_give_the_references_hazards_compiled(t: Trace):
    assert native.available()
    assert native.hb_rows(t, issue_keys(t), NAMES) is not None  # (it ran, not the reference)
    compiled = hb.hb_pass(t)
    reference = hb.hb_pass(t, keep_clocks=True)  # (kept clocks: always the reference)
    assert compiled.hazards == reference.hazards
    assert compiled.position == reference.position


# A strided write of x's even bytes (hull [0, 15)) on stream a, then two plain reads of exactly
# that hull: one on a (after the write), one on b (unordered with it: a RAW).
REMEMBERED = (
    '{"op": "alloc", "stream": "a", "buffer": "x", "nbytes": 16}\n'
    '{"op": "launch", "stream": "a", "name": "w", "writes": [{"buffer": "x", "offset": 0, '
    '"sizes": [8], "strides": [2], "itemsize": 1}]}\n'
    '{"op": "launch", "stream": "a", "name": "r1", "reads": [{"buffer": "x", "nbytes": 15}]}\n'
    '{"op": "launch", "stream": "b", "name": "r2", "reads": [{"buffer": "x", "nbytes": 15}]}\n')


def test_a_plain_view_does_not_remember_a_mixed_segment(tmp_path):
    """A plain view whose bytes are exactly one segment remembers it (the fast path of its next
    access), but not a mixed one, whose writes are in its list: the second read, unordered with
    the strided write, is a RAW on both paths (remembering the mixed segment lost it)."""
    from streamsim.oplog import load_oplog, simulate_oplog
    path = tmp_path / "remembered.jsonl"
    path.write_text(REMEMBERED)
    t = simulate_oplog(load_oplog(path))
    assert native.hb_rows(t, issue_keys(t), NAMES) is not None
    compiled = hb.hb_pass(t)
    assert compiled.hazards == hb.hb_pass(t, keep_clocks=True).hazards
    assert [(h.kind, t.op(h.first).name, t.op(h.second).name) for h in compiled.hazards] == \
        [(RAW, "w", "r2")]


@st.composite
def same_shapes_many_offsets(draw) -> str:
    """An op log whose strided refs repeat two shapes at many offsets of one buffer (a tensor
    split the same way at every step, per-head or per-column slices), with plain refs and event
    syncs between two streams: what the compiled pass's remembered answers serve (they are keyed
    by the pattern and the offsets' differences, so a key that lost an offset would answer one
    view's question with another's)."""
    shapes = draw(st.lists(st.tuples(st.lists(st.integers(1, 4), min_size=1, max_size=2),
                                     st.lists(st.integers(1, 9), min_size=2, max_size=2),
                                     st.integers(1, 2)), min_size=1, max_size=2))
    lines = ['{"op": "alloc", "stream": "a", "buffer": "x", "nbytes": 160}']
    for i in range(draw(st.integers(2, 24))):
        stream = draw(st.sampled_from("ab"))
        if draw(st.integers(0, 5)) == 0:
            other = "b" if stream == "a" else "a"
            lines.append(f'{{"op": "record", "stream": "{other}", "event": "e{i}"}}')
            lines.append(f'{{"op": "wait_event", "stream": "{stream}", "event": "e{i}"}}')
        if draw(st.integers(0, 3)) == 0:
            lo = draw(st.integers(0, 40))
            ref = f'{{"buffer": "x", "offset": {lo}, "nbytes": {draw(st.integers(1, 40))}}}'
        else:
            sizes, strides, item = draw(st.sampled_from(shapes))
            ref = json.dumps({"buffer": "x", "offset": draw(st.integers(0, 20)), "sizes": sizes,
                              "strides": strides[:len(sizes)], "itemsize": item})
        side = draw(st.sampled_from(("reads", "writes")))
        lines.append(f'{{"op": "launch", "stream": "{stream}", "name": "k{i}", "{side}": [{ref}]}}')
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(same_shapes_many_offsets())
def test_views_of_one_shape_at_many_offsets_give_the_references_hazards(text: str):
    """Property: on logs of a few strided shapes at many offsets of one buffer, the compiled
    pass reports the reference's hazards in its order (the answers it remembers of one view
    serve another of the same shape only where the offsets' differences agree)."""
    from streamsim.oplog import parse_oplog, simulate_oplog
    t = simulate_oplog(parse_oplog(text, "shapes.jsonl"))
    assert native.hb_rows(t, issue_keys(t), NAMES) is not None
    assert hb.hb_pass(t).hazards == hb.hb_pass(t, keep_clocks=True).hazards
