"""Every stage handles every kind of the vocabulary (``streamsim.kinds``), so that a new kind cannot
be half-added: an op kind declared there and not read, replayed, written, graphed, drawn or
documented fails here, and so does a fix kind that is not proposed, costed and written.

Each op kind has an example log below (adding a kind means adding its example); each example is
read, simulated, written back as an op log and simulated again, and its ops are placed in the HB
graph and the timeline.
"""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from streamsim import analyse, check_oplog, dump_oplog, parse_oplog, simulate_oplog
from streamsim.analysis.hbgraph import full_graph
from streamsim.kinds import (BY_AGENT, CATEGORIES, DRAWN_EDGE_KINDS, EDGE_KINDS, EDGE_TEXT, FIX_KINDS,
                             OP_KINDS, READS, STATES, WRITES)
from streamsim.oplog.fixed import fixed_oplog_text
from streamsim.oplog.issueorder import _KEYS, NAMED_BY_FIELD, key_maker, touches
from streamsim.oplog.schema import LINE_FIELDS
from streamsim.oplog.replay import LIFE, parse_call
from streamsim.sim.api import Group, Host, Work
from streamsim.report.draw_hb import EDGE_STYLE
from streamsim.report.timeline import CATEGORY, category

DOCS = Path(__file__).resolve().parents[1] / "docs"

_PAIR = [{"op": "launch", "writes": ["x"]}]


def _collective(k: str) -> list[dict]:
    return [{"op": k, "rank": r, "tensors": ["x"]} for r in (0, 1)]


# op kind -> a small log that issues it
EXAMPLES: dict[str, list[dict]] = {
    "launch": _PAIR,
    "host": [{"op": "host", "writes": ["p"]}],
    "record": [*_PAIR, {"op": "record", "event": "e"}],
    "wait_event": [*_PAIR, {"op": "record", "event": "e"},
                   {"op": "wait_event", "stream": "side", "event": "e"}],
    "sync_event": [*_PAIR, {"op": "record", "event": "e"}, {"op": "sync_event", "event": "e"}],
    "sync_stream": [*_PAIR, {"op": "sync_stream"}],
    "sync_device": [*_PAIR, {"op": "sync_device"}],
    "isend": [{"op": "isend", "tensors": ["x"], "peer": 1},
              {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0}],
    "irecv": [{"op": "isend", "tensors": ["x"], "peer": 1},
              {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0}],
    **{k: _collective(k) for k in ("all_gather", "all_reduce", "all_to_all", "broadcast",
                                   "reduce_scatter")},
    "barrier": [{"op": "barrier", "rank": r, "handle": "b"} for r in (0, 1)] +
               [{"op": "wait", "rank": r, "handle": "b"} for r in (0, 1)],
    "reduce": [{"op": "reduce", "rank": r, "tensors": ["x"], "root": 1} for r in (0, 1)],
    "gather": [{"op": "gather", "inputs": ["x"], "root": 1},
               {"op": "gather", "rank": 1, "inputs": ["x"], "outputs": ["l0", "l1"], "root": 1}],
    "scatter": [{"op": "scatter", "inputs": ["l0", "l1"], "outputs": ["x"], "root": 0},
                {"op": "scatter", "rank": 1, "outputs": ["x"], "root": 0}],
    "send_object": [{"op": "send_object", "peer": 1}, {"op": "recv_object", "rank": 1, "peer": 0}],
    "recv_object": [{"op": "send_object", "peer": 1}, {"op": "recv_object", "rank": 1, "peer": 0}],
    "isend_object": [{"op": "isend_object", "peer": 1, "handle": "h"},
                     {"op": "recv_object", "rank": 1, "peer": 0}, {"op": "wait", "handle": "h"}],
    "wait": [{"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h"},
             {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0}, {"op": "wait", "handle": "h"}],
    "query": [{"op": "isend", "tensors": ["x"], "peer": 1, "handle": "h"},
              {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0},
              {"op": "query", "handle": "h"}],
    "alloc": [{"op": "alloc", "buffer": "b", "nbytes": 8}, {"op": "launch", "writes": ["b"]}],
    "free": [{"op": "launch", "writes": ["b"]}, {"op": "free", "buffer": "b"}],
    "record_stream": [{"op": "launch", "stream": "side", "writes": ["b"]},
                      {"op": "record_stream", "stream": "side", "buffer": "b"},
                      {"op": "free", "buffer": "b"}],
    "put": [{"op": "put", "host": "t1", "channel": "q"},
            {"op": "get", "host": "t2", "channel": "q"}],
    "get": [{"op": "put", "host": "t1", "channel": "q"},
            {"op": "get", "host": "t2", "channel": "q"}],
}


