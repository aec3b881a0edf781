"""``put`` / ``get`` lines (issue 25): a hand-off between host threads of one rank in an op log,
read (one-line errors), replayed in line order whichever of the two is written first, written
back, and written by ``--fixed-out`` as the fix of a race between two threads' host work."""
from __future__ import annotations

import json

import pytest

from streamsim import analyse, check_oplog, dump_oplog
from streamsim.cli.main import main
from streamsim.oplog import parse_oplog, simulate_oplog
from streamsim.sim.errors import ModelError


def log(*lines: dict) -> str:
    return "".join(json.dumps(d) + "\n" for d in lines)


FILL = {"op": "host", "host": "loader", "name": "fill", "writes": ["batch"], "dur": 50}
USE = {"op": "host", "name": "use", "reads": ["batch"], "dur": 5}
PUT = {"op": "put", "host": "loader", "channel": "q"}
GET = {"op": "get", "channel": "q"}


def test_a_get_written_before_its_put_still_takes_it():
    """A thread that blocked in get() before the put is written first; the replay keeps line
    order (the get is taken as it starts), the put then wakes it, and the fill is ordered before
    the use."""
    t = simulate_oplog(parse_oplog(log(GET, FILL, PUT, USE)))
    assert t.stall is None and analyse(t).hazards == ()
    (get,) = [op for op in t.ops if op.kind == "get"]
    assert get.end == 50.0


def test_gets_of_two_threads_take_the_puts_in_line_order():
    """Two consumers of one channel: the first get line takes the first put, even when its thread
    reaches it later in simulated time."""
    text = log({"op": "host", "host": "slow", "name": "busy", "dur": 100},
               {"op": "get", "host": "slow", "channel": "q"},
               {"op": "get", "host": "fast", "channel": "q"},
               {"op": "put", "host": "p", "name": "first", "channel": "q"},
               {"op": "host", "host": "p", "name": "gap", "dur": 5},
               {"op": "put", "host": "p", "name": "second", "channel": "q"})
    t = simulate_oplog(parse_oplog(text))
    gets = {op.agent.name: op for op in t.ops if op.kind == "get"}
    assert t.op(gets["slow"].after[0]).name == "first"
    assert t.op(gets["fast"].after[0]).name == "second"


def test_put_and_get_lines_survive_the_writer(tmp_path):
    text = log(FILL, PUT, GET, USE)
    t = simulate_oplog(parse_oplog(text))
    out = tmp_path / "d.jsonl"
    dump_oplog(t, str(out))
    written = [json.loads(s) for s in out.read_text().splitlines() if not s.startswith("#")]
    assert [(d["op"], d.get("channel")) for d in written if d["op"] in ("put", "get")] == \
        [("put", "q"), ("get", "q")]
    again = simulate_oplog(parse_oplog(out.read_text()))
    assert [(o.kind, o.start, o.end) for o in again.ops if o.kind != "alloc"] == \
        [(o.kind, o.start, o.end) for o in t.ops]


def test_fixed_out_writes_the_handoff_and_the_fixed_log_is_clean(tmp_path, capsys):
    """The race between the loader's fill and the main thread's use: `check --fixed-out` writes a
    put after the fill and a get before the use (a channel name the log does not use), and the
    fixed log checks clean; the fix cost says 0 hazards left."""
    racy = tmp_path / "racy.jsonl"
    racy.write_text(log(FILL, {"op": "put", "host": "loader", "channel": "fix1"}, USE))
    fixed = tmp_path / "fixed.jsonl"
    assert main(["check", str(racy), "--fixed-out", str(fixed)]) == 1
    out = capsys.readouterr().out
    assert "fix: hand off from thread loader to main" in out and "0 hazards left" in out
    lines = fixed.read_text().splitlines()
    assert lines[2] == '{"op":"put","rank":0,"host":"loader","channel":"fix2"}'
    assert lines[4] == '{"op":"get","rank":0,"channel":"fix2"}'
    assert check_oplog(str(fixed)).findings.hazards == ()


@pytest.mark.parametrize("line, message", [
    ({"op": "put"}, "h.jsonl:1: missing required field 'channel' for op 'put'"),
    ({"op": "get", "channel": 3}, "h.jsonl:1: field 'channel' must be a non-empty string, got "
                                  "number"),
    ({"op": "get", "channel": "q", "event": "e"}, "h.jsonl:1: unknown field 'event' for op 'get'"),
])
def test_bad_handoff_lines_are_one_line_errors(line, message):
    with pytest.raises(ModelError) as exc:
        parse_oplog(log(line), "h.jsonl", empty_ok=False)
    assert str(exc.value) == message
