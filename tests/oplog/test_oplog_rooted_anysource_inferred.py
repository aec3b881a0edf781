"""Op-log additions: ``barrier``, ``reduce``, ``gather``, ``scatter`` (with ``root``), a receive
from any source (``"any_source": true``) and the provenance of an inferred wait (``"inferred":
"completion"``): read, replayed, written back to the same log, with their errors one line each
(docs/oplog.md)."""
from __future__ import annotations

import json

import pytest

from streamsim import Simulation
from streamsim.cli.main import main
from streamsim.analysis.checks import analyse
from streamsim.oplog import oplog_text, parse_oplog, simulate_oplog
from streamsim.sim.errors import ModelError

MB = 1 << 20


def log(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


def findings(trace) -> list[tuple]:
    return sorted((h.rank, h.kind, h.buffer, trace.op(h.first).name, trace.op(h.second).name)
                  for h in analyse(trace).hazards)


def program(kind: str, wait: bool):
    def run(host):
        g, r = host.group("g"), host.rank
        t = host.buffer("t", MB)
        lst = [host.buffer(f"l{i}", MB) for i in range(2)] if r == 1 else []
        host.launch("produce", writes=[t, *lst], dur=100)
        if kind == "reduce":
            w = g.reduce(t, dst=1, handle="h")
        elif kind == "gather":
            w = g.gather(t, lst or None, dst=1, handle="h")
        elif kind == "scatter":
            w = g.scatter(t, lst or None, src=1, handle="h")
        else:
            w = g.barrier(handle="h")
        if wait:
            w.wait()
        host.launch("overwrite", writes=[t, *lst], dur=100)
    return run


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
@pytest.mark.parametrize("kind", ["reduce", "gather", "scatter", "barrier"])
@pytest.mark.parametrize("wait", [False, True])
def test_round_trip_keeps_the_findings(kind, wait, backend):
    """A model's trace written as a log and replayed has the same hazards (racy: the root's
    writes, every rank's reads; none once waited, none for a barrier, which touches nothing) and
    writes back to the same log; the root's list is on the root's line only."""
    sim = Simulation()
    sim.group("g", [0, 1], backend)
    for r in (0, 1):
        sim.spawn(r, program(kind, wait))
    trace = sim.run(source="m.py")
    text = oplog_text(trace)
    again = simulate_oplog(parse_oplog(text, "dump.jsonl"))
    assert findings(again) == findings(trace)
    assert bool(findings(trace)) is (not wait and kind != "barrier")
    assert oplog_text(again).split("\n", 1)[1] == text.split("\n", 1)[1]
    lines = [json.loads(x) for x in text.splitlines() if not x.startswith("#")]
    ops = [x for x in lines if x["op"] == kind]
    assert len(ops) == 2 and all(x.get("root", 1) == 1 for x in ops)
    listed = {"gather": "outputs", "scatter": "inputs"}.get(kind)
    if listed:
        assert [x.get("rank", 0) for x in ops if listed in x] == [1]


def test_hand_written_rooted_lines_read_and_write_what_the_root_rule_says():
    text = log({"op": "reduce", "tensors": ["x"], "root": 1},
               {"op": "reduce", "rank": 1, "tensors": ["x"], "root": 1},
               {"op": "gather", "inputs": ["x"], "root": 1},
               {"op": "gather", "rank": 1, "inputs": ["x"], "outputs": ["a", "b"], "root": 1},
               {"op": "scatter", "outputs": ["x"], "root": 1},
               {"op": "scatter", "rank": 1, "inputs": ["a", "b"], "outputs": ["x"], "root": 1},
               {"op": "barrier"}, {"op": "barrier", "rank": 1})
    lines = parse_oplog(text, "r.jsonl").lines
    shape = [(ln.op, ln.rank, [r.view.buffer for r in ln.reads],
              [r.view.buffer for r in ln.writes], ln.root) for ln in lines]
    assert shape == [("reduce", 0, ["x"], [], 1), ("reduce", 1, ["x"], ["x"], 1),
                     ("gather", 0, ["x"], [], 1), ("gather", 1, ["x"], ["a", "b"], 1),
                     ("scatter", 0, [], ["x"], 1), ("scatter", 1, ["a", "b"], ["x"], 1),
                     ("barrier", 0, [], [], None), ("barrier", 1, [], [], None)]
    trace = simulate_oplog(parse_oplog(text, "r.jsonl"))
    assert trace.stall is None
    joins = {(o.kind, o.agent.rank): len(o.joins) for o in trace.ops if o.agent.kind == "stream"
             and o.kind in ("reduce", "gather", "scatter", "barrier")}
    assert joins == {("reduce", 0): 0, ("reduce", 1): 1, ("gather", 0): 0, ("gather", 1): 1,
                     ("scatter", 0): 1, ("scatter", 1): 0, ("barrier", 0): 1, ("barrier", 1): 1}


def test_a_write_on_the_root_after_an_async_reduce_races_on_another_rank_nothing_is_written():
    racy = log({"op": "reduce", "tensors": ["x"], "root": 0, "handle": "h", "dur": 50},
               {"op": "launch", "name": "w", "writes": ["x"]},
               {"op": "reduce", "rank": 1, "tensors": ["x"], "root": 0, "dur": 50},
               {"op": "launch", "rank": 1, "name": "r", "reads": ["x"]})
    trace = simulate_oplog(parse_oplog(racy, "racy.jsonl"))
    assert findings(trace) == [(0, "WAW", "x", "reduce", "w")]  # rank 1's read: no race
    fixed = racy.replace('"w", "writes"', '"w", "writes"', 1).splitlines()
    fixed.insert(1, json.dumps({"op": "wait", "handle": "h"}))
    assert findings(simulate_oplog(parse_oplog("\n".join(fixed) + "\n", "f.jsonl"))) == []


@pytest.mark.parametrize("text, lineno, fragment", [
    (log({"op": "reduce", "tensors": ["x"]}), 1, "missing required field 'root' for op 'reduce'"),
    (log({"op": "gather", "inputs": ["x"], "outputs": ["y"], "root": 1}), 1,
     "field 'outputs' (the gather list) is the root's: rank 0 is not the root 1"),
    (log({"op": "gather", "inputs": ["x"], "root": 0}), 1,
     "missing required field 'outputs' for op 'gather' on its root rank 0"),
    (log({"op": "scatter", "outputs": ["x"], "inputs": ["y"], "root": 1}), 1,
     "field 'inputs' (the scatter list) is the root's"),
    (log({"op": "scatter", "outputs": ["x"], "root": 0}), 1,
     "missing required field 'inputs' for op 'scatter' on its root rank 0"),
    (log({"op": "reduce", "tensors": ["x"], "root": 2, "ranks": [0, 1]}), 1,
     "ranks [0, 1] of this reduce do not include its root 2"),
    (log({"op": "reduce", "tensors": ["x"], "root": -1}), 1, "field 'root' must be a non-negative"),
    (log({"op": "barrier", "tensors": ["x"]}), 1, "unknown field 'tensors' for op 'barrier'"),
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "any_source": True}), 1,
     "unknown field 'any_source' for op 'isend'"),
    (log({"op": "irecv", "tensors": ["x"], "peer": 1, "any_source": 1}), 1,
     "field 'any_source' must be a boolean"),
    (log({"op": "irecv", "tensors": ["x"], "peer": 1, "any_source": True, "batch": 0}), 1,
     "'any_source' and 'batch' do not go together"),
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h"},
         {"op": "wait", "handle": "h", "inferred": "guess"}), 2,
     "field 'inferred' must be one of 'completion'"),
])
def test_errors_are_one_line_naming_the_line(text, lineno, fragment):
    with pytest.raises(ModelError) as exc:
        parse_oplog(text, "bad.jsonl")
    assert str(exc.value).startswith(f"bad.jsonl:{lineno}: ") and fragment in str(exc.value)