def _text(lines: list[dict]) -> str:
    return "".join(json.dumps(d) + "\n" for d in lines)


def test_every_op_kind_has_an_example():
    """A new op kind in ``streamsim.kinds`` needs an example here (and so goes through every
    stage below)."""
    assert set(EXAMPLES) == set(OP_KINDS), \
        f"kinds without an example: {sorted(set(OP_KINDS) - set(EXAMPLES))}"


@pytest.mark.parametrize("kind", sorted(OP_KINDS))
def test_the_replay_call_of_every_op_kind_is_a_public_api_call(kind):
    """A kind's ``replay`` declaration is a call of the public modelling API (a public method of
    Host, Group or Work, taking the arguments it passes) on fields a parsed line has: the replay
    derives its dispatch from it, and a declaration naming a private engine method, a wrong
    parameter or a field the reader does not make fails here rather than in some log's replay."""
    receiver, method, pos, kw = parse_call(OP_KINDS[kind].replay)
    cls = {"host": Host, "group": Group, "work": Work}[receiver]
    assert not method.startswith("_") and callable(getattr(cls, method, None)), \
        f"{kind}: {cls.__name__}.{method} is not a public method"
    inspect.signature(getattr(cls, method)).bind(None, *pos, **{p: None for p, _ in kw})
    fields = {*pos, *(f for _, f in kw)} - {LIFE}
    assert fields <= set(LINE_FIELDS), f"{kind}: not line fields: " \
        f"{sorted(fields - set(LINE_FIELDS))}"


def test_issue_order_knows_every_state_a_kind_touches():
    """Every state an op kind declares it touches (``OpKind.touches``) is one of kinds.STATES,
    read or written, and the issue-order rule makes keys for each STATES name (and no other)."""
    assert set(_KEYS) | set(NAMED_BY_FIELD) == set(STATES)
    for name, k in OP_KINDS.items():
        assert k.touches, f"{name} touches no shared state: its lines are in no line order"
        for state, mode in k.touches:
            base, _, field = state.partition(":")
            assert (state in STATES or base in NAMED_BY_FIELD and field in
                    LINE_FIELDS) and mode in (READS, WRITES), (name, state, mode)
            key_maker(state)


@pytest.mark.parametrize("kind", sorted(OP_KINDS))
def test_every_stage_handles_the_op_kind(kind):
    """Read, replay (issue order between threads included), write back and replay again to the
    same ops; every op is in the HB graph with a known edge kind, and has a timeline category."""
    log = parse_oplog(_text(EXAMPLES.get(kind, [])), f"{kind}.jsonl")
    for ln in log.lines:
        list(touches(ln, False, ["compute"], []))  # (raises for a kind it has no rule for)
    trace = simulate_oplog(log)
    assert kind in {op.kind for op in trace.ops}
    written = dump_oplog_text(trace)
    assert any(json.loads(s).get("op") == kind for s in written.splitlines()
               if s and not s.startswith("#")), f"the writer wrote no {kind} line:\n{written}"
    again = simulate_oplog(parse_oplog(written, f"{kind}-again.jsonl"))

    def shape(t):  # (the writer may state a buffer's life with an alloc line of its own)
        return [(op.kind, str(op.agent), op.start, op.end) for op in t.ops if op.kind != "alloc"]
    assert shape(again) == shape(trace)
    for _, _, edge in full_graph(trace).edges(data="kind"):
        assert edge in EDGE_KINDS, f"{kind}: edge kind {edge!r} is not in kinds.EDGE_KINDS"
    for op in trace.ops:
        assert category(op) in CATEGORY
    assert OP_KINDS[kind].category in {*CATEGORIES, BY_AGENT}
    assert OP_KINDS[kind].wait_edge in {*EDGE_KINDS, BY_AGENT}


