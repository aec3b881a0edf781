"""The op log (docs OPLOG.md): validation errors, replay semantics, and the writer's round trip."""
from __future__ import annotations

import io
import inspect
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamsim.sim.api as ss
from streamsim.sim.engine import ModelError
from streamsim.oplog import dump_oplog, load_oplog, oplog_text, parse_oplog, simulate_oplog
from streamsim.trace import Trace

from streamsim.analysis.checks import analyse
from streamsim.analysis.hb import analyse_hazards
from streamsim.report.jsonread import op_of

EXAMPLE = """\
{"op":"launch","rank":0,"name":"forward[t]","writes":["hidden"],"dur":900}
{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400}
{"op":"launch","rank":0,"name":"forward[t+1]","writes":["hidden"],"dur":900}
{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","dur":400}
"""
EXAMPLE_FIXED = EXAMPLE.replace('\n{"op":"launch","rank":0,"name":"forward[t+1]"',
                                '\n{"op":"wait","rank":0,"handle":"send_t"}\n'
                                '{"op":"launch","rank":0,"name":"forward[t+1]"')


def run(text: str, path: str = "log.jsonl", **kw) -> Trace:
    return simulate_oplog(parse_oplog(text, path), **kw)


def lines_of(trace: Trace, hazard) -> tuple[int, int]:
    return trace.op(hazard.first).line, trace.op(hazard.second).line


