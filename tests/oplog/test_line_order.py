"""Between the host threads of one rank, line order is issue order for every piece of shared state
(issue 23, finding 3; docs/semantics.md, "Issue order"): an event's record and wait, two threads
enqueueing on one stream, a buffer's life. Before, these followed simulated time, so host work in
front of a line decided what a wait saw."""
from __future__ import annotations

import json

import pytest

from streamsim import analyse, check_oplog, parse_oplog, simulate_oplog


def log(*lines: dict) -> str:
    return "".join(json.dumps(x) + "\n" for x in lines)


def pairs(text: str, **opts) -> set:
    t = simulate_oplog(parse_oplog(text, "t.jsonl"), **opts)
    return {(h.kind, t.op(h.first).name, t.op(h.second).name) for h in analyse(t).hazards}


RUNS = [{}, {"seed": 0, "jitter": 2.0}, {"seed": 1, "jitter": 2.0}, {"seed": 7, "jitter": 0.5}]

# vLLM's async output thread has this shape: t1 produces and records, t2 (later lines) waits.
RECORD_THEN_WAIT = log(
    {"op": "host", "host": "t1", "name": "busy", "dur": 10},
    {"op": "launch", "host": "t1", "stream": "s1", "name": "produce", "writes": ["x"], "dur": 100},
    {"op": "record", "host": "t1", "stream": "s1", "event": "E"},
    {"op": "host", "host": "t2", "name": "tiny", "dur": 12},
    {"op": "wait_event", "host": "t2", "stream": "s2", "event": "E"},
    {"op": "launch", "host": "t2", "stream": "s2", "name": "consume", "reads": ["x"], "dur": 100},
)


@pytest.mark.parametrize("opts", RUNS)
def test_a_wait_written_after_another_threads_record_sees_it_under_every_seed(opts):
    """The issue's 6-line log: clean with no jitter and seed 1, but a RAW plus 'never recorded'
    under --seed 0 --jitter 2 before the change."""
    t = simulate_oplog(parse_oplog(RECORD_THEN_WAIT, "t.jsonl"), **opts)
    assert analyse(t).hazards == ()
    assert not any("never recorded" in n.text for n in t.notes)


@pytest.mark.parametrize("opts", RUNS)
def test_a_wait_written_before_another_threads_record_is_a_race_under_every_seed(opts):
    """The mirror case: the wait comes first in the log, behind host work; it saw no record, so
    the consumer races the producer (reported clean before: a real race missed)."""
    text = log(
        {"op": "launch", "host": "t1", "stream": "s1", "name": "produce", "writes": ["x"],
         "dur": 100},
        {"op": "host", "host": "t2", "name": "busy", "dur": 50},
        {"op": "wait_event", "host": "t2", "stream": "s2", "event": "E"},
        {"op": "record", "host": "t1", "stream": "s1", "event": "E"},
        {"op": "launch", "host": "t2", "stream": "s2", "name": "consume", "reads": ["x"],
         "dur": 100},
    )
    assert pairs(text, **opts) == {("RAW", "produce", "consume")}


@pytest.mark.parametrize("opts", RUNS)
def test_two_threads_enqueue_on_one_stream_in_line_order(opts):
    """t2's kernel, written after t1's, runs after it on the shared stream (FIFO in line order),
    so the two writes are ordered whatever host work t1 does first."""
    text = log(
        {"op": "host", "host": "t1", "name": "busy", "dur": 80},
        {"op": "launch", "host": "t1", "name": "first", "writes": ["x"], "dur": 5},
        {"op": "launch", "host": "t2", "name": "second", "writes": ["x"], "dur": 5},
    )
    t = simulate_oplog(parse_oplog(text, "t.jsonl"), **opts)
    order = [op.name for op in t.ops if op.agent.name == "compute"]
    assert order == ["first", "second"] and analyse(t).hazards == ()


@pytest.mark.parametrize("opts", RUNS)
def test_a_free_and_record_stream_follow_line_order_across_threads(opts):
    """record_stream (t1) then free (t2, later line) : the free waits for the side stream's use,
    whatever host work t1 does before its record_stream."""
    text = log(
        {"op": "alloc", "host": "t2", "buffer": "x", "nbytes": 64},
        {"op": "launch", "host": "t1", "stream": "side", "name": "use", "reads": ["x"], "dur": 50},
        {"op": "host", "host": "t1", "name": "busy", "dur": 30},
        {"op": "record_stream", "host": "t1", "buffer": "x", "stream": "side"},
        {"op": "free", "host": "t2", "buffer": "x"},
    )
    assert pairs(text, **opts) == set()


@pytest.mark.parametrize("opts", RUNS)
def test_a_device_sync_does_not_wait_for_a_stream_another_thread_first_uses_later(opts):
    """t2's sync_device (line 3) drains what was enqueued before it; t1's kernel on a stream no
    earlier line named (line 5) is not among that, whatever host work t2 does first. So t2's host
    read after the sync races with the kernel's write under every seed. Found by the CLI fuzz of
    valid logs: with --seed 1 --jitter 0.5 t1 ran ahead, the sync waited for its kernel and the
    race went unreported."""
    text = log(
        {"op": "host", "host": "t2", "name": "busy", "dur": 40},
        {"op": "host", "host": "t1", "name": "busy", "dur": 30},
        {"op": "sync_device", "host": "t2"},
        {"op": "host", "host": "t2", "name": "read", "reads": ["x"], "dur": 1},
        {"op": "launch", "host": "t1", "stream": "fresh", "name": "write", "writes": ["x"],
         "dur": 1},
    )
    assert pairs(text, **opts) == {("WAR", "read", "write")}


@pytest.mark.parametrize("opts", RUNS)
def test_a_device_sync_does_not_wait_for_a_comm_op_another_thread_issues_later(opts):
    """The same for NCCL's streams, which a device sync drains too: t1's receive into `x`
    (line 5), issued after t2's sync_device, races with t2's read after the sync."""
    text = log(
        {"op": "host", "host": "t2", "name": "busy", "dur": 40},
        {"op": "host", "host": "t1", "name": "busy", "dur": 30},
        {"op": "sync_device", "host": "t2"},
        {"op": "host", "host": "t2", "name": "read", "reads": ["x"], "dur": 1},
        {"op": "irecv", "host": "t1", "peer": 1, "name": "recv", "tensors": ["x"], "handle": "r"},
        {"op": "isend", "rank": 1, "peer": 0, "tensors": ["y"]},
    )
    assert pairs(text, **opts) == {("WAR", "read", "recv")}


def test_check_reports_the_same_root_causes_under_every_seed():
    """Through check (fix costing on): the same root causes for the mirror log, every seed."""
    text = log(
        {"op": "launch", "host": "t1", "stream": "s1", "name": "produce", "writes": ["x"],
         "dur": 100},
        {"op": "host", "host": "t2", "name": "busy", "dur": 50},
        {"op": "wait_event", "host": "t2", "stream": "s2", "event": "E"},
        {"op": "record", "host": "t1", "stream": "s1", "event": "E"},
        {"op": "launch", "host": "t2", "stream": "s2", "name": "consume", "reads": ["x"],
         "dur": 100},
    )
    got = set()
    for opts in RUNS:
        r = check_oplog(parse_oplog(text, "t.jsonl"), **opts)
        got.add(tuple((rc.kind, rc.buffer) for rc in r.findings.root_causes))
    assert got == {(("RAW", "x"),)}