def dump_oplog_text(trace) -> str:
    import io
    buf = io.StringIO()
    dump_oplog(trace, buf)
    return buf.getvalue()


def test_every_edge_kind_has_words_and_a_style():
    kinds = set(EDGE_KINDS) | set(DRAWN_EDGE_KINDS)
    assert set(EDGE_TEXT) == kinds
    assert set(EDGE_STYLE) == kinds


def test_every_timeline_category_is_drawn():
    used = {k.category for k in OP_KINDS.values()} - {BY_AGENT} | {"host", "compute"}
    assert used == set(CATEGORIES)


# fix kind -> a racy log whose one hazard that fix orders
RACES: dict[str, list[dict]] = {
    "wait_handle": [{"op": "isend", "tensors": ["x"], "peer": 1, "handle": "s", "dur": 50},
                    {"op": "launch", "writes": ["x"]},
                    {"op": "irecv", "rank": 1, "tensors": ["y"], "peer": 0}],
    "event": [{"op": "launch", "stream": "a", "writes": ["x"], "dur": 50},
              {"op": "launch", "stream": "b", "reads": ["x"]}],
    "event_sync": [{"op": "launch", "writes": ["x"], "dur": 50}, {"op": "host", "reads": ["x"]}],
    "record_stream": [{"op": "launch", "stream": "side", "reads": ["x"], "dur": 50},
                      {"op": "free", "buffer": "x"}],
    "handoff": [{"op": "host", "host": "t1", "writes": ["p"], "dur": 50},
                {"op": "host", "host": "t2", "reads": ["p"]}],
}


def test_every_fix_kind_has_a_race():
    assert set(RACES) == set(FIX_KINDS)


@pytest.mark.parametrize("fix_kind", sorted(FIX_KINDS))
def test_every_stage_handles_the_fix_kind(fix_kind, tmp_path):
    """Proposed, costed (re-simulated with the fix injected) and written as op-log lines that
    leave no hazard."""
    text = _text(RACES.get(fix_kind, []))
    path = tmp_path / "race.jsonl"
    path.write_text(text)
    report = check_oplog(str(path))
    hazards = report.findings.hazards
    assert [h.fix.kind for h in hazards] == [fix_kind]
    assert report.fix_cost is not None
    fixed = fixed_oplog_text(text, report.trace, [h.fix for h in hazards])
    assert not analyse(simulate_oplog(parse_oplog(fixed, "fixed.jsonl"))).hazards


def _docs_op_table() -> dict[str, tuple[set[str], set[str]]]:
    """docs/oplog.md's table of ops: op -> (its fields, the required ones)."""
    text = (DOCS / "oplog.md").read_text()
    table = text.split("## Ops", 1)[1].split("\n\n", 2)[1]
    out = {}
    for row in table.splitlines()[2:]:
        cells = row.split("|")
        fields_cell = cells[2]
        fields = set(re.findall(r"`([a-z_0-9]+)`", re.sub(r"\([^)]*\)", "", fields_cell)))
        required = set(re.findall(r"\*\*`([a-z_0-9]+)`\*\*", fields_cell))
        for op in re.findall(r"`([a-z_]+)`", cells[1]):
            out[op] = (fields, required)
    return out


def test_the_docs_op_table_lists_every_op_kind_with_its_fields():
    docs = _docs_op_table()
    assert set(docs) == set(OP_KINDS), f"docs/oplog.md's op table differs: " \
        f"{sorted(set(docs) ^ set(OP_KINDS))}"
    for name, k in OP_KINDS.items():
        assert docs[name] == (set(k.fields), set(k.required)), name
