"""`check` with fix costing on (its default) costs every fix kind on an op log, through the same
injection as a model (issue 23, finding 1: a record_stream fix crashed with KeyError, exit 2)."""
from __future__ import annotations

import json

import pytest

from streamsim import check_oplog, parse_oplog
from streamsim.cli.main import main


def log(*lines: dict) -> str:
    return "".join(json.dumps(x) + "\n" for x in lines)


KINDS = {
    "record_stream": log({"op": "launch", "stream": "side", "reads": ["x"]},
                         {"op": "free", "buffer": "x"}),
    "wait_handle": log({"op": "launch", "name": "fwd", "writes": ["h"], "dur": 9},
                       {"op": "isend", "tensors": ["h"], "peer": 1, "handle": "s", "dur": 40},
                       {"op": "launch", "name": "fwd", "writes": ["h"], "dur": 9},
                       {"op": "irecv", "rank": 1, "tensors": ["h"], "peer": 0}),
    "event": log({"op": "launch", "name": "a", "writes": ["x"], "dur": 9},
                 {"op": "launch", "stream": "side", "name": "b", "reads": ["x"]}),
    "event_sync": log({"op": "launch", "name": "a", "writes": ["x"], "dur": 9},
                      {"op": "host", "name": "b", "reads": ["x"]}),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_fix_kind_is_costed_on_an_op_log_and_closes_its_hazard(kind):
    r = check_oplog(parse_oplog(KINDS[kind], "k.jsonl"))
    assert {h.fix.kind for h in r.findings.hazards} == {kind}
    assert r.fix_cost is not None and r.fix_cost.hazards_after == 0
    assert r.root_cause_costs[0] is not None


def test_the_use_after_free_of_the_issue_exits_1_with_its_cost(tmp_path, capsys):
    path = tmp_path / "log.jsonl"
    path.write_text(KINDS["record_stream"])
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr()
    assert "record_stream" in out.out and "0 hazards left" in out.out and out.err == ""