def log(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


# --- the example of OPLOG.md -------------------------------------------------------------------------

def test_example_ops_carry_lines_locations_and_names():
    trace = run(EXAMPLE, "ex.jsonl")
    assert trace.source == "ex.jsonl"
    for op in trace.ops:
        assert op.location == f"ex.jsonl:{op.line}"
    send = next(op for op in trace.ops if op.kind == "isend" and op.agent.kind == "stream")
    assert (send.agent.name, send.line, send.handle, send.name) == ("nccl:pp", 2, "send_t", "isend")
    fwd = [op for op in trace.ops if op.kind == "launch" and op.agent.kind == "stream"]
    assert [(op.name, op.line) for op in fwd] == [("forward[t]", 1), ("forward[t+1]", 3)]
    assert send.after == (fwd[0].id,)  # the NCCL enqueue edge from the current stream
    recv = next(op for op in trace.ops if op.kind == "irecv" and op.agent.kind == "stream")
    assert recv.joins == (send.id,) and trace.stall is None


def test_example_without_hb_structure():
    """Line 3 is unordered with the send of line 2: no op chain joins them (wait line absent)."""
    trace = run(EXAMPLE)
    send = next(op for op in trace.ops if op.kind == "isend" and op.agent.kind == "stream")
    fwd1 = next(op for op in trace.ops if op.line == 3 and op.agent.kind == "stream")
    assert send.id not in fwd1.after and fwd1.start < send.end  # they overlap in this run
    fixed = run(EXAMPLE_FIXED)
    wait = next(op for op in fixed.ops if op.kind == "wait" and op.agent.kind == "stream")
    send = next(op for op in fixed.ops if op.kind == "isend" and op.agent.kind == "stream")
    assert wait.after == (send.id,) and wait.line == 3


def test_example_race_line3_vs_line2():
    trace = run(EXAMPLE)
    hazards = analyse_hazards(trace)
    assert [(h.buffer, sorted(lines_of(trace, h))) for h in hazards] == [("hidden", [2, 3])]
    assert hazards[0].manifest


def test_example_race_is_war():
    """OPLOG.md: line 3 writes `hidden` while line 2's send may still read it, a WAR: the kind
    follows issue order even though forward[t+1] starts first in the engine's sequence."""
    trace = run(EXAMPLE)
    assert [h.kind for h in analyse_hazards(trace)] == ["WAR"]


def test_example_with_wait_has_no_hazard():
    assert analyse_hazards(run(EXAMPLE_FIXED)) == []


def test_example_fix_applies_to_the_op_log():
    """A proposed fix is injected into a re-run of the log (to cost it) and removes the race."""
    log_ = parse_oplog(EXAMPLE, "ex.jsonl")
    trace = simulate_oplog(log_)
    fixes = [h.fix for h in analyse_hazards(trace)]
    assert fixes and fixes[0].kind == "wait_handle"
    fixed = simulate_oplog(log_, fixes=fixes, base=trace)
    assert analyse_hazards(fixed) == []
    injected = [op for op in fixed.ops if op.kind == "wait"]
    assert injected and all(op.line is None and op.location == "ex.jsonl:3" for op in injected)


# --- errors: one line, FILE:LINE: ----------------------------------------------------------------------

ERRORS = [
    ('{"op":"launch"', 1, "malformed JSON"),
    ('{"op":"launch","dur":NaN}', 1, "malformed JSON"),
    ('{"op":"launch","x":1,"x":2}', 1, "duplicate field 'x'"),
    ("[1, 2]", 1, "expected a JSON object, got array"),
    ('"launch"', 1, "expected a JSON object, got string"),
    ('{"rank":0}', 1, "missing required field 'op'"),
    ('{"op":7}', 1, "field 'op' must be a string"),
    ('{"op":"lanch"}', 1, "unknown op 'lanch'"),
    ('{"op":"launch","wirtes":["x"]}', 1, "unknown field 'wirtes' for op 'launch'"),
    ('{"op":"record"}', 1, "missing required field 'event' for op 'record'"),
    ('{"op":"isend","tensors":["x"]}', 1, "missing required field 'peer' for op 'isend'"),
    ('{"op":"all_reduce","group":"tp"}', 1, "missing required field 'tensors'"),
    ('{"op":"all_reduce","tensors":["x"],"inputs":["y"],"outputs":["y"]}', 1, "not both"),
    ('{"op":"launch","dur":"3"}', 1, "field 'dur' must be a finite number, got string"),
    ('{"op":"launch","dur":-3}', 1, "negative dur -3"),
    ('{"op":"launch","rank":-1}', 1, "field 'rank' must be a non-negative integer, got -1"),
    ('{"op":"launch","rank":true}', 1, "field 'rank' must be a non-negative integer, got boolean"),
    ('{"op":"launch","host":""}', 1, "field 'host' must be a non-empty string"),
    ('{"op":"launch","name":3}', 1, "field 'name' must be a string, got number"),
    ('{"op":"wait","handle":"h","blocking":"yes"}', 1, "unknown handle"),
    ('{"op":"isend","tensors":[],"peer":1,"handle":"h"}\n{"op":"wait","handle":"h","blocking":1}',
     2, "field 'blocking' must be a boolean"),
    ('{"op":"launch","writes":"x"}', 1, "field 'writes' must be an array of buffer refs"),
    ('{"op":"launch","writes":[3]}', 1, "a buffer ref in 'writes' must be"),
    ('{"op":"launch","reads":[{"offset":0}]}', 1, "missing its 'buffer'"),
    ('{"op":"launch","reads":[{"buffer":"x","size":1}]}', 1, "unknown field 'size' in a buffer ref"),
    ('{"op":"launch","writes":[{"buffer":"x","window":[0.5,0.2]}]}', 1, "bad window [0.5, 0.2]"),
    ('{"op":"launch","writes":[{"buffer":"x","window":[0.5]}]}', 1, "bad window [0.5]"),
    ('{"op":"launch","writes":[{"buffer":"x","window":[0,2]}]}', 1, "bad window [0, 2]"),
    ('{"op":"launch","writes":[{"buffer":"x","offset":-4}]}', 1, "field 'offset' must be"),
    ('{"op":"alloc","buffer":"x","nbytes":10}\n\n{"op":"launch","writes":[{"buffer":"x",'
     '"offset":5,"nbytes":6}]}', 3, "view [5:11] of buffer 'x' is outside its 10 bytes "
     "(allocated at line 1)"),
    ('{"op":"alloc","buffer":"x","nbytes":10}\n{"op":"free","buffer":"x"}\n'
     '{"op":"launch","reads":[{"buffer":"x","offset":10}]}', 3, "view [10:] of buffer 'x'"),
    ('{"op":"wait","handle":"h"}', 1, "wait on unknown handle 'h' (no earlier line of rank 0"),
    ('{"op":"query","handle":"h"}', 1, "query on unknown handle 'h'"),
    ('{"op":"isend","rank":1,"tensors":["x"],"peer":0,"handle":"h"}\n{"op":"wait","handle":"h"}',
     2, "wait on unknown handle 'h'"),  # handles are per rank
    ('{"op":"wait","handle":"h"}\n{"op":"isend","tensors":["x"],"peer":1,"handle":"h"}',
     1, "unknown handle"),  # issued later: program order
    ('{"op":"isend","tensors":["x"],"peer":1}\n{"op":"send_object","peer":1,"group":"pp"}',
     2, "group 'pp' is used by gloo op 'send_object' here but by nccl ops at line 1"),
    ('{"op":"all_reduce","tensors":["x"],"group":"tp","ranks":[1,2]}', 1,
     "ranks [1, 2] of this all_reduce do not include its own rank 0"),
    ('{"op":"all_reduce","tensors":["x"],"group":"tp","ranks":[0,0]}', 1, "names a rank twice"),
    ('{"op":"all_reduce","tensors":["x"],"group":"tp","ranks":[0,1]}\n'
     '{"op":"isend","tensors":["x"],"group":"tp","peer":2}', 1,
     "ranks [0, 1] differ from the ranks [0, 1, 2] of group 'tp'"),
    ('# header\n\n   \n{"op":"launch"}\n{"op":"bogus"}', 5, "unknown op 'bogus'"),
    ('{"op":"launch","name":"ok \\ud83d\\ude00"}\n{"op":"launch","name":"x\\uDC00"}', 2,
     "unpaired surrogate escape (\\udc00): not text"),  # no report could print it
]


@pytest.mark.parametrize("text,lineno,fragment", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors_name_file_and_line(tmp_path, text, lineno, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text(text + "\n")
    with pytest.raises(ModelError) as exc:
        load_oplog(str(path))
    msg = str(exc.value)
    assert msg.startswith(f"{path}:{lineno}: "), msg
    assert fragment in msg, msg
    assert "\n" not in msg


def test_simulate_from_a_path(tmp_path):
    path = tmp_path / "ex.jsonl"
    path.write_text(EXAMPLE)
    for arg in (path, str(path)):
        trace = simulate_oplog(arg)
        assert trace.source == str(path) and trace.ops[0].location == f"{path}:1"


def test_error_invalid_utf8(tmp_path):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b'{"op":"launch"}\n{"op":"launch","name":"\xff"}\n')
    with pytest.raises(ModelError, match=re.escape(f"{path}:2: not valid UTF-8")):
        load_oplog(str(path))


def test_error_missing_file(tmp_path):
    path = tmp_path / "nope.jsonl"
    with pytest.raises(ModelError, match=re.escape(f"{path}: cannot read the op log")):
        load_oplog(str(path))


def test_error_at_replay_names_the_line():
    with pytest.raises(ModelError, match=r"^r\.jsonl:2: .*max_ops"):
        run(log({"op": "launch"}, {"op": "launch"}), "r.jsonl", max_ops=3)


@pytest.mark.parametrize("path", ("0", "1"))
def test_a_bound_passed_by_several_ranks_names_the_line_that_passed_it_first(monkeypatch, path):
    """Rank 0 runs first: line 3 makes the fourth op. Rank 1, due at the same step, passes the
    bound too at line 2, but the error is where the run first went past it (the engine named
    line 2 while the last thread to fail overwrote the first one's error). Both paths: the
    engine's (``STREAMSIM_NATIVE=0``) and the compiled replay's, which words it itself."""
    monkeypatch.setenv("STREAMSIM_NATIVE", path)
    text = log({"op": "launch", "stream": "s"}, {"op": "launch", "rank": 1, "stream": "s"},
               {"op": "launch", "stream": "s"})
    with pytest.raises(ModelError, match=r"^r\.jsonl:3: the model issued more than 3 ops"):
        run(text, "r.jsonl", max_ops=3)


def test_crlf_and_bom_and_comments_keep_physical_line_numbers():
    text = '\ufeff# c\r\n\r\n{"op":"launch","writes":["x"]}\r\n  # indented comment\n{"op":"launch","writes":["x"],"stream":"s"}\r\n'
    trace = run(text)
    assert sorted({op.line for op in trace.ops}) == [3, 5]


def test_empty_log_is_an_empty_trace():
    trace = run("# nothing\n\n")
    assert trace.ops == () and trace.stall is None


# --- replay semantics -------------------------------------------------------------------------------

def stream_ops(trace: Trace, kind: str | None = None) -> list:
    return [op for op in trace.ops if op.agent.kind == "stream" and (kind is None or op.kind == kind)]


def test_defaults_rank_host_stream_name_dur():
    trace = run(log({"op": "launch"}, {"op": "host"}))
    k = stream_ops(trace, "launch")[0]
    assert (k.agent.rank, k.agent.name, k.name, k.duration) == (0, "compute", "launch", 1.0)
    h = next(op for op in trace.ops if op.kind == "host")
    assert (str(h.agent), h.name, h.duration) == ("rank0/main", "host", 1.0)


def test_buffers_sized_by_largest_extent_and_by_alloc():
    trace = run(log(
        {"op": "launch", "writes": ["x", {"buffer": "x", "offset": 100, "nbytes": 28}]},
        {"op": "launch", "reads": [{"buffer": "x", "offset": 8}], "rank": 1},
        {"op": "alloc", "buffer": "y", "nbytes": 64, "stream": "side"},
        {"op": "launch", "writes": ["y", {"buffer": "y", "offset": 60, "window": [0.9, 1]}]},
        {"op": "launch", "reads": ["z"]},
    ))
    views = sorted((a.view.rank, op.line, a.view.buffer, a.view.offset, a.view.nbytes, a.window)
                   for op in stream_ops(trace, "launch") for a in op.accesses)
    views = [v[:1] + v[2:] for v in views]
    assert views == [(0, "x", 0, 128, (0.0, 1.0)), (0, "x", 100, 28, (0.0, 1.0)),
                     (0, "y", 0, 64, (0.0, 1.0)), (0, "y", 60, 4, (0.9, 1.0)),
                     (0, "z", 0, 1, (0.0, 1.0)),  # no size named anywhere: 1 byte
                     (1, "x", 8, 1, (0.0, 1.0))]  # rank 1's x is other memory, sized by its refs
    alloc = next(op for op in trace.ops if op.kind == "alloc")
    assert (str(alloc.agent), alloc.line) == ("rank0/main", 3)
    assert (alloc.attrs["stream"], alloc.attrs["buffer"], alloc.attrs["nbytes"]) == ("side", "y", 64)


def test_free_goes_to_the_allocation_stream_and_waits_recorded_streams():
    trace = run(log(
        {"op": "alloc", "buffer": "x", "nbytes": 16, "stream": "side"},
        {"op": "launch", "writes": ["x"], "stream": "other", "dur": 50},
        {"op": "record_stream", "buffer": "x", "stream": "other"},
        {"op": "free", "buffer": "x"},
        {"op": "free", "buffer": "never_alloced"},
    ))
    frees = stream_ops(trace, "free")
    kernel = stream_ops(trace, "launch")[0]
    assert frees[0].agent.name == "side" and frees[0].after == (kernel.id,)
    assert frees[0].start == 50.0
    assert frees[1].agent.name == "compute" and frees[1].accesses[0].view.nbytes == 1


def test_free_without_record_stream_is_use_after_free():
    ops = [{"op": "alloc", "buffer": "x", "nbytes": 16},
           {"op": "launch", "writes": ["x"], "stream": "other", "dur": 50},
           {"op": "free", "buffer": "x"}]
    trace = run(log(*ops))
    assert [(h.kind, sorted(lines_of(trace, h))) for h in analyse_hazards(trace)] == \
        [("use-after-free", [2, 3])]
    ops.insert(2, {"op": "record_stream", "buffer": "x", "stream": "other"})
    assert analyse_hazards(run(log(*ops))) == []


def test_free_races_a_use_that_a_later_write_replaced():
    """The use on 'side' ran before 'fill' rewrote x (WAR, reported), and the free is ordered after
    fill but not after the use: the allocator may hand x on while the use still reads it. The
    last-write and reads-since rules alone lose the use at fill's write; the free still finds it."""
    ops = [{"op": "alloc", "buffer": "x", "nbytes": 16},
           {"op": "launch", "name": "use", "reads": ["x"], "stream": "side", "dur": 50},
           {"op": "launch", "name": "fill", "writes": ["x"]},
           {"op": "free", "buffer": "x"}]
    trace = run(log(*ops))
    assert [(h.kind, sorted(lines_of(trace, h))) for h in analyse_hazards(trace)] == \
        [("WAR", [2, 3]), ("use-after-free", [2, 4])]
    ops.insert(3, {"op": "record_stream", "buffer": "x", "stream": "side"})
    assert [h.kind for h in analyse_hazards(run(log(*ops)))] == ["WAR"]


def test_use_issued_after_the_free_gets_no_event_fix():
    """An event from the free to the use would order them and hide the bug, not fix it."""
    trace = run(log({"op": "free", "buffer": "x"},
                    {"op": "launch", "name": "use", "reads": ["x"], "stream": "side"}))
    (h,) = analyse_hazards(trace)
    assert h.kind == "use-after-free" and h.fix is None
    from streamsim.analysis.fixes import no_fix_reason
    assert "issued after" in no_fix_reason(trace, h)


def test_use_and_second_free_after_a_free_are_warned_until_a_new_alloc():
    trace = run(log({"op": "alloc", "buffer": "x", "nbytes": 16},
                    {"op": "free", "buffer": "x"},
                    {"op": "launch", "name": "late", "reads": ["x"]},
                    {"op": "free", "buffer": "x"},
                    {"op": "alloc", "buffer": "x", "nbytes": 16},
                    {"op": "launch", "name": "fresh", "writes": ["x"]},
                    {"op": "free", "buffer": "x"}))
    notes = [(n.kind, trace.ops[n.op].line) for n in trace.notes]
    assert notes == [("use-after-free", 3), ("double-free", 4)]  # lines 6 and 7: a new life
    assert analyse_hazards(trace) == []  # one stream: ordered, so no race, only the warnings


def test_model_use_after_free_is_noted_and_a_new_buffer_is_a_new_life():
    def prog(h):
        x = h.buffer("x", 16)
        h.free(x)
        h.launch("late", reads=[x])
        x = h.buffer("x", 16)
        h.launch("fresh", writes=[x])
    sim = ss.Simulation()
    sim.spawn(0, prog)
    trace = sim.run()
    assert [(n.kind, trace.ops[n.op].name) for n in trace.notes] == [("use-after-free", "late")]


def test_events_are_per_rank_and_waits_order_streams():
    trace = run(log(
        {"op": "launch", "stream": "a", "dur": 10},
        {"op": "record", "event": "e", "stream": "a"},
        {"op": "wait_event", "event": "e", "stream": "b"},
        {"op": "launch", "stream": "b"},
        {"op": "wait_event", "event": "e", "rank": 1},  # rank 1's e: never recorded
        {"op": "sync_event", "event": "e"},
    ))
    rec = stream_ops(trace, "record")[0]
    wait = next(op for op in stream_ops(trace, "wait_event") if op.agent.rank == 0)
    assert wait.after == (rec.id,)
    assert stream_ops(trace, "launch")[1].start == 10.0
    assert [(n.kind, trace.op(n.op).line) for n in trace.notes] == [("event-never-recorded", 5)]
    sync = next(op for op in trace.ops if op.kind == "sync_event")
    assert sync.after == (rec.id,) and sync.end == 10.0


def test_syncs_block_the_host():
    trace = run(log(
        {"op": "launch", "stream": "a", "dur": 10},
        {"op": "launch", "stream": "b", "dur": 20},
        {"op": "sync_stream", "stream": "a"},
        {"op": "host", "name": "after_a", "dur": 0},
        {"op": "sync_device"},
        {"op": "host", "name": "after_all", "dur": 0},
    ))
    host = {op.name: op.start for op in trace.ops if op.kind == "host"}
    assert host == {"after_a": 10.0, "after_all": 20.0}


def test_handle_name_reuse_newest_wins():
    trace = run(log(
        {"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "dur": 5, "name": "s1"},
        {"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "dur": 5, "name": "s2"},
        {"op": "wait", "handle": "h"},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0},
    ))
    wait = stream_ops(trace, "wait")[0]
    assert trace.op(wait.after[0]).name == "s2"


def test_nccl_wait_on_current_stream_and_blocking_wait():
    trace = run(log(
        {"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "dur": 30},
        {"op": "wait", "handle": "h", "stream": "side"},
        {"op": "wait", "handle": "h", "blocking": True},
        {"op": "host", "name": "next", "dur": 0},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0},
    ))
    nb = stream_ops(trace, "wait")[0]
    assert nb.agent.name == "side"
    blocking = next(op for op in trace.ops if op.kind == "wait" and op.agent.kind == "host"
                    and op.attrs.get("blocking"))
    assert blocking.end == 30.0
    assert next(op for op in trace.ops if op.name == "next").start == 30.0


def test_query_result_comes_from_simulated_time():
    trace = run(log(
        {"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h", "dur": 30},
        {"op": "query", "handle": "h", "name": "early"},
        {"op": "host", "dur": 40},
        {"op": "query", "handle": "h", "name": "late"},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0},
    ))
    q = {op.name: op for op in trace.ops if op.kind == "query"}
    assert (q["early"].attrs["result"], q["late"].attrs["result"]) == (False, True)
    assert q["early"].after == () and len(q["late"].after) == 1


def test_wait_on_a_handle_of_another_thread():
    trace = run(log(
        {"op": "host", "host": "comm", "dur": 50},
        {"op": "isend", "host": "comm", "tensors": ["x"], "peer": 1, "handle": "h", "dur": 5},
        {"op": "wait", "host": "main", "handle": "h", "blocking": True},
        {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0},
    ))
    wait = next(op for op in trace.ops if op.kind == "wait")
    assert wait.agent.name == "main" and wait.end == 55.0
    assert trace.stall is None


def test_wait_on_a_handle_another_thread_never_issues_is_a_stall():
    trace = run(log(
        {"op": "recv_object", "host": "comm", "peer": 1},  # never sent: comm blocks for good
        {"op": "isend", "host": "comm", "tensors": ["x"], "peer": 1, "handle": "h"},
        {"op": "wait", "host": "main", "handle": "h"},
    ))
    blocked = {str(b.agent): b.reason for b in trace.stall.blocked}
    assert blocked["rank0/main"] == ("wait at line 3 waits for line 2 of thread 'comm' to be "
                                     "issued (lines take effect in line order)")
    assert "rank0/comm" in blocked


def test_gloo_objects_and_groups():
    trace = run(log(
        {"op": "send_object", "peer": 1, "nbytes": 100, "dur": 7},
        {"op": "isend_object", "peer": 1, "handle": "o", "dur": 3, "group": "meta"},
        {"op": "wait", "handle": "o"},
        {"op": "recv_object", "rank": 1, "peer": 0},
        {"op": "recv_object", "rank": 1, "peer": 0, "group": "meta"},
    ))
    send = next(op for op in trace.ops if op.kind == "send_object")
    assert send.attrs["group"] == "cpu" and send.duration == 7.0
    assert stream_ops(trace, "isend_object")[0].agent.name == "gloo:meta"
    wait = next(op for op in trace.ops if op.kind == "wait")
    assert wait.agent.kind == "host" and wait.end == 10.0  # gloo wait blocks the host
    assert trace.stall is None and trace.notes == ()


def test_collectives_in_place_and_out_of_place():
    trace = run(log(
        {"op": "all_reduce", "tensors": ["g"], "group": "dp", "ranks": [0, 1], "dur": 10},
        {"op": "all_reduce", "tensors": ["g"], "group": "dp", "rank": 1, "dur": 10},
        {"op": "all_gather", "inputs": [{"buffer": "s", "nbytes": 4}], "outputs": ["full"],
         "group": "dp", "rank": 1, "dur": 20, "handle": "ag"},
        {"op": "all_gather", "inputs": [{"buffer": "s", "nbytes": 4}], "outputs": ["full"],
         "group": "dp", "dur": 20, "handle": "ag"},
        {"op": "wait", "handle": "ag", "rank": 1},
    ))
    ar = stream_ops(trace, "all_reduce")
    assert {a.mode for a in ar[0].accesses} == {"read", "write"}
    assert all(op.end == 10.0 for op in ar) and sorted(op.joins for op in ar) == \
        sorted([(ar[1].id,), (ar[0].id,)])
    ag = stream_ops(trace, "all_gather")
    assert [(a.mode, a.view.buffer) for a in ag[0].accesses] == [("read", "s"), ("write", "full")]
    assert ag[0].attrs["nbytes"] == 1  # from the outputs' sizes: full is named by name only
    assert trace.stall is None


def test_unmatched_send_is_a_note_and_unmatched_recv_a_stall():
    trace = run(log({"op": "isend", "tensors": ["x"], "peer": 1}))
    assert [n.kind for n in trace.notes] == ["unmatched-send"] and trace.stall is None
    trace = run(log({"op": "irecv", "tensors": ["x"], "peer": 1}))
    assert trace.stall is not None
    assert [b.agent.name for b in trace.stall.blocked] == ["nccl:pp"]


def test_rendezvous_deadlock_is_a_stall():
    big = 1 << 20
    trace = run(log(
        {"op": "isend", "rank": 0, "tensors": [{"buffer": "a", "nbytes": big}], "peer": 1},
        {"op": "irecv", "rank": 0, "tensors": [{"buffer": "b", "nbytes": big}], "peer": 1},
        {"op": "isend", "rank": 1, "tensors": [{"buffer": "a", "nbytes": big}], "peer": 0},
        {"op": "irecv", "rank": 1, "tensors": [{"buffer": "b", "nbytes": big}], "peer": 0},
    ))
    assert trace.stall is not None
    assert sorted(str(b.agent) for b in trace.stall.blocked) == ["rank0/nccl:pp", "rank1/nccl:pp"]


STUCK_WAITS = {  # a host blocked for good waiting on an op that never ends
    "wait": {"op": "wait", "handle": "r", "blocking": True},
    "sync_device": {"op": "sync_device"},
    "sync_stream": {"op": "sync_stream", "stream": "nccl:pp"},
}


@pytest.mark.parametrize("stuck", sorted(STUCK_WAITS))
def test_a_wait_a_stall_left_blocked_orders_nothing_and_is_reported(stuck, tmp_path, capsys):
    """The blocked op's wait never held: ``after`` (ops that ended before it started) must not list
    the op it still waits for, or the analysis finds the trace inconsistent and crashed with a
    traceback instead of reporting the deadlock. What it waited for is kept in
    ``attrs["waiting_for"]`` (so a waited handle is not reported as never waited)."""
    from streamsim.cli.main import main
    from streamsim.analysis.liveness import unwaited_handles
    from streamsim.trace import waited_on
    text = log({"op": "irecv", "peer": 1, "tensors": ["b"], "handle": "r"}, STUCK_WAITS[stuck])
    trace = run(text)
    host = [op for op in trace.ops if op.kind == stuck and op.agent.kind == "host"]
    assert len(host) == 1 and host[0].attrs.get("unfinished") is True
    recv = next(op for op in trace.ops if op.kind == "irecv" and op.agent.kind == "stream")
    assert recv.id not in host[0].after and waited_on(host[0]) == (recv.id,)
    assert (recv.id in unwaited_handles(trace)) == (stuck != "wait")
    path = tmp_path / "stuck.jsonl"
    path.write_text(text)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr()
    assert "DEADLOCK" in out.out and out.err == ""
    _, again = round_trip(trace)  # the dump still names what the op waited for
    assert [waited_on(op) != () for op in again.ops if op.kind == stuck] == [True] * len(host)


def test_a_stall_that_drops_queued_ops_names_the_blocked_ops_by_their_trace_ids(tmp_path, capsys):
    """Ops that never started are left out and the rest renumbered: the stall's blocked ops must be
    renumbered too (they pointed past the end of the trace, a traceback in JSON reports), and the
    stream-side wait that never started still counts as a wait of its handle."""
    from streamsim.cli.main import main
    from streamsim.analysis.liveness import unwaited_handles
    text = log({"op": "irecv", "rank": 1, "tensors": ["x"], "peer": 0, "handle": "r"},
               {"op": "wait", "rank": 1, "handle": "r"},  # gates compute, which never runs it
               {"op": "sync_stream", "rank": 1})
    trace = run(text)
    assert trace.stall is not None and len(trace.ops) < 5  # the compute-side wait never started
    by_agent = {str(b.agent): b.op for b in trace.stall.blocked}
    assert by_agent["rank1/compute"] is None  # blocked before its op started: no op in the trace
    assert trace.op(by_agent["rank1/main"]).kind == "sync_stream"
    assert trace.op(by_agent["rank1/nccl:pp"]).kind == "irecv"
    assert unwaited_handles(trace) == []
    path = tmp_path / "dropped.jsonl"
    path.write_text(text)
    assert main(["check", str(path), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(op_of(report, b["op"]) or {}).get("kind") for b in report["deadlock"]["blocked"]] == \
        ["sync_stream", None, "irecv"]
    assert report["warnings"] == []


def test_replay_is_deterministic_and_jitter_is_seeded():
    a, b = run(EXAMPLE), run(EXAMPLE)
    assert [(o.start, o.end) for o in a.ops] == [(o.start, o.end) for o in b.ops]
    j1, j2 = run(EXAMPLE, seed=3, jitter=0.5), run(EXAMPLE, seed=3, jitter=0.5)
    assert [(o.start, o.end) for o in j1.ops] == [(o.start, o.end) for o in j2.ops]
    assert [(o.start, o.end) for o in j1.ops] != [(o.start, o.end) for o in a.ops]


# --- the writer: model -> dump -> load -> simulate ----------------------------------------------------

def pipeline_model(sim: ss.Simulation) -> None:
    """The regression as a model: a forward writes `hidden` in its last tenth; isend never waited."""
    sim.group("pp", [0, 1])

    def stage0(host):
        x = host.buffer("hidden", 1 << 20)
        for t in range(3):
            host.launch("forward", writes=[x.during(0.9, 1.0)], dur=900)
            host.group("pp").isend(x, dst=1)

    def stage1(host):
        y = host.buffer("hidden_in", 1 << 20)
        for t in range(3):
            host.launch("forward", writes=[y], dur=2000)
            host.group("pp").irecv(y, src=0).wait()
    sim.spawn(0, stage0)
    sim.spawn(1, stage1)


def busy_model(sim: ss.Simulation) -> None:
    """Streams, events, allocator, gloo, collectives, polling, blocking waits, two threads a rank."""
    sim.group("pp", [0, 1])
    sim.group("tp", [0, 1, 2])
    sim.group("cpu", [0, 1], backend="gloo")
    sim.group("bw", [0, 1], blocking_wait=True)

    def r0(host):
        x = host.buffer("x", 4096)
        y = host.buffer("y", 4096, stream="side")
        side, ev = host.stream("side"), host.event("e")
        host.launch("k1", writes=[x[0:1024]], dur=10)
        with host.use_stream(side):
            host.launch("k2", reads=[x[512:2048]], writes=[y], dur=30)
            ev.record()
        host.current_stream().wait_event(ev)
        host.launch("k3", reads=[y], dur=5)
        host.record_stream(y, "compute")
        host.free(y)
        w = host.group("pp").isend(x, dst=1, handle="s")
        host.group("cpu").send_object(100, 1)
        w2 = host.group("cpu").isend_object(200_000, 1)
        while not w.is_completed():
            host.sleep(7)
        w2.wait()
        host.group("tp").broadcast(x, src=0)
        host.group("bw").isend(x[0:16], dst=1).wait()
        side.synchronize()
        host.synchronize()
        host.host_work("fill", writes=[x[0:8]], dur=3)

    def r0_helper(host):
        z = host.buffer("x", 4096)
        host.sleep(12)
        host.launch("other", writes=[z[2048:4096]], dur=4, stream="s2")
        host.event("e").synchronize()  # this thread's own Event "e": never recorded

    def r1(host):
        b = host.buffer("b", 4096)
        host.launch("pre", writes=[b], dur=100)
        w = host.group("pp").irecv(b, src=0, handle="r")
        host.group("cpu").recv_object(0)
        host.group("cpu").recv_object(0)
        w.wait()
        host.group("tp").broadcast(b, src=0)
        host.group("bw").irecv(b[0:16], src=0).wait()
        host.launch("use", reads=[b], dur=50)

    def r2(host):
        c = host.buffer("c", 4096)
        host.group("tp").broadcast(c, src=0)
        host.launch("c", reads=[c], dur=3)
    sim.spawn(0, r0)
    sim.spawn(0, r0_helper, thread="helper")
    sim.spawn(1, r1)
    sim.spawn(2, r2)


def reused_handles_model(sim: ss.Simulation) -> None:
    """Handle names reused per step and a wait on the previous step's Work (newest-wins would lie)."""
    sim.group("pp", [0, 1])

    def r0(host):
        x = host.buffer("x", 64)
        prev = None
        for t in range(3):
            host.launch("produce", writes=[x], dur=10)
            w = host.group("pp").isend(x, dst=1, handle="send", dur=25)
            if prev is not None:
                prev.wait()
            prev = w

    def r1(host):
        y = host.buffer("y", 64)
        for t in range(3):
            host.group("pp").irecv(y, src=0, handle="recv")
            host.launch("consume", reads=[y], dur=5)
    sim.spawn(0, r0)
    sim.spawn(1, r1)


def multi_thread_handles_model(sim: ss.Simulation) -> None:
    """Two threads of one rank, both with auto-named handles (isend#1 on each)."""
    sim.group("pp", [0, 1])
    shared = {}

    def main(host):
        x = host.buffer("x", 64)
        shared["w"] = host.group("pp").isend(x, dst=1, dur=40)
        host.sleep(5)

    def comm(host):
        host.sleep(1)
        x = host.buffer("x2", 64)
        w = host.group("pp").isend(x, dst=1, dur=10)
        host.sleep(60)
        shared["w"].wait()
        w.wait()

    def r1(host):
        for b in ("a", "b"):
            host.group("pp").irecv(host.buffer(b, 64), src=0)
    sim.spawn(0, main)
    sim.spawn(0, comm, thread="comm")
    sim.spawn(1, r1)


def lifetime_model(sim: ss.Simulation) -> None:
    """Lifetime bugs the engine notes (a use after the free, a second free), then a new life of the
    same name, and a buffer of a side stream: the op log must keep the freed life going."""
    def r0(host):
        x = host.buffer("x", 32, stream="side")
        host.launch("fill", writes=[x], stream="side", dur=5)
        host.free(x)
        host.launch("late", reads=[x], dur=3)
        host.free(x)
        x = host.buffer("x", 64)
        host.launch("fresh", writes=[x], dur=2)
        host.free(x)
    sim.spawn(0, r0)


MODELS = [pipeline_model, busy_model, reused_handles_model, multi_thread_handles_model,
          lifetime_model]


def simulate_model(build, **kw) -> Trace:
    sim = ss.Simulation(**kw)
    build(sim)
    return sim.run(source=build.__name__)


def shape(trace: Trace) -> dict:
    """Per agent, each op (allocs left out: the writer may add them) with its ordering edges as
    (agent, position) pairs, accesses, timing, handle presence."""
    ops = [op for op in trace.ops if op.kind != "alloc"]
    pos, count = {}, {}
    for op in ops:
        k = str(op.agent)
        pos[op.id] = (k, count.get(k, 0))
        count[k] = count.get(k, 0) + 1
    out: dict = {}
    for op in ops:
        out.setdefault(str(op.agent), []).append((
            op.kind, op.name, tuple((a.view, a.mode, a.window) for a in op.accesses),
            pos.get(op.issuer), tuple(pos[a] for a in op.after if a in pos),
            tuple(pos[j] for j in op.joins),
            op.start, op.end, op.handle is not None, op.attrs.get("result")))
    return out


def stall_shape(trace: Trace):
    if trace.stall is None:
        return None
    return sorted((str(b.agent), b.reason) for b in trace.stall.blocked)


def findings(trace: Trace) -> list:
    return sorted((h.kind, h.buffer, h.range, trace.op(h.first).name, trace.op(h.second).name,
                   h.manifest) for h in analyse_hazards(trace, fixes=False))


def round_trip(trace: Trace) -> tuple[str, Trace]:
    text = oplog_text(trace)
    return text, simulate_oplog(parse_oplog(text, "dump.jsonl"))


@pytest.mark.parametrize("build", MODELS, ids=[m.__name__ for m in MODELS])
@pytest.mark.parametrize("jitter", [0.0, 0.3])
def test_round_trip_same_trace_shape(build, jitter):
    trace = simulate_model(build, seed=7 if jitter else None, jitter=jitter)
    text, again = round_trip(trace)
    assert "\n#" not in text  # every action was expressible (no comment after the header)
    assert shape(again) == shape(trace)
    assert stall_shape(again) == stall_shape(trace)
    assert [n.kind for n in again.notes] == [n.kind for n in trace.notes]


@pytest.mark.parametrize("build", MODELS, ids=[m.__name__ for m in MODELS])
def test_round_trip_same_findings(build):
    trace = simulate_model(build)
    _, again = round_trip(trace)
    assert findings(again) == findings(trace)


def test_round_trip_is_a_fixed_point():
    """Dumping the replay of a dump gives the same log (allocs the writer added included)."""
    trace = simulate_model(busy_model)
    text, again = round_trip(trace)
    assert oplog_text(again).split("\n", 1)[1] == text.split("\n", 1)[1]


def test_reused_handle_names_are_disambiguated():
    text = oplog_text(simulate_model(reused_handles_model))
    waits = [json.loads(ln)["handle"] for ln in text.splitlines() if '"op":"wait"' in ln]
    sends = [json.loads(ln)["handle"] for ln in text.splitlines() if '"op":"isend"' in ln]
    assert sends == ["send~2", "send~3", "send"] and waits == ["send~2", "send~3"]


def test_writer_output_format(tmp_path):
    trace = simulate_model(pipeline_model)
    path = tmp_path / "out.jsonl"
    n = dump_oplog(trace, str(path))
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# streamsim op log (version 2)")
    assert n == len(lines) - 2  # the op lines: not the header, not the declaration
    # the model's group declared with its cost model before the first op (op log v2)
    assert json.loads(lines[1]) == {"op": "group", "group": "pp", "backend": "nccl", "ranks": [0, 1],
                                    "latency": 10.0, "bandwidth": 25000.0, "eager_bytes": 65536,
                                    "blocking_wait": False, "p2p_streams": "per_group"}
    # each host.buffer an alloc line where the model made it (its size, label, line), each op
    # with the model line that issued it (a model's root causes group by them)
    here = f"{os.path.relpath(__file__)}:{inspect.getsourcelines(pipeline_model)[1]}"
    at = int(here.rsplit(":", 1)[1])
    assert json.loads(lines[2]) == {"op": "alloc", "buffer": "hidden", "nbytes": 1 << 20,
                                    "label": "hidden", "site": f"{here[:here.rindex(':')]}:{at + 5}"}
    assert json.loads(lines[3]) == {"op": "launch", "name": "forward", "writes": [
        {"buffer": "hidden", "nbytes": 1 << 20, "window": [0.9, 1.0]}], "dur": 900.0,
        "site": f"{here[:here.rindex(':')]}:{at + 7}"}
    buf = io.StringIO()
    assert dump_oplog(trace, buf) == n and buf.getvalue() == path.read_text()


def test_writer_event_query_becomes_sync_event_or_host():
    def prog(host):
        ev = host.event("e")
        host.launch("k", dur=10)
        ev.record()
        ev.query()  # False at t=0
        host.sleep(20)
        ev.query()  # True
    sim = ss.Simulation()
    sim.spawn(0, prog)
    text = oplog_text(sim.run())
    ops = [json.loads(ln) for ln in text.splitlines()[1:]]
    assert [o["op"] for o in ops] == ["launch", "record", "host", "host", "sync_event"]
    assert ops[2]["dur"] == 0.0 and ops[4]["event"] == "e"


def test_writer_comments_actions_whose_stream_op_never_started():
    sim = ss.Simulation()
    sim.group("pp", [0, 1])

    def r0(host):
        x = host.buffer("x", 64)
        host.group("pp").irecv(x, src=1)  # never matched: the comm stream blocks
        host.group("pp").isend(x, dst=1)  # queued behind it, never starts
    sim.spawn(0, r0)
    trace = sim.run()
    text = oplog_text(trace)
    assert "# rank0/main: isend" in text and "never reached its stream" in text
    again = simulate_oplog(parse_oplog(text, "d.jsonl"))
    assert stall_shape(again) == stall_shape(trace)


# --- hypothesis: malformed logs never crash; valid logs round-trip ---------------------------------

BUFS = st.sampled_from(["a", "b", "c"])
REF = st.one_of(BUFS, st.fixed_dictionaries(
    {"buffer": BUFS},
    optional={"offset": st.integers(0, 48), "nbytes": st.integers(0, 16),
              "window": st.tuples(st.floats(0, 0.5), st.floats(0.5, 1)).map(list)}))
COMMON = {"rank": st.integers(0, 2), "host": st.sampled_from(["main", "t2"]),
          "stream": st.sampled_from(["compute", "s1"]), "dur": st.integers(0, 50)}
HANDLES = st.sampled_from(["h0", "h1"])


def op(name: str, **fields) -> st.SearchStrategy:
    required = {k: v for k, v in fields.items() if not k.startswith("opt_")}
    optional = {k[4:]: v for k, v in fields.items() if k.startswith("opt_")}
    return st.fixed_dictionaries({"op": st.just(name), **required}, optional={**COMMON, **optional})


VALID = st.one_of(
    op("launch", opt_reads=st.lists(REF, max_size=2), opt_writes=st.lists(REF, max_size=2)),
    op("host", opt_writes=st.lists(REF, max_size=1)),
    op("record", event=st.sampled_from(["e0", "e1"])),
    op("wait_event", event=st.sampled_from(["e0", "e1"])),
    op("sync_event", event=st.sampled_from(["e0", "e1"])),
    op("sync_stream"), op("sync_device"),
    op("isend", tensors=st.lists(REF, max_size=1), peer=st.integers(0, 2), opt_handle=HANDLES,
       opt_nbytes=st.sampled_from([8, 1 << 20]), opt_p2p_streams=st.just("per_pair")),
    op("irecv", tensors=st.lists(REF, max_size=1), peer=st.integers(0, 2), opt_handle=HANDLES,
       opt_p2p_streams=st.just("per_pair")),
    op("all_reduce", tensors=st.lists(REF, max_size=1), group=st.just("tp"), opt_handle=HANDLES),
    op("send_object", peer=st.integers(0, 2), opt_nbytes=st.sampled_from([8, 1 << 20])),
    op("recv_object", peer=st.integers(0, 2)),
    op("isend_object", peer=st.integers(0, 2), opt_handle=HANDLES),
    op("wait", handle=HANDLES, opt_blocking=st.booleans()),
    op("query", handle=HANDLES),
    op("alloc", buffer=BUFS, opt_nbytes=st.just(128)),
    op("free", buffer=BUFS), op("record_stream", buffer=BUFS),
)


def corrupt(d: dict, how: int, key: str) -> str | dict:
    d = dict(d)
    if how == 0:
        return json.dumps(d)[:-3]  # broken JSON
    if how == 1:
        d["op"] = "no_such_op"
    elif how == 2:
        d.pop("op")
    elif how == 3:
        d[key if key in d else "rank"] = {"rank": "x", "dur": [1], "peer": -1}.get(key, 3.5)
    elif how == 4:
        d["dur"] = -1
    elif how == 5:
        return {"op": "wait", "handle": "never_issued", "rank": d.get("rank", 0)}
    elif how == 6:
        return "   # a comment" if key == "rank" else ""
    return d


LINE = st.one_of(
    VALID, VALID, VALID,
    st.builds(corrupt, VALID, st.integers(0, 6), st.sampled_from(["rank", "dur", "peer", "op"])))

PATH = "F.jsonl"


def as_text(lines: list) -> str:
    return "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINE, max_size=14))
def test_fuzz_malformed_logs_end_in_one_error_or_a_trace(lines):
    text = as_text(lines)
    try:
        trace = simulate_oplog(parse_oplog(text, PATH), max_ops=10_000, max_time=1e9)
    except ModelError as e:
        assert re.match(rf"^{re.escape(PATH)}:\d+: ", str(e)), str(e)
        assert "\n" not in str(e)
        return
    assert isinstance(trace, Trace)
    n_lines = text.count("\n")
    assert all(1 <= op.line <= n_lines for op in trace.ops)
    for note in trace.notes:
        assert note.kind in ("unmatched-send", "event-never-recorded", "use-after-free",
                             "double-free", "gloo-send-waited-twice")
    findings = analyse(trace)  # and every trace is analysed to a verdict: a stall included
    assert (findings.deadlock is not None) == (trace.stall is not None)


def test_a_sync_before_another_threads_record_keeps_its_event_and_its_line_order():
    """The fuzz below found it: a sync on an event no earlier line records, then a record of it
    on another thread, which the line order between threads holds until the sync is done (at
    1.0). The dump renamed the sync's event (``e0~unrecorded1``, as for a model's Event never
    recorded), so the re-read log had no order between the two and the record ran at 0.0. A
    wait keeps its event's name unless a record of it is at an earlier line."""
    lines = [{"op": "host"}, {"op": "sync_event", "event": "e0"},
             {"op": "record", "event": "e0", "host": "t2"}]
    trace = simulate_oplog(parse_oplog(as_text(lines), PATH))
    assert [op.start for op in trace.ops if op.kind == "record"] == [1.0, 1.0]
    text, again = round_trip(trace)
    assert "unrecorded" not in text
    assert shape(again) == shape(trace)
    assert findings(again) == findings(trace)


def test_a_free_whose_size_only_an_unreached_line_names_is_a_comment_in_the_dump():
    """The fuzz below found it: a free of a buffer alive from the start frees the largest
    extent the log's refs name, here by line 3, which the run never reaches (line 2 blocks for
    good). The dump cannot write line 3 (the trace has no op of it), and a free line says no
    size, so read again the free freed 1 byte, not 2, with no word of it. The dump says so in a
    comment, as for what else it cannot write; a run that reaches every line gets none."""
    lines = [{"op": "free", "buffer": "a"}, {"op": "recv_object", "peer": 0},
             {"op": "launch", "writes": [{"buffer": "a", "offset": 1}]}]
    trace = simulate_oplog(parse_oplog(as_text(lines), PATH))
    assert trace.stall is not None
    text, again = round_trip(trace)
    assert "# rank0/main: this free of 'a' freed 2 bytes in the run" in text
    assert "read again, it frees 1\n" in text
    reached = [lines[0], lines[2]]
    text, again = round_trip(simulate_oplog(parse_oplog(as_text(reached), PATH)))
    assert "\n#" not in text and '{"op":"free","buffer":"a"}' in text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(VALID, max_size=12))
def test_fuzz_valid_logs_round_trip(lines):
    try:
        trace = simulate_oplog(parse_oplog(as_text(lines), PATH))
    except ModelError:
        return  # e.g. a wait before any handle: covered by the test above
    text, again = round_trip(trace)
    if "\n#" in text:  # a stalled run: actions that never reached their stream are comments
        assert trace.stall is not None
        return
    if trace.stall and any("to be issued" in b.reason for b in trace.stall.blocked):
        return  # a thread stuck waiting for another to issue a handle did nothing a trace records
    assert shape(again) == shape(trace)
    assert stall_shape(again) == stall_shape(trace)
    assert findings(again) == findings(trace)


def test_a_false_query_round_trips_to_the_op_it_asked_about():
    """A query that returned False orders nothing, so no edge names its op: the writer must still
    name that op's handle, not the newest of that name in simulated time (here the thread's second
    isend, issued at the same instant)."""
    text = "\n".join([
        '{"op":"isend","rank":0,"host":"t2","tensors":[],"peer":0,"handle":"h1","dur":0}',
        '{"op":"query","handle":"h1"}',
        '{"op":"isend","rank":0,"host":"t2","tensors":[],"peer":0,"handle":"h1"}'])
    trace = simulate_oplog(parse_oplog(text, PATH))
    written, again = round_trip(trace)
    ops = [json.loads(s) for s in written.splitlines()[1:]]
    assert [x.get("handle") for x in ops if x["op"] != "group"] == ["h1", "h1", "h1"]
    assert findings(again) == findings(trace)