def test_ranks_that_disagree_on_the_root_or_the_op_stop_the_replay():
    for other in ({"op": "reduce", "rank": 1, "tensors": ["x"], "root": 1},
                  {"op": "all_reduce", "rank": 1, "tensors": ["x"]}):
        text = log({"op": "reduce", "tensors": ["x"], "root": 0}, other)
        with pytest.raises(ModelError) as exc:
            simulate_oplog(parse_oplog(text, "m.jsonl"))
        assert "every rank must issue the same op with the same root" in str(exc.value)


def any_source_log(**extra) -> str:
    return log({"op": "isend", "rank": 1, "tensors": ["x"], "peer": 0, "dur": 20},
               {"op": "irecv", "tensors": ["y"], "peer": 1, "any_source": True, "handle": "r",
                **extra},
               {"op": "wait", "handle": "r"},
               {"op": "launch", "name": "use", "reads": ["y"]})


def test_a_receive_from_any_source_pairs_with_the_observed_peer_and_is_named_so():
    trace = simulate_oplog(parse_oplog(any_source_log(), "a.jsonl"))
    recv = next(o for o in trace.ops if o.kind == "irecv" and o.agent.kind == "stream")
    send = next(o for o in trace.ops if o.kind == "isend" and o.agent.kind == "stream")
    assert recv.joins == (send.id,) and recv.name == "irecv (from any source)"
    assert recv.attrs["any_source"] is True and findings(trace) == []
    text = oplog_text(trace)
    line = next(json.loads(x) for x in text.splitlines() if '"irecv"' in x)
    assert line["any_source"] is True and line["peer"] == 1
    again = simulate_oplog(parse_oplog(text, "again.jsonl"))
    assert oplog_text(again).split("\n", 1)[1] == text.split("\n", 1)[1]
    named = simulate_oplog(parse_oplog(any_source_log(name="mine"), "n.jsonl"))
    assert {o.name for o in named.ops if o.kind == "irecv"} == {"mine"}


