"""A recorded log written back is the same log (issue 23, "a faithful dump"): ``dump_oplog`` of a
replayed recording writes each line's ``site``, ``t`` and a ``query``'s observed ``result`` as the
recorder gave them, and each ``alloc`` line as it was (its size, stream, site and label), so that
parse -> replay -> write -> parse gives the same lines. Before, the three fields were dropped (a
re-check then grouped root causes by name, not by the user's code line, the replay ran without
the recorded host time, and a query that the program saw True was re-simulated), and the writer
replaced a freed buffer's ``alloc`` line by one of its own, sized by what its ops touched."""
from __future__ import annotations

import json

from streamsim import oplog_text, parse_oplog, simulate_oplog
from streamsim.oplog.schema import LINE_FIELDS

# What a recorder writes (streamsim.record): a group declaration, every line with its site and
# t, allocations with theirs, a comm line's nbytes, queries with what the program saw.
RECORDED = [
    {"op": "group", "group": "cpu", "backend": "gloo", "ranks": [0, 1]},
    {"op": "alloc", "buffer": "t1@a.py:10", "nbytes": 64, "site": "a.py:10 main", "t": 0},
    {"op": "alloc", "buffer": "t2", "nbytes": 4096, "stream": "copy", "t": 0.5},
    {"op": "host", "name": "fill_", "writes": ["t1@a.py:10"], "dur": 5, "site": "a.py:11 main",
     "t": 1, "step": 0},
    {"op": "launch", "host": "worker", "stream": "copy", "name": "h2d", "reads": ["t2"],
     "dur": 40, "site": "a.py:30 run", "t": 2},
    {"op": "record", "host": "worker", "stream": "copy", "event": "E", "site": "a.py:31 run",
     "t": 3},
    {"op": "isend", "group": "cpu", "tensors": ["t1@a.py:10"], "peer": 1, "handle": "h1",
     "nbytes": 64, "dur": 100, "site": "a.py:12 main", "t": 7, "step": 0},
    {"op": "query", "handle": "h1", "result": False, "site": "a.py:13 main", "t": 8},
    {"op": "wait_event", "event": "E", "site": "a.py:14 main", "t": 9},
    {"op": "query", "handle": "h1", "result": True, "site": "a.py:13 main", "t": 20},
    {"op": "wait", "handle": "h1", "site": "a.py:15 main", "t": 200.25},
    {"op": "record_stream", "host": "worker", "buffer": "t2", "stream": "compute",
     "site": "a.py:32 run", "t": 210},
    {"op": "free", "host": "worker", "buffer": "t2", "site": "a.py:33 run", "t": 211},
    {"op": "free", "buffer": "t1@a.py:10", "site": "a.py:16 main", "t": 212},
    {"op": "alloc", "buffer": "t1@a.py:10", "nbytes": 32, "label": "y", "site": "a.py:17 main",
     "t": 213},
    {"op": "irecv", "rank": 1, "group": "cpu", "tensors": ["r"], "peer": 0, "handle": "g1",
     "nbytes": 64, "site": "b.py:5 main", "t": 0},
    {"op": "wait", "rank": 1, "handle": "g1", "site": "b.py:6 main", "t": 1},
]


def lines(text: str) -> list[tuple]:
    """Each line's fields, but where it is in the file (its number, location; the line a wait
    names by its position among the lines)."""
    log = parse_oplog(text, "r.jsonl")
    at = {ln.lineno: i for i, ln in enumerate(log.lines)}
    skip = {"lineno", "location", "target"}
    return [tuple(getattr(ln, f) for f in LINE_FIELDS if f not in skip)
            + (at.get(ln.target),) for ln in log.lines]


def test_a_recorded_log_written_back_gives_the_same_lines():
    text = "".join(json.dumps(x) + "\n" for x in RECORDED)
    again = oplog_text(simulate_oplog(parse_oplog(text, "r.jsonl")))
    assert lines(again) == lines(text)
    written = [json.loads(x) for x in again.splitlines() if x.startswith("{")]
    queries = [x for x in written if x["op"] == "query"]
    assert [(q["result"], q["t"], q["site"]) for q in queries] == \
        [(False, 8, "a.py:13 main"), (True, 20, "a.py:13 main")]
    assert [x for x in written if x["op"] == "alloc"][-1] == {
        "op": "alloc", "buffer": "t1@a.py:10", "nbytes": 32, "label": "y",
        "site": "a.py:17 main", "t": 213}
    # and a fixed point: the written log written back is the same text
    assert oplog_text(simulate_oplog(parse_oplog(again, "r.jsonl"))).split("\n", 1)[1] == \
        again.split("\n", 1)[1]


def test_a_simulated_query_stays_simulated():
    """A line without ``result`` (a model's ``is_completed()``, a hand-written log) is written
    without one: the replay decides it, as the original did."""
    text = "".join(json.dumps(x) + "\n" for x in [
        {"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "nbytes": 1, "dur": 10},
        {"op": "query", "handle": "h"},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, "nbytes": 1}])
    again = oplog_text(simulate_oplog(parse_oplog(text, "q.jsonl")))
    [query] = [ln for ln in parse_oplog(again, "q.jsonl").lines if ln.op == "query"]
    assert query.result is None and '"result"' not in again
