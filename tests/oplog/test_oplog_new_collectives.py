"""reduce_scatter, all_to_all and batches of isend/irecv in op logs: written from a model's trace,
read back, replayed, with the same findings (writer -> reader -> same findings); and the
``batch`` field's rules when a log is written by hand."""
from __future__ import annotations

import json

import pytest

from streamsim import P2POp, Simulation
from streamsim.analysis.checks import analyse
from streamsim.oplog import oplog_text, parse_oplog, simulate_oplog
from streamsim.sim.errors import ModelError

MB = 1 << 20


def log(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


def findings(trace) -> list[tuple]:
    return sorted((h.rank, h.kind, h.buffer, h.range, trace.op(h.first).name,
                   trace.op(h.second).name, h.manifest) for h in analyse(trace).hazards)


def program(kind: str, wait: bool):
    def run(host):
        peer, g = 1 - host.rank, host.group("g")
        inp, out = host.buffer("inp", 4 * MB), host.buffer("out", 4 * MB)
        host.launch("produce", writes=[inp], dur=100)
        if kind == "reduce_scatter":
            works = [g.reduce_scatter(out[0:2 * MB], inp, name="rs", handle="h")]
        elif kind == "all_to_all":
            works = [g.all_to_all(out, inp, name="a2a", handle="h")]
        else:
            works = g.batch_isend_irecv([P2POp("irecv", out, peer, name="recv"),
                                         P2POp("isend", inp, peer, name="send")])
        if wait:
            works[0].wait()
        host.launch("overwrite input", writes=[inp], dur=100)
        host.launch("consume output", reads=[out], dur=100)
    return run


@pytest.mark.parametrize("kind", ["reduce_scatter", "all_to_all", "batch"])
@pytest.mark.parametrize("wait", [False, True])
def test_round_trip_keeps_the_findings(kind, wait):
    """The model's trace, written as a log and replayed, has the same hazards (racy) or none
    (ordered), the same comm streams, and writes back to the same log (a fixed point)."""
    sim = Simulation()
    sim.group("g", [0, 1])
    for r in (0, 1):
        sim.spawn(r, program(kind, wait))
    trace = sim.run(source="m.py")
    text = oplog_text(trace)
    again = simulate_oplog(parse_oplog(text, "dump.jsonl"))
    assert again.stall is None and trace.stall is None
    assert findings(again) == findings(trace)
    assert bool(findings(trace)) is not wait  # racy without the wait, ordered with it
    assert sorted(map(str, again.agents)) == sorted(map(str, trace.agents))
    assert oplog_text(again).split("\n", 1)[1] == text.split("\n", 1)[1]
    lines = [json.loads(ln) for ln in text.splitlines() if not ln.startswith("#")]
    if kind == "batch":
        p2p = [ln for ln in lines if ln["op"] in ("isend", "irecv")]
        assert len({(ln.get("rank", 0), ln["batch"]) for ln in p2p}) == 2  # one batch per rank
    else:
        assert [ln["op"] for ln in lines].count(kind) == 2


def exchange_log(batch: bool) -> str:
    b = (lambda n: {"batch": n}) if batch else (lambda n: {})
    return log(
        {"op": "isend", "rank": 0, "tensors": ["x"], "peer": 1, "nbytes": 8 * MB, "dur": 300,
         **b(0)},
        {"op": "irecv", "rank": 0, "tensors": ["y"], "peer": 1, **b(0)},
        {"op": "isend", "rank": 1, "tensors": ["x"], "peer": 0, "nbytes": 8 * MB, "dur": 300,
         **b(7)},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, **b(7)},
    )


def test_a_batch_in_a_log_exchanges_where_single_ops_deadlock():
    assert simulate_oplog(parse_oplog(exchange_log(False), "x.jsonl")).stall is not None
    trace = simulate_oplog(parse_oplog(exchange_log(True), "x.jsonl"))
    assert trace.stall is None
    assert {o.line for o in trace.ops if o.kind in ("isend", "irecv")} == {1, 2, 3, 4}
    # each op of a batch is located at its own line (reports, fixes and Perfetto name it), not at
    # the batch's first line
    assert all(o.location == f"x.jsonl:{o.line}" for o in trace.ops if o.line is not None)


@pytest.mark.parametrize("text, lineno, fragment", [
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "batch": 0},
         {"op": "launch", "name": "k"},
         {"op": "irecv", "tensors": ["y"], "peer": 1, "batch": 0}), 3,
     "batch 0 of rank 0 host 'main' was ended by an earlier line"),
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "batch": 0},
         {"op": "irecv", "tensors": ["y"], "peer": 1, "group": "other", "batch": 0}), 2,
     "batch 0 is on group 'pp', stream 'compute' at line 1"),
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "batch": -1}), 1, "'batch'"),
    (log({"op": "all_reduce", "tensors": ["x"], "batch": 0}), 1,
     "unknown field 'batch' for op 'all_reduce'"),
])
def test_bad_batches_are_one_line_errors(text, lineno, fragment):
    with pytest.raises(ModelError) as exc:
        parse_oplog(text, "bad.jsonl")
    assert str(exc.value).startswith(f"bad.jsonl:{lineno}: ") and fragment in str(exc.value)


def test_another_threads_lines_do_not_end_a_batch():
    """Lines of rank 1 between rank 0's batch lines leave the batch whole."""
    text = log({"op": "isend", "tensors": ["x"], "peer": 1, "nbytes": 8 * MB, "batch": 0},
               {"op": "isend", "rank": 1, "tensors": ["x"], "peer": 0, "nbytes": 8 * MB},
               {"op": "irecv", "tensors": ["y"], "peer": 1, "batch": 0},
               {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0})
    assert [ln.batch for ln in parse_oplog(text, "t.jsonl").lines] == [0, None, 0, None]
