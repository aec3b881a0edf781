"""One missing wait, several consumers (issue 25: GPipe with deferred receive waits showed the
forward's read and the backward's read of one received input as two root causes): a hazard that
the wait fixing an earlier hazard orders too is an instance of that root cause. Where that wait
does not order it (an NCCL wait orders only the stream current at the call; a host op or a
kernel on another stream comes after it in no way), it stays a root cause of its own; and the
rule is checked against the truth: re-simulated with the covering hazard's fix alone, every
hazard merged into it is gone."""
from __future__ import annotations

import json

import pytest

from streamsim.analysis.checks import analyse
from streamsim.oplog import parse_oplog, simulate_oplog


def log(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


def consumers(backend: str, second: dict) -> str:
    """Rank 1 receives ``x`` without waiting, then reads it in ``forward`` and again in the
    line ``second``."""
    return log({"op": "group", "group": "pp", "backend": backend},
               {"op": "isend", "tensors": ["x"], "peer": 1, "dur": 100},
               {"op": "irecv", "rank": 1, "tensors": ["x"], "peer": 0, "handle": "r"},
               {"op": "launch", "rank": 1, "name": "forward", "reads": ["x"]},
               {"rank": 1, **second},
               {"op": "wait", "rank": 1, "handle": "r"})


@pytest.mark.parametrize("backend, second, merged", [
    ("gloo", {"op": "host", "name": "backward", "reads": ["x"]}, True),  # the host blocked
    ("gloo", {"op": "launch", "stream": "side", "name": "backward", "reads": ["x"]}, True),
    ("nccl", {"op": "launch", "name": "backward", "reads": ["x"]}, True),  # compute waited
    ("nccl", {"op": "launch", "stream": "side", "name": "backward", "reads": ["x"]}, False),
    ("nccl", {"op": "host", "name": "backward", "reads": ["x"]}, False),
])
def test_a_second_consumer_is_an_instance_exactly_when_the_first_ones_wait_orders_it(
        backend, second, merged):
    trace = simulate_oplog(parse_oplog(consumers(backend, second), "c.jsonl"))
    findings = analyse(trace)
    assert len(findings.hazards) == 2
    assert [(rc.second.label, len(rc.instances)) for rc in findings.root_causes] == \
        ([("forward", 2)] if merged else [("forward", 1), ("backward", 1)])
    # the truth: the forward's fix alone, re-simulated, leaves the backward's hazard or not
    forward = next(h for h in findings.hazards if trace.op(h.second).name == "forward")
    fixed = simulate_oplog(parse_oplog(consumers(backend, second), "c.jsonl"),
                           fixes=[forward.fix], base=trace)
    left = {fixed.op(h.second).name for h in analyse(fixed).hazards}
    assert left == (set() if merged else {"backward"})


def test_different_receives_stay_different_root_causes():
    """Two receives into one buffer, each unwaited, each read: two missing waits (the instances
    have different first ops), however alike their sites."""
    text = log({"op": "isend", "tensors": ["x"], "peer": 1, "dur": 100},
               {"op": "irecv", "rank": 1, "name": "recv a", "tensors": ["x"], "peer": 0},
               {"op": "launch", "rank": 1, "name": "forward", "reads": ["x"]},
               {"op": "isend", "tensors": ["y"], "peer": 1, "dur": 100},
               {"op": "irecv", "rank": 1, "name": "recv b", "tensors": ["x"], "peer": 0},
               {"op": "launch", "rank": 1, "name": "backward", "reads": ["x"]})
    causes = analyse(simulate_oplog(parse_oplog(text, "d.jsonl"))).root_causes
    assert sorted((rc.first.label, rc.second.label) for rc in causes) == [
        ("recv a", "forward"), ("recv b", "backward")]


def test_the_merge_is_by_sites_every_instance_of_the_later_pair_goes_with_it():
    """Once one instance shows the wait before ``forward`` ordering ``backward`` too, every
    instance of that pair of sites is the forward's root cause: the code-level fix is the same
    wait, on the same line, in every step (the analysis names only a receive's latest unordered
    read when it processes the receive after them, so an instance may lack its forward pair)."""
    step = [{"op": "isend", "name": "send", "tensors": ["x"], "peer": 1, "dur": 100},
            {"op": "irecv", "rank": 1, "name": "recv", "tensors": ["x"], "peer": 0,
             "handle": "r"}]
    text = log({"op": "group", "group": "pp", "backend": "gloo"},
               *step, {"op": "host", "rank": 1, "name": "forward", "reads": ["x"]},
               {"op": "host", "rank": 1, "name": "backward", "reads": ["x"]},
               {"op": "wait", "rank": 1, "handle": "r"},
               *step, {"op": "host", "rank": 1, "name": "backward", "reads": ["x"]},
               {"op": "wait", "rank": 1, "handle": "r"})
    causes = analyse(simulate_oplog(parse_oplog(text, "s.jsonl"))).root_causes
    assert [(rc.second.label, len(rc.instances)) for rc in causes] == [("forward", 3)]