def inferred_log(**extra) -> str:
    return log({"op": "all_reduce", "tensors": ["g"], "handle": "h", "dur": 50},
               {"op": "wait", "handle": "h", **extra},
               {"op": "launch", "name": "step", "writes": ["g"]})


def test_an_inferred_wait_keeps_its_provenance_and_says_so_where_it_is_shown(tmp_path):
    """The field is kept by the reader and the writer; the wait's default name says it was
    inferred, so a report that shows the wait (a hazard's 'why' chain, the timeline) says so;
    without the field the log reads and replays exactly as before."""
    trace = simulate_oplog(parse_oplog(inferred_log(inferred="completion"), "i.jsonl"))
    waits = [o for o in trace.ops if o.kind == "wait"]
    assert waits and all(o.attrs["inferred"] == "completion" for o in waits)
    assert {o.name for o in waits} == {"wait (inferred: seen completed, waited in C++)"}
    text = oplog_text(trace)
    line = next(json.loads(x) for x in text.splitlines() if '"wait"' in x)
    assert line["inferred"] == "completion"
    plain = simulate_oplog(parse_oplog(inferred_log(), "p.jsonl"))
    assert all("inferred" not in o.attrs for o in plain.ops)
    assert {o.name for o in plain.ops if o.kind == "wait"} == {"wait"}
    assert [(o.kind, o.start, o.end) for o in plain.ops] == \
        [(o.kind, o.start, o.end) for o in trace.ops]
    # a hazard whose explanation shows the wait: k1 is ordered after it, k2 (side) is not
    path = tmp_path / "i.jsonl"
    path.write_text(log({"op": "all_reduce", "tensors": ["g"], "handle": "h", "dur": 50},
                        {"op": "wait", "handle": "h", "inferred": "completion"},
                        {"op": "launch", "name": "k1", "writes": ["a"]},
                        {"op": "launch", "stream": "side", "name": "k2", "writes": ["a"]}))
    assert main(["check", str(path), "--out", str(tmp_path / "out"), "--no-fix-cost"]) == 1
    md = (tmp_path / "out" / "report.md").read_text()
    assert "`wait (inferred: seen completed, waited in C++)` on rank0/compute (program order)" in md


@pytest.mark.parametrize("backend, waited, warned", [
    ("gloo", "h", True), ("nccl", "h", False), ("gloo", "r", False)])
def test_a_second_wait_on_a_gloo_sends_handle_is_warned(backend, waited, warned):
    """Under gloo a second wait() on an isend's handle hangs (docs/recording.md): warned, at the
    second wait; not for an NCCL handle, nor for a receive's."""
    text = log({"op": "group", "group": "g", "backend": backend},
               {"op": "isend", "group": "g", "tensors": ["x"], "peer": 1, "handle": "h"},
               {"op": "irecv", "group": "g", "rank": 1, "tensors": ["x"], "peer": 0,
                "handle": "r"},
               {"op": "wait", "rank": 0 if waited == "h" else 1, "handle": waited},
               {"op": "wait", "rank": 0 if waited == "h" else 1, "handle": waited})
    trace = simulate_oplog(parse_oplog(text, "w.jsonl"))
    got = [(w.kind, trace.op(w.op).line) for w in analyse(trace).warnings
           if w.kind == "gloo-send-waited-twice"]
    assert got == ([("gloo-send-waited-twice", 5)] if warned else [])
