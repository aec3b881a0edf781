"""JSON version 4 loses nothing version 3 said, and keeps its promises to readers.

The property that protects faithfulness: a version-4 report read back as version 3
(:func:`streamsim.report.jsonread.as_v3`) and written as version 3 is, byte for byte, the
``--json-version 3`` report of the same run. It is checked on the generated op logs of the
differential test (every op kind, seeds and jitter, fix costing on and off), on every op log
written out in the tests (deadlocks, warnings, declarations, steps), and on models (micro-batches,
root causes' costs, ``--apply-fixes``). Beside it: every id a version-4 report gives is a row of
``ops`` and every row is named; the tables are one entry a line; ``--json-version 3`` is the
version 3 of before this change, byte for byte; bad ``--json-version`` input is a one-line exit 2.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from streamsim import run_model
from streamsim.cli.main import main
from streamsim.oplog import load_oplog
from streamsim.pipeline import check_oplog
from streamsim.report import jsonv4
from streamsim.report.jsonout import JSON_VERSIONS, dumps_json
from streamsim.report.jsonread import as_v3, op_of
from streamsim.report.jsontext import dumps_indented
from streamsim.report.jsonv4 import OP_COLUMNS, report_json_v4
from streamsim.sim.errors import InputError, ModelError

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
GENERATED = 300  # generated op logs read back (the differential test's generator)


def _differential():
    """tests/native/test_differential.py as a module: its op-log generator and its finder of
    the op logs written out in the tests."""
    spec = importlib.util.spec_from_file_location("differential_logs",
                                                  TESTS / "native" / "test_differential.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DIFF = _differential()


def assert_round_trip(report, what: str) -> dict:
    """Version 4 read back as version 3 is the version-3 text; returns the version-4 object."""
    v4 = json.loads(dumps_json(report))
    v3 = dumps_json(report, version=3)
    back = dumps_indented(as_v3(v4)) + "\n"
    if back != v3:
        diff = DIFF.first_difference(v3, back).replace("python:", "v3:").replace("native:", "v4:")
        raise AssertionError(f"{what}: version 4 read back differs from version 3 at {diff}")
    return v4


def assert_ids_resolve(v4: dict) -> None:
    """Every op id the report gives is a row of ``ops``, and every row is named by one."""
    named = set()
    for h in v4["hazards"]:
        named |= {h["first"], h["second"]}
        if h["fix"] is not None:
            named |= {h["fix"][k] for k in ("before", "handle_op", "record_after")}
    named |= {w["op"] for w in v4["warnings"]}
    if v4["deadlock"] is not None:
        named |= {b["op"] for b in v4["deadlock"]["blocked"]}
    named.discard(None)
    rows = v4["ops"]["rows"]
    assert set(rows) == {str(i) for i in named}
    assert list(rows) == [str(i) for i in sorted(named)]  # ascending ids: one order, any reader
    assert v4["ops"]["columns"] == list(OP_COLUMNS)
    assert all(len(r) == len(OP_COLUMNS) for r in rows.values())


@pytest.mark.parametrize("chunk", range(3))
def test_generated_logs_read_back_as_version_3(tmp_path, chunk):
    path = tmp_path / "gen.jsonl"
    for i in range(chunk * GENERATED // 3, (chunk + 1) * GENERATED // 3):
        path.write_text(DIFF.generated_log(i))
        seed, jitter = DIFF.TIMINGS[i % len(DIFF.TIMINGS)]
        r = check_oplog(load_oplog(path), seed=seed, jitter=jitter, fix_cost=i % 3 != 0)
        assert_ids_resolve(assert_round_trip(r, f"generated log {i}"))


def test_every_op_log_of_the_tests_reads_back_as_version_3(tmp_path):
    compared = deadlocks = warned = 0
    for where, text in DIFF.logs_in_tests():
        path = tmp_path / "t.jsonl"
        try:
            path.write_text(text)
            log = load_oplog(path)
            r = check_oplog(log, fix_cost=True)
        except (InputError, ModelError, UnicodeEncodeError):
            continue  # a log that tests an error: no report
        v4 = assert_round_trip(r, where)
        assert_ids_resolve(v4)
        compared += 1
        deadlocks += v4["deadlock"] is not None
        warned += bool(v4["warnings"])
    assert compared >= 20 and deadlocks >= 1 and warned >= 5, (compared, deadlocks, warned)


def test_models_read_back_as_version_3(pipeline_model):
    """The demo model (root causes' costs, four root causes), micro-batch labels, a fixed run."""
    demo = run_model(str(ROOT / "models" / "vllm_pp.py"), "regressed_49274")
    assert demo.root_cause_costs and demo.findings.root_causes
    assert_ids_resolve(assert_round_trip(demo, "vllm_pp regressed_49274"))
    racy = run_model(pipeline_model(), "racy", apply_fixes=True)
    assert racy.applied is not None
    assert "applied_fixes" in assert_round_trip(racy, "pipe racy --apply-fixes")


def test_as_v3_takes_either_version(pipeline_model):
    report = run_model(pipeline_model(), "racy", fix_cost=False)
    v3 = json.loads(dumps_json(report, version=3))
    assert as_v3(v3) == v3 == as_v3(json.loads(dumps_json(report)))
    with pytest.raises(ValueError, match="streamsim_json 2: as_v3 reads versions 4 and 3"):
        as_v3({**v3, "streamsim_json": 2})


def test_the_round_trip_catches_a_loss(pipeline_model, monkeypatch):
    """The test can fail: a version 4 whose rows dropped the op's step is caught (the rows
    written by the reference, whose op_row is broken here: the compiled writer is held to it by
    tests/native/test_jsonv4.py)."""
    report = run_model(pipeline_model(), "racy", fix_cost=False)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    row = jsonv4.op_row
    monkeypatch.setattr(jsonv4, "op_row", lambda op: row(op)[:4] + [None] + row(op)[5:])
    with pytest.raises(AssertionError, match="version 4 read back differs"):
        assert_round_trip(report, "step dropped")


def test_the_text_is_the_object_an_entry_a_line(pipeline_model):
    """``json.loads`` of the text is :func:`report_json_v4`; the entries of the tables are one
    a line (a reader can grep a table), the rest is indented as version 3 is."""
    report = run_model(pipeline_model(steps=3), "racy", fix_cost=False)
    text = dumps_json(report)
    v4 = json.loads(text)
    assert v4 == json.loads(dumps_indented(report_json_v4(report)))
    assert v4["streamsim_json"] == 4 and list(v4)[-1] == "ops"
    lines = text.splitlines()
    for key in ("hazards", "warnings", "root_causes"):
        start = lines.index(f'  "{key}": [')
        entries = lines[start + 1:start + 1 + len(v4[key])]
        assert [json.loads(x.strip().rstrip(",")) for x in entries] == v4[key]
        assert lines[start + 1 + len(v4[key])] == "  ],"
    start = lines.index('    "rows": {')
    rows = lines[start + 1:start + 1 + len(v4["ops"]["rows"])]
    assert [json.loads("{" + x.strip().rstrip(",") + "}") for x in rows] == \
        [{k: v} for k, v in v4["ops"]["rows"].items()]


def test_stdout_is_written_a_block_at_a_time_with_the_same_bytes(tmp_path, capsys, monkeypatch):
    """``check --format json`` writes the text to stdout as it is made, a block of entries at a
    time: with blocks of 2 entries (several per table) it is still the whole text's bytes."""
    log = tmp_path / "gen.jsonl"
    log.write_text(DIFF.generated_log(7))
    whole = dumps_json(check_oplog(load_oplog(log), fix_cost=False))
    monkeypatch.setattr(jsonv4, "BLOCK", 2)
    assert main(["check", str(log), "--format", "json", "--no-fix-cost"]) in (0, 1)
    streamed = capsys.readouterr().out
    v4 = json.loads(streamed)
    assert len(v4["ops"]["rows"]) > 2 and len(v4["hazards"]) + len(v4["warnings"]) > 2
    assert streamed == whole


def test_an_op_is_found_by_its_id(pipeline_model):
    """``ops.rows[str(id)]`` under ``ops.columns`` is the op as version 3 described it."""
    report = run_model(pipeline_model(), "racy", fix_cost=False)
    v4 = json.loads(dumps_json(report))
    h = v4["hazards"][0]
    op = report.trace.op(h["second"])
    assert dict(zip(v4["ops"]["columns"], v4["ops"]["rows"][str(h["second"])])) == {
        "name": op.name, "kind": op.kind, "agent": str(op.agent), "rank": op.agent.rank,
        "step": op.step, "location": op.location, "start": op.start, "end": op.end,
        "microbatch": None, "line": None}
    assert op_of(v4, h["second"]) == json.loads(dumps_json(report, version=3))["hazards"][0]["second"]


# sha256 of `check --format json --no-fix-cost` of RACE on main before version 4 (1ec82af), the
# log's path replaced by LOG: --json-version 3 must keep writing these bytes for one release.
RACE = ('{"op":"launch","rank":0,"name":"forward[t]","writes":["hidden"],"dur":900,"step":0}\n'
        '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400,"step":0}\n'
        '{"op":"launch","rank":0,"name":"forward[t+1]","writes":["hidden"],"dur":900,"step":1}\n'
        '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","step":0}\n'
        '{"op":"isend","rank":1,"tensors":["y"],"peer":0,"handle":"lost"}\n')
RACE_V3_SHA256 = "bb5c3f962fe234eb3c88b1cea1705903c440de1eebbfd0f5df271e67673805a2"


def test_version_3_is_the_bytes_of_before(tmp_path, capsys):
    log = tmp_path / "race.jsonl"
    log.write_text(RACE)
    assert main(["check", str(log), "--format", "json", "--no-fix-cost", "--json-version", "3"]) == 1
    out = capsys.readouterr().out.replace(str(log), "LOG")
    assert hashlib.sha256(out.encode()).hexdigest() == RACE_V3_SHA256, out


def test_json_version_on_the_command_line(tmp_path, capsys, pipeline_model):
    """``--json-version`` picks the version of stdout and of ``--out``'s report.json (``run`` and
    ``check``); 4 is the default; anything else, or a version where no JSON is written, is one
    line and exit 2."""
    log = tmp_path / "race.jsonl"
    log.write_text(RACE)
    assert main(["run", pipeline_model(), "--format", "json", "--no-fix-cost",
                 "--json-version", "3"]) == 1
    assert json.loads(capsys.readouterr().out)["streamsim_json"] == 3
    for version in JSON_VERSIONS:
        out = tmp_path / f"out{version}"
        assert main(["check", str(log), "--format", "json", "--json-version", str(version),
                     "--out", str(out)]) == 1
        printed = capsys.readouterr().out
        assert json.loads(printed)["streamsim_json"] == version
        assert (out / "report.json").read_text() == printed
    assert main(["check", str(log), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["streamsim_json"] == 4
    for argv, message in ((["--format", "json", "--json-version", "7"],
                           "argument --json-version: invalid choice: 7 (choose from 3, 4)"),
                          (["--json-version", "3"], "--json-version applies to --format json")):
        with pytest.raises(SystemExit) as e:
            code = main(["check", str(log), *argv])
            raise SystemExit(code)
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err and err.count("\n") == 1, err
