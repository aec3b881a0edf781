"""``streamsim record``'s command line: the program's exit code passed on, and one-line errors
(exit 2) when nothing can be recorded. These runs start no torch process: they are fast."""
from __future__ import annotations

import sys

import pytest

from streamsim.cli.main import main


@pytest.mark.parametrize("argv, code, message", [
    (["record", "-o", "x.jsonl"], 2, "streamsim: streamsim record: no command to run"),
    (["record", "-o", "x.jsonl", "--steps", "3:1", "--", "true"], 2,
     "streamsim: --steps '3:1': expected N:M with N <= M"),
    (["record", "-o", "x.jsonl", "--", "no-such-command-here"], 2,
     "streamsim: streamsim record: command not found: no-such-command-here"),
    (["record", "-o", "x.jsonl", "--", sys.executable, "-c", "raise SystemExit(5)"], 5,
     "streamsim record: nothing recorded (no process of the command called "
     "torch.distributed.init_process_group)"),
    (["record", "-o", "x.jsonl", "--", sys.executable, "-c", "pass"], 2,
     "streamsim record: nothing recorded"),
])
def test_record_passes_the_programs_exit_code_on_and_says_in_one_line_what_went_wrong(
        argv, code, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "x.jsonl").exists()


def test_a_bug_of_streamsims_while_recording_is_exit_3_and_says_so(capsys, monkeypatch):
    import streamsim.record.launch as launch

    def broken(*args, **kwargs):
        raise ValueError("a bug")
    monkeypatch.setattr(launch, "record_command", broken)
    monkeypatch.setenv("STREAMSIM_DEBUG", "1")  # (the traceback on stderr, no file left)
    assert main(["record", "-o", "x.jsonl", "--", "true"]) == 3
    assert "internal error in streamsim while running `streamsim record` (ValueError: a bug)" \
        in capsys.readouterr().err
