"""Tensor ops in a group declared ``"backend": "gloo"`` (issue 25): gloo's own semantics, so that a
recorded CPU program replays as gloo ran it. A send is a rendezvous whatever its size (a 4-byte
send/send cross deadlocks, as it does under gloo and not under NCCL's eager threshold); sends to a
peer and receives from it run on their own channels ``gloo:G:toN``/``gloo:G:fromN``; collectives on
``gloo:G``; every wait blocks the host."""
from __future__ import annotations

import json

import pytest

from streamsim import Simulation, parse_oplog, simulate_oplog
from streamsim.analysis.checks import analyse
from streamsim.sim.errors import ModelError


def log(*lines: dict) -> str:
    return "".join(json.dumps(x) + "\n" for x in lines)


def cross(backend: str, nbytes: int = 4) -> str:
    """Both ranks send first (and wait), then receive: a deadlock only where a send rendezvous."""
    out = [{"op": "group", "group": "g", "backend": backend, "ranks": [0, 1]}]
    for r in (0, 1):
        out += [{"op": "isend", "rank": r, "group": "g", "peer": 1 - r, "handle": "s",
                 "tensors": [{"buffer": "a", "nbytes": nbytes}]},
                {"op": "wait", "rank": r, "handle": "s", "blocking": True},
                {"op": "irecv", "rank": r, "group": "g", "peer": 1 - r, "handle": "r",
                 "tensors": [{"buffer": "b", "nbytes": nbytes}]},
                {"op": "wait", "rank": r, "handle": "r", "blocking": True}]
    return log(*out)


def test_a_4_byte_send_send_cross_deadlocks_under_gloo_not_under_nccl():
    gloo = analyse(simulate_oplog(parse_oplog(cross("gloo"), "g.jsonl")))
    assert gloo.deadlock is not None
    assert {b.agent.name for b in gloo.deadlock.blocked} >= {"main", "gloo:g:to1", "gloo:g:to0"}
    nccl = analyse(simulate_oplog(parse_oplog(cross("nccl"), "n.jsonl")))
    assert nccl.deadlock is None  # (4 bytes are below NCCL's eager threshold)


WAR = [{"op": "group", "group": "g", "backend": "gloo", "ranks": [0, 1]},
       {"op": "isend", "group": "g", "peer": 1, "handle": "s",
        "tensors": [{"buffer": "a", "nbytes": 1 << 24}]},
       {"op": "host", "name": "add_", "reads": ["a"], "writes": ["a"], "dur": 500},
       {"op": "wait", "handle": "s"},
       {"op": "irecv", "rank": 1, "group": "g", "peer": 0, "handle": "r",
        "tensors": [{"buffer": "b", "nbytes": 1 << 24}]},
       {"op": "wait", "rank": 1, "handle": "r"}]


def test_a_host_write_after_a_gloo_send_before_its_wait_is_a_war_and_the_wait_fixes_it():
    trace = simulate_oplog(parse_oplog(log(*WAR), "w.jsonl"))
    f = analyse(trace)
    assert [(h.kind, trace.op(h.first).line, trace.op(h.second).line) for h in f.hazards] == \
        [("WAR", 2, 3)]
    send = next(op for op in trace.ops if op.kind == "isend" and op.agent.kind == "stream")
    assert send.agent.name == "gloo:g:to1"
    fixed = [WAR[0], WAR[1], WAR[3], WAR[2], *WAR[4:]]
    f2 = analyse(simulate_oplog(parse_oplog(log(*fixed), "w.jsonl")))
    assert not f2.hazards and f2.deadlock is None
    wait = next(op for op in simulate_oplog(parse_oplog(log(*fixed), "w.jsonl")).ops
                if op.kind == "wait" and op.agent.rank == 0)
    assert wait.agent.kind == "host" and wait.end >= send.end  # the host blocked for the send


def test_gloo_collectives_run_on_the_groups_channel_and_model_gets_the_same():
    text = log({"op": "group", "group": "g", "backend": "gloo", "ranks": [0, 1]},
               {"op": "all_reduce", "group": "g", "tensors": ["x"], "nbytes": 2000},
               {"op": "all_reduce", "rank": 1, "group": "g", "tensors": ["x"], "nbytes": 2000})
    t = simulate_oplog(parse_oplog(text, "c.jsonl"))
    ar = [op for op in t.ops if op.kind == "all_reduce" and op.agent.kind == "stream"]
    assert {op.agent.name for op in ar} == {"gloo:g"} and ar[0].end - ar[0].start == 31.0

    sim = Simulation()  # a model's gloo group: the same op, the same time
    sim.group("g", [0, 1], "gloo")
    for r in (0, 1):
        sim.spawn(r, lambda h: h.group("g").all_reduce(h.buffer("x", 2000)))
    m = [op for op in sim.run().ops if op.kind == "all_reduce" and op.agent.kind == "stream"]
    assert [(op.agent.name, op.end) for op in m] == [(op.agent.name, op.end) for op in ar]


@pytest.mark.parametrize("extra, message", [
    ({"batch": 0}, "w.jsonl:2: field 'batch' is for NCCL groups; group 'g' is declared gloo at "
                   "line 1"),
    ({"p2p_streams": "per_pair"}, "w.jsonl:2: field 'p2p_streams' is for NCCL groups"),
])
def test_nccl_only_fields_on_a_gloo_groups_tensor_op_are_one_line_errors(extra, message):
    with pytest.raises(ModelError) as e:
        parse_oplog(log(WAR[0], {**WAR[1], **extra}), "w.jsonl")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
