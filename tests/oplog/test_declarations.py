"""Op log v2's declarations of the cost model (issue 23, finding 4): a group's backend, ranks,
latency, bandwidth, eager threshold and blocking wait, and the launch overhead; a send's duration
from its size in a declared group, exactly as a model computes it; version-1 logs unchanged."""
from __future__ import annotations

import json

import pytest

from streamsim import Simulation, parse_oplog, simulate_oplog
from streamsim.sim.errors import ModelError


def log(*lines: dict) -> str:
    return "".join(json.dumps(x) + "\n" for x in lines)


SEND = [{"op": "isend", "tensors": ["x"], "peer": 1, "nbytes": 4000},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0, "nbytes": 4000}]


def send_of(trace):
    return next(op for op in trace.ops if op.kind == "isend" and op.agent.kind == "stream")


def test_a_declared_groups_send_lasts_its_transfer_time_as_in_a_model():
    text = log({"op": "group", "group": "pp", "ranks": [0, 1], "latency": 10, "bandwidth": 100},
               {"op": "config", "launch_overhead": 3}, *SEND)
    s = send_of(simulate_oplog(parse_oplog(text, "d.jsonl")))
    assert (s.start, s.end - s.start) == (3.0, 10 + 4000 / 100)

    def build(sim):  # the same schedule as a model: the same times
        sim.group("pp", [0, 1], latency=10, bandwidth=100)
        sim.spawn(0, lambda h: h.group("pp").isend(h.buffer("x", 4000), 1))
        sim.spawn(1, lambda h: h.group("pp").irecv(h.buffer("y", 4000), 0))
    sim = Simulation(launch_overhead=3)
    build(sim)
    m = send_of(sim.run())
    assert (m.start, m.end) == (s.start, s.end)


def test_a_version_1_log_keeps_its_one_microsecond_default():
    s = send_of(simulate_oplog(parse_oplog(log(*SEND), "v1.jsonl")))
    assert s.end - s.start == 1.0


def test_the_eager_threshold_makes_a_large_send_a_rendezvous():
    late_recv = [SEND[0], {"op": "host", "rank": 1, "dur": 500}, SEND[1]]
    eager = log({"op": "group", "group": "pp", "eager_bytes": 1 << 20}, *late_recv)
    rendezvous = log({"op": "group", "group": "pp", "eager_bytes": 100}, *late_recv)
    assert send_of(simulate_oplog(parse_oplog(eager, "e.jsonl"))).end < 500
    assert send_of(simulate_oplog(parse_oplog(rendezvous, "r.jsonl"))).end >= 500


@pytest.mark.parametrize("lines, says", [
    ([SEND[0], {"op": "group", "group": "pp"}], "group 'pp' is declared here but used at line 1"),
    ([{"op": "group", "group": "pp", "bandwidth": 0}], "field 'bandwidth' must be > 0"),
    ([{"op": "group", "group": "pp", "latency": -1}], "field 'latency' must be >= 0"),
    ([{"op": "group", "group": "pp", "speed": 1}], "unknown field 'speed' for declaration 'group'"),
    ([{"op": "group", "group": "g", "backend": "mpi"}], "field 'backend' must be 'nccl' or 'gloo'"),
    ([SEND[0], {"op": "config", "launch_overhead": 1}], "'config' declaration comes once, before"),
    ([{"op": "group", "group": "pp", "ranks": [0]}, *SEND], "declares ranks [0], but rank 1 uses"),
])
def test_a_bad_declaration_is_one_line_naming_its_line(lines, says):
    with pytest.raises(ModelError) as e:
        parse_oplog(log(*lines), "bad.jsonl")
    assert says in str(e.value) and str(e.value).startswith("bad.jsonl:")


def test_groups_whose_streams_collide_are_an_error_naming_the_line():
    """A per-pair stream of group g (nccl:g:0-1) is group g:0-1's own stream: the engine refuses
    the two, and the reader says so at the second group's line (the error named no file before:
    the engine found it, outside the replay's error handling)."""
    lines = log({"op": "group", "group": "g", "ranks": [0, 1], "p2p_streams": "per_pair"},
                {"op": "group", "group": "g:0-1", "ranks": [0, 1]},
                {"op": "launch", "name": "k", "writes": ["x"]})
    with pytest.raises(ModelError) as e:
        parse_oplog(lines, "bad.jsonl")
    assert str(e.value).startswith("bad.jsonl:2: group 'g:0-1': its comm stream nccl:g:0-1 "
                                   "would be a per-pair stream of group 'g'")
