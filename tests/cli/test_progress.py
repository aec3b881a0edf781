"""The progress line of a long check or run: phases on a terminal, nothing otherwise."""
from __future__ import annotations

import io
import time

from streamsim.cli.progress import Progress, progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_command_shows_its_phases_and_clears_the_line():
    """Past the delay the line names the current phase and how many are done; close() stops the
    thread and clears the line (tqdm leave=False) before the report is written."""
    out = _Terminal()
    shown = Progress(["parse", "simulate", "report"], out, delay=0.0, interval=0.01)
    shown("parse")
    time.sleep(0.2)
    shown("simulate")
    time.sleep(0.2)
    shown.close()
    text = out.getvalue()
    assert "streamsim: parse   " in text and "0/3 phases done" in text  # (padded: one column)
    assert "streamsim: simulate" in text and "1/3 phases done" in text
    assert not shown._thread.is_alive()


def test_a_quick_command_shows_nothing():
    """A command that ends within the delay draws no line at all."""
    out = _Terminal()
    shown = Progress(["parse"], out, delay=30.0)
    shown("parse")
    shown.close()
    assert out.getvalue() == ""


def test_no_line_when_stderr_is_not_a_terminal(monkeypatch, tmp_path, capsys):
    """A pipe or a file gets the report and no control characters: check writes nothing to
    stderr."""
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not isinstance(progress(["parse"]), Progress)
    from streamsim.cli import main
    log = tmp_path / "l.jsonl"
    log.write_text('{"op": "launch", "stream": "a", "writes": ["x"]}\n'
                   '{"op": "launch", "stream": "b", "writes": ["x"]}\n')
    monkeypatch.undo()
    assert main(["check", str(log)]) == 1
    assert capsys.readouterr().err == ""
