"""The compiled pass computes the trace's issue keys itself (from the fields it reads of each op
anyway), instead of taking ``streamsim.trace.issue_keys``'s: the order it processes ops in and
every hazard row must be those that the reference's keys give, in each of issue_keys's cases (a
model's round-robin, an op log's lines, a fix's inserted action without a line, a hand-built
trace whose stream ops name no issuer). Each test fails if the compiled keys order any op
differently."""
from __future__ import annotations

import os

import pytest

from streamsim import load_model, native, simulate
from streamsim.analysis.checks import analyse, distinct_fixes
from streamsim.analysis.findings import RAW, USE_AFTER_FREE, WAR, WAW
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.sim.inject import key_fixes
from streamsim.trace import HOST, STREAM, Access, Agent, View, WRITE, READ, issue_keys, \
    trace_from_ops

from .built import required

NAMES = (RAW, WAR, WAW, USE_AFTER_FREE)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = required("_hb", "the compiled core")

# two streams of one rank race on x, a second rank's thread in between (threads interleave)
LOG = ('{"op": "launch", "stream": "a", "writes": ["x"]}\n'
       '{"op": "launch", "rank": 1, "stream": "c", "writes": ["y"]}\n'
       '{"op": "launch", "stream": "b", "reads": ["x"]}\n'
       '{"op": "launch", "stream": "a", "writes": ["x"]}\n')


def assert_own_keys_are_issue_keys(trace) -> None:
    given = native.hb_rows(trace, issue_keys(trace), NAMES)
    own = native.hb_rows(trace, None, NAMES)
    assert given is not None and own == given


def fixed(trace, rerun):
    """``trace`` re-run with its proposed fixes (host actions a fix inserted: no line)."""
    keyed = key_fixes(trace, distinct_fixes(analyse(trace).hazards))
    assert keyed
    return rerun(keyed)


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)


def test_a_model_run_and_its_fixed_run():
    model = load_model(os.path.join(ROOT, "models", "vllm_pp.py"))
    args = ("regressed_49274", ["requests=2", "decode_steps=3"])
    trace = simulate(model, *args)
    assert_own_keys_are_issue_keys(trace)
    assert_own_keys_are_issue_keys(fixed(trace, lambda k: simulate(model, *args, fixes=k)))


def test_an_op_log_and_its_fixed_run(tmp_path):
    path = tmp_path / "race.jsonl"
    path.write_text(LOG)
    log = load_oplog(path)
    trace = simulate_oplog(log)
    assert any(op.line is not None for op in trace.ops)
    assert_own_keys_are_issue_keys(trace)
    again = fixed(trace, lambda k: simulate_oplog(log, fixes=k))
    assert any(op.line is None and op.agent.kind == HOST for op in again.ops)
    assert_own_keys_are_issue_keys(again)


def test_a_hand_built_trace_whose_stream_ops_name_no_issuer():
    """issue_keys falls back to op ids: the later-issued write, first in the trace, goes first."""
    x = View(0, "x", 0, 64)
    a, b = Agent(0, STREAM, "a"), Agent(0, STREAM, "b")
    h = Agent(0, HOST, "main")
    trace = trace_from_ops([
        dict(name="host", agent=h, kind="host"),
        dict(name="w", agent=a, kind="launch", accesses=[Access(x, WRITE)]),
        dict(name="r", agent=b, kind="launch", accesses=[Access(x, READ)]),
    ])
    assert issue_keys(trace) == [0, 1, 2]
    assert_own_keys_are_issue_keys(trace)
