"""The op log's ``p2p_streams`` field (streamsim/oplog/schema.py): which NCCL stream a group's
isend/irecv run on, read, checked, replayed and written back (writer -> reader -> same findings)."""
from __future__ import annotations

import json

import pytest

import streamsim.sim.api as ss
from streamsim.analysis.checks import analyse
from streamsim.oplog import oplog_text, parse_oplog, simulate_oplog
from streamsim.sim.errors import ModelError

MB = 1 << 20


def log(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


def middle_stage(p2p_streams: str | None, on_every_line: bool = True) -> str:
    """Rank 1 sends x on to rank 2 (busy, rendezvous), receives y from rank 0, waits it and
    overwrites x. ``p2p_streams`` goes on every isend/irecv line (or only on the first)."""
    extra = {} if p2p_streams is None else {"p2p_streams": p2p_streams}
    first = dict(extra)
    rest = extra if on_every_line else {}
    return log(
        {"op": "isend", "rank": 0, "tensors": ["y0"], "peer": 1, "nbytes": 8 * MB, "dur": 300,
         **first},
        {"op": "launch", "rank": 1, "name": "forward", "writes": ["x"], "dur": 50},
        {"op": "isend", "rank": 1, "name": "send x", "tensors": ["x"], "peer": 2, "nbytes": 8 * MB,
         "dur": 300, **rest},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, "handle": "r", **rest},
        {"op": "wait", "rank": 1, "handle": "r"},
        {"op": "launch", "rank": 1, "name": "next forward", "reads": ["y"], "writes": ["x"],
         "dur": 50},
        {"op": "launch", "rank": 2, "name": "busy", "dur": 5000},
        {"op": "irecv", "rank": 2, "tensors": ["z"], "peer": 1, "handle": "z", **rest},
        {"op": "wait", "rank": 2, "handle": "z"},
    )


def hazards(text: str) -> set[tuple[str, str, str, str]]:
    trace = simulate_oplog(parse_oplog(text, "p.jsonl"))
    return {(h.kind, h.buffer, trace.op(h.first).name, trace.op(h.second).name)
            for h in analyse(trace).hazards}


def test_a_log_without_the_field_runs_p2p_on_the_group_stream_as_version_1_did():
    """Version-1 logs keep their meaning: per_group, one nccl:pp stream, the receive queued behind
    the send orders the overwrite (no hazard)."""
    oplog = parse_oplog(middle_stage(None), "p.jsonl")
    assert oplog.groups["pp"].p2p_streams == "per_group"
    assert hazards(middle_stage(None)) == hazards(middle_stage("per_group")) == set()


def test_per_pair_in_the_log_gives_the_race_per_group_orders():
    """Paired, from the log: with a stream per pair the overwrite races the send to rank 2."""
    assert hazards(middle_stage("per_pair")) == {("WAR", "x", "send x", "next forward")}
    trace = simulate_oplog(parse_oplog(middle_stage("per_pair"), "p.jsonl"))
    assert {a.name for a in trace.agents if a.rank == 1 and a.kind == "stream"} == \
        {"compute", "nccl:pp:0-1", "nccl:pp:1-2"}


def test_one_line_saying_it_sets_it_for_the_whole_group():
    """Lines that leave the field out follow the group's setting, given by any of its lines."""
    text = middle_stage("per_pair", on_every_line=False)
    assert parse_oplog(text, "p.jsonl").groups["pp"].p2p_streams == "per_pair"
    assert hazards(text) == hazards(middle_stage("per_pair"))


@pytest.mark.parametrize("text, lineno, fragment", [
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "p2p_streams": "per_peer"}), 1,
     "field 'p2p_streams' must be one of 'per_group', 'per_pair', got 'per_peer'"),
    (log({"op": "irecv", "tensors": ["x"], "peer": 1, "p2p_streams": 1}), 1,
     "field 'p2p_streams' must be a non-empty string, got number"),
    (log({"op": "isend", "tensors": ["x"], "peer": 1, "p2p_streams": "per_pair"},
         {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, "p2p_streams": "per_group"}), 2,
     "p2p_streams 'per_group' for group 'pp' here, but 'per_pair' at line 1"),
    (log({"op": "all_reduce", "tensors": ["x"], "p2p_streams": "per_pair"}), 1,
     "unknown field 'p2p_streams' for op 'all_reduce'"),
])
def test_bad_p2p_streams_is_a_one_line_error(text, lineno, fragment):
    with pytest.raises(ModelError) as exc:
        parse_oplog(text, "bad.jsonl")
    assert str(exc.value).startswith(f"bad.jsonl:{lineno}: ") and fragment in str(exc.value)


def two_groups(sim: ss.Simulation) -> None:
    """A per-pair group (the race above) and a per-group one (its mirror, ordered) side by side."""
    for name, mode in (("pairs", "per_pair"), ("fifo", "per_group")):
        sim.group(name, [0, 1, 2], p2p_streams=mode)

    def first(h):
        for g in ("pairs", "fifo"):
            h.group(g).isend(h.buffer(f"y0.{g}", 8 * MB), dst=1)

    def middle(h):
        for g in ("pairs", "fifo"):
            x, y = h.buffer(f"x.{g}", 8 * MB), h.buffer(f"y.{g}", 8 * MB)
            h.launch("forward", writes=[x], dur=50)
            h.group(g).isend(x, dst=2)
            h.group(g).irecv(y, src=0).wait()
            h.launch("next forward", reads=[y], writes=[x], dur=50)

    def last(h):
        h.launch("busy", dur=5000)
        for g in ("pairs", "fifo"):
            h.group(g).irecv(h.buffer(f"z.{g}", 8 * MB), src=1).wait()
    sim.spawn(0, first)
    sim.spawn(1, middle)
    sim.spawn(2, last)


def test_round_trip_writes_the_field_on_per_pair_lines_only_and_keeps_the_findings():
    """Writer -> reader -> replay: the per-pair group's isend/irecv lines say per_pair, the
    per-group one's say nothing, and the replay has the same streams and the same findings."""
    sim = ss.Simulation()
    two_groups(sim)
    trace = sim.run(source="two_groups")
    text = oplog_text(trace)
    lines = [json.loads(ln) for ln in text.splitlines() if not ln.startswith("#")]
    p2p = [ln for ln in lines if ln["op"] in ("isend", "irecv")]
    assert p2p and all(ln.get("p2p_streams") == ("per_pair" if ln["group"] == "pairs" else None)
                       for ln in p2p)
    again = simulate_oplog(parse_oplog(text, "dump.jsonl"))
    assert sorted(map(str, again.agents)) == sorted(map(str, trace.agents))

    def found(t):
        return sorted((h.kind, h.buffer, h.range, t.op(h.first).kind, t.op(h.second).name,
                       h.manifest) for h in analyse(t).hazards)
    assert found(again) == found(trace) == [("WAR", "x.pairs", (0, 8 * MB), "isend",
                                             "next forward", True)]
    assert oplog_text(again).split("\n", 1)[1] == text.split("\n", 1)[1]  # a fixed point
