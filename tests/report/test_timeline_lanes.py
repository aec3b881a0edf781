"""The timeline draws a bounded number of lanes: 10,000 one-op ranks made a 20,000-lane picture
(48 s and 1.2 GB for check --out); the hazard's ranks are always among the lanes kept."""
from __future__ import annotations

import json

from streamsim import analyse, parse_oplog, simulate_oplog
from streamsim.report.timeline import MAX_LANES, select_ops


def test_lanes_are_capped_and_keep_the_hazards_rank():
    lines = [{"op": "launch", "rank": r, "writes": ["x"], "dur": 1} for r in range(400)]
    lines.append({"op": "host", "rank": 321, "writes": ["x"], "dur": 1})  # races rank 321's kernel
    trace = simulate_oplog(parse_oplog("".join(json.dumps(x) + "\n" for x in lines), "many.jsonl"))
    (h,) = analyse(trace).hazards
    sel = select_ops(trace, h)
    agents = {op.agent for op in sel.ops}
    assert len(agents) == MAX_LANES
    assert {trace.op(h.first).agent, trace.op(h.second).agent} <= agents
    assert any(f"showing {MAX_LANES} of" in note for note in sel.notes)
