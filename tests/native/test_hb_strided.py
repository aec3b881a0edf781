"""The compiled HB pass on strided views (``x[:, 0::2]``: a view that touches only some bytes of
its hull): it keeps the reference's mixed segments (streamsim/analysis/hb.py), so it gives the
reference's hazards (every field, in order) and issue positions, and it runs (a trace with a
strided view no longer hands the whole pass to the reference). The reference itself is held to
oracles byte by byte in tests/analysis/test_hb.py."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

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
