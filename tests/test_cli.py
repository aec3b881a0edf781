"""The command line's contract: exit 0 clean, 1 findings, 2 bad input with one line on stderr."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamsim.cli import main

ROOT = Path(__file__).resolve().parent.parent
VLLM = str(ROOT / "models" / "vllm_pp.py")
RACE = ('{"op":"launch","rank":0,"name":"forward[t]","writes":["hidden"],"dur":900}\n'
        '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400}\n'
        '{"op":"launch","rank":0,"name":"forward[t+1]","writes":["hidden"],"dur":900}\n'
        '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","dur":400}\n')


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("streamsim: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, expected", [
    (["run", VLLM, "--variant", "nope"], "unknown variant 'nope'"),
    (["run", VLLM, "--set", "pp=abc"], "--set pp=abc: expected int"),
    (["run", VLLM, "--set", "nope=1"], "unknown parameter 'nope'"),
    (["run", VLLM, "--out", "/proc/streamsim-cannot-write-here"], "/proc/"),
    (["run", "no/such/model.py"], "no/such/model.py: no such model file"),
])
def test_user_mistakes_are_one_line_and_exit_2(argv, expected, capsys):
    """Bad input never shows a traceback: one line naming the field or file, exit code 2."""
    assert main(argv) == 2
    assert expected in _one_error_line(capsys)


def test_bad_op_log_names_file_and_line(tmp_path, capsys):
    log = tmp_path / "bad.jsonl"
    log.write_text(RACE + '{"op":"lunch"}\n')
    assert main(["check", str(log)]) == 2
    assert f"{log}:5: unknown op 'lunch'" in _one_error_line(capsys)


def test_check_exit_codes_and_json(tmp_path, capsys):
    """OPLOG.md's example is a WAR (exit 1); with the wait added it is clean (exit 0)."""
    log = tmp_path / "race.jsonl"
    log.write_text(RACE)
    assert main(["check", str(log), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    (h,) = out["hazards"]
    assert (h["kind"], h["buffer"], h["first"]["line"], h["second"]["line"]) == ("WAR", "hidden", 2, 3)
    lines = RACE.splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + '{"op":"wait","rank":0,"handle":"send_t"}\n'
                   + "".join(lines[2:]))
    assert main(["check", str(log), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["hazards"] == []


def test_run_json_is_byte_identical_across_runs(capsys):
    """Determinism: the same model, parameters and seed give the same bytes."""
    argv = ["run", VLLM, "--variant", "regressed_49274", "--format", "json", "--seed", "3",
            "--jitter", "0.1"]
    assert main(argv) == 1
    first = capsys.readouterr().out
    assert main(argv) == 1
    assert capsys.readouterr().out == first
