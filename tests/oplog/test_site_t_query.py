"""Op-log fields a recorder writes (issue 25): ``site`` (the user code line of an op), ``t`` (when
the program issued it) and a ``query``'s observed ``result``; each optional, each validated with a
one-line error, version-1 logs unchanged."""
from __future__ import annotations

import json

import pytest

from streamsim import parse_oplog, simulate_oplog
from streamsim.analysis.checks import analyse
from streamsim.sim.errors import ModelError


def log(*lines: dict) -> str:
    return "".join(json.dumps(x) + "\n" for x in lines)


GLOO = {"op": "group", "group": "pp", "backend": "gloo", "ranks": [0, 1]}


def step(k: int, *, wait: bool = False) -> list[dict]:
    """One step of a racy CPU loop as a recorder writes it: a fresh tensor each step, made at one
    line, sent by gloo, then written in place before (or after, ``wait``) the send's wait."""
    buf = f"train.py:10#{k}"
    send = {"op": "isend", "group": "pp", "tensors": [buf], "peer": 1, "handle": f"h{k}",
            "dur": 100,
            "site": "train.py:11 main"}
    write = {"op": "host", "name": "add_", "reads": [buf], "writes": [buf], "dur": 5,
             "site": "train.py:12 main"}
    w = {"op": "wait", "handle": f"h{k}", "site": "train.py:13 main"}
    recv = {"op": "irecv", "group": "pp", "rank": 1, "tensors": [f"r{k}"], "peer": 0}
    return [{"op": "alloc", "buffer": buf, "nbytes": 64, "site": "train.py:10 main"},
            send, *((w, write) if wait else (write, w)), recv]


def test_one_missing_wait_is_one_root_cause_at_the_users_lines_whatever_the_buffer_names():
    f = analyse(simulate_oplog(parse_oplog(log(GLOO, *[x for k in range(3) for x in step(k)]),
                                           "r.jsonl")))
    assert len(f.hazards) == 3
    [rc] = f.root_causes
    assert (rc.kind, rc.buffer, rc.first.label, rc.first.location, rc.second.location) == \
        ("WAR", "tensor made at train.py:10 main", "isend", "train.py:11 main", "train.py:12 main")
    fixed = analyse(simulate_oplog(parse_oplog(
        log(GLOO, *[x for k in range(3) for x in step(k, wait=True)]), "r.jsonl")))
    assert not fixed.hazards


def test_t_holds_a_line_back_until_the_program_issued_it():
    text = log({"op": "host", "name": "a", "dur": 1, "t": 0},
               {"op": "host", "name": "b", "dur": 1, "t": 500.5},
               {"op": "host", "name": "c", "dur": 1, "t": 500.6})  # t before the clock: no effect
    ops = [op for op in simulate_oplog(parse_oplog(text, "t.jsonl")).ops if op.kind == "host"]
    assert [(op.name, op.start) for op in ops] == [("a", 0.0), ("b", 500.5), ("c", 501.5)]


def test_a_query_observed_true_orders_the_op_and_false_orders_nothing():
    def run(result: bool | None) -> int:
        q = {"op": "query", "handle": "h"} if result is None else \
            {"op": "query", "handle": "h", "result": result}
        text = log({"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "dur": 100},
                   q, {"op": "host", "name": "w", "writes": ["x"]},
                   {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0})
        return len(analyse(simulate_oplog(parse_oplog(text, "q.jsonl"))).hazards)
    assert (run(True), run(False), run(None)) == (0, 1, 1)  # (simulated: not done at t=0)


@pytest.mark.parametrize("line, message", [
    ({"op": "host", "site": ""}, "e.jsonl:2: field 'site' must be a non-empty string"),
    ({"op": "host", "site": 3}, "e.jsonl:2: field 'site' must be a non-empty string, got number"),
    ({"op": "host", "t": -1}, "e.jsonl:2: field 't' must be >= 0"),
    ({"op": "host", "t": "1"}, "e.jsonl:2: field 't' must be a finite number, got string"),
    ({"op": "host", "t": 1}, "e.jsonl:2: field 't' 1 is before the t 5 of line 1, of the same "
                             "host thread"),
    ({"op": "query", "handle": "h", "result": 1}, "e.jsonl:2: field 'result' must be a boolean"),
    ({"op": "host", "result": True}, "e.jsonl:2: unknown field 'result' for op 'host'"),
])
def test_a_bad_new_field_is_a_one_line_error_naming_file_line_and_field(line, message):
    first = {"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "t": 5}
    with pytest.raises(ModelError) as e:
        parse_oplog(log(first, line), "e.jsonl")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
