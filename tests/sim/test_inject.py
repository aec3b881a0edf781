"""Fixes injected into a re-run: a fix keyed once is the same record, names the same program
actions in any run of the program, and is injected without the trace it was found in (fix costing
keys a run's fixes once, then re-runs with them as often as it costs subsets of them)."""
from __future__ import annotations

import json

import pytest

from streamsim import InputError, parse_oplog, simulate_oplog
from streamsim.analysis.checks import analyse, distinct_fixes
from streamsim.analysis.findings import Fix
from streamsim.sim.inject import is_keyed, key_fixes

KINDS = {  # one op log per fix kind: the fix analyse proposes for its hazard is of that kind
    "record_stream": [{"op": "launch", "stream": "side", "reads": ["x"]},
                      {"op": "free", "buffer": "x"}],
    "wait_handle": [{"op": "launch", "name": "fwd", "writes": ["h"], "dur": 9},
                    {"op": "isend", "tensors": ["h"], "peer": 1, "handle": "s", "dur": 40},
                    {"op": "launch", "name": "fwd", "writes": ["h"], "dur": 9},
                    {"op": "irecv", "rank": 1, "tensors": ["h"], "peer": 0}],
    "event": [{"op": "launch", "name": "a", "writes": ["x"], "dur": 9},
              {"op": "launch", "stream": "side", "name": "b", "reads": ["x"]}],
    "event_sync": [{"op": "launch", "name": "a", "writes": ["x"], "dur": 9},
                   {"op": "host", "name": "b", "reads": ["x"]}],
}


def racy(kind: str):
    log = parse_oplog("".join(json.dumps(x) + "\n" for x in KINDS[kind]), f"{kind}.jsonl")
    trace = simulate_oplog(log)
    return log, trace, distinct_fixes(analyse(trace))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_keyed_fixes_close_the_hazard_without_the_trace_they_were_found_in(kind):
    log, trace, fixes = racy(kind)
    assert [f.kind for f in fixes] == [kind]
    keyed = key_fixes(trace, fixes)
    assert all(type(k) is Fix and is_keyed(k) for k in keyed)  # one record, its places keys
    assert [k.text for k in keyed] == [f.text for f in fixes]
    by_keys = simulate_oplog(log, fixes=keyed)  # no base: nothing to scan
    by_ids = simulate_oplog(log, fixes=fixes, base=trace)  # keyed against base first
    assert analyse(by_keys).hazards == () == analyse(by_ids).hazards
    assert [(o.agent, o.kind, o.start, o.end) for o in by_keys.ops] == \
        [(o.agent, o.kind, o.start, o.end) for o in by_ids.ops]
    assert key_fixes(trace, keyed) == keyed  # keyed fixes are kept as they are


def test_fixes_sharing_one_sync_are_keyed_once_whatever_their_wording():
    _, trace, (fix,) = racy("event")
    reworded = Fix(fix.kind, "other words", fix.before, fix.handle_op, fix.record_after,
                   fix.event_stream, fix.wait_stream)
    assert len(key_fixes(trace, [fix, reworded])) == 1
    assert len(key_fixes(trace, [fix, reworded], dedupe=False)) == 2


def test_a_fix_naming_op_ids_needs_the_run_it_was_found_in():
    log, _, fixes = racy("event")
    with pytest.raises(InputError, match="trace they were found in"):
        simulate_oplog(log, fixes=fixes)
