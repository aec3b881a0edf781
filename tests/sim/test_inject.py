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


# A rank of two threads: aux's last line writes x on s1; main, later, reads it on s2 after a
# sync of another stream (s3). The fix is an event across the threads: recorded on aux after
# its last line (so at the end of its program) and waited by main before `consume`.
THREADS = [{"op": "config", "launch_overhead": 5},
           {"op": "launch", "host": "aux", "stream": "s1", "name": "produce", "writes": ["x"],
            "dur": 10},
           {"op": "launch", "host": "main", "stream": "s3", "name": "long", "dur": 50},
           {"op": "sync_stream", "host": "main", "stream": "s3"},
           {"op": "launch", "host": "main", "stream": "s2", "name": "consume", "reads": ["x"]}]


@pytest.mark.parametrize("path", ["0", "1"])
def test_a_fix_sync_after_a_threads_last_line_is_labelled_as_the_fixs(monkeypatch, path):
    """The syncs after a thread's last action run at the end of its program; on a thread of a
    rank of several, a record's issue settles first, and another thread (main, in its
    sync_stream) runs meanwhile. The engine then carried on with main as its current thread,
    and the record's two ops took main's line as theirs: named ``sync_stream``, line 4. They
    are the fix's own: ``record(fix0)``, no line. On the engine (``"0"``) and the compiled
    replay where built (``"1"``; the engine otherwise), the same trace."""
    monkeypatch.setenv("STREAMSIM_NATIVE", path)
    log = parse_oplog("".join(json.dumps(x) + "\n" for x in THREADS), "threads.jsonl")
    trace = simulate_oplog(log)
    keyed = key_fixes(trace, distinct_fixes(analyse(trace).hazards))
    assert [f.kind for f in keyed] == ["event"] and keyed[0].record_after[0].name == "aux"
    fixed = simulate_oplog(log, fixes=keyed)
    records = [(str(op.agent), op.name, op.line) for op in fixed.ops if op.kind == "record"]
    assert records == [("rank0/aux", "record(fix0)", None), ("rank0/s1", "record(fix0)", None)]
