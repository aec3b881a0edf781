"""Pulling an op's predecessors forward never reorders a thread's own accesses against the ops
that write into its buffers (issue 23, finding 5): a pair is named in issue order, with the kind
of its two accesses in that order, and gets the fix that order calls for."""
from __future__ import annotations

import json

from streamsim import analyse, check_oplog, parse_oplog, simulate_oplog

# Rank 0's wait (line 3) needs rank 1's send of line 6, which pulls rank 1's lines 4-6 forward;
# the receive's write of y (issued at line 4) was processed after the host read of line 5.
SEVEN_LINES = "".join(json.dumps(x) + "\n" for x in [
    {"op": "isend", "rank": 0, "group": "a", "peer": 1, "tensors": ["x"], "handle": "s",
     "nbytes": 2048, "dur": 6000},
    {"op": "irecv", "rank": 0, "group": "b", "peer": 1, "tensors": ["z"], "handle": "r0",
     "nbytes": 2048},
    {"op": "wait", "rank": 0, "handle": "r0", "blocking": True},
    {"op": "irecv", "rank": 1, "group": "a", "peer": 0, "tensors": ["y"], "handle": "r",
     "nbytes": 2048},
    {"op": "host", "rank": 1, "name": "use", "reads": ["y"], "dur": 7},
    {"op": "isend", "rank": 1, "group": "b", "peer": 0, "tensors": ["w"], "handle": "s1",
     "nbytes": 2048, "dur": 500},
    {"op": "wait", "rank": 1, "handle": "r", "blocking": True},
])


def test_the_seven_line_log_reports_the_receive_then_the_read_as_a_raw_with_its_fix():
    t = simulate_oplog(parse_oplog(SEVEN_LINES, "p.jsonl"))
    (h,) = analyse(t).hazards
    assert (h.kind, t.op(h.first).line, t.op(h.second).line) == ("RAW", 4, 5)
    assert (h.first_mode, h.second_mode) == ("write", "read")
    assert h.fix is not None and h.fix.kind == "wait_handle"


def test_the_fix_closes_it_in_the_fixed_run():
    r = check_oplog(parse_oplog(SEVEN_LINES, "p.jsonl"))
    assert r.fix_cost is not None and r.fix_cost.hazards_after == 0
