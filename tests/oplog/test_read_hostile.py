"""Hostile and unlucky op-log inputs (issue 19): every one is exit 2 with one exact line naming the
file (and line), never a traceback, never a clean verdict on nothing, never a hang.

The messages are asserted byte for byte: a faster decoder must keep them.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from streamsim.cli.main import main
from streamsim.oplog import load_oplog, oplog_text, parse_oplog, simulate_oplog
from streamsim.oplog import source
from streamsim.sim.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
HUGE = "1" + "0" * 400  # 10^400: valid JSON, no float can hold it (1329 bits)


def error_of(text: str | bytes, path: str = "h.jsonl") -> str:
    """The one-line error of reading ``text`` as an op-log file."""
    with pytest.raises(ModelError) as exc:
        parse_oplog(text, path, empty_ok=False)
    return str(exc.value)


@pytest.mark.parametrize("line, message", [
    ('{"op":"launch","dur":%s}' % HUGE,
     "h.jsonl:1: field 'dur' must be at most 1e+15 (microseconds), got an integer of 1329 bits"),
    ('{"op":"launch","dur":1e16}',
     "h.jsonl:1: field 'dur' must be at most 1e+15 (microseconds), got 1e+16"),
    ('{"op":"launch","writes":[{"buffer":"x","window":[0,%s]}]}' % HUGE,
     "h.jsonl:1: bad window [0, an integer of 1329 bits] in 'writes': must satisfy "
     "0 <= start <= end <= 1"),
    ('{"op":"launch","writes":[{"buffer":"x","window":[%s]}]}' % HUGE,
     "h.jsonl:1: bad window [an integer of 1329 bits] in 'writes': expected [start, end], "
     "fractions of the op's duration"),
    ('{"op":"launch","rank":%s}' % HUGE,
     "h.jsonl:1: field 'rank' must be at most 2147483647, got an integer of 1329 bits"),
    ('{"op":"launch","rank":2147483648}',
     "h.jsonl:1: field 'rank' must be at most 2147483647, got 2147483648"),
    ('{"op":"isend","tensors":["x"],"peer":%s}' % HUGE,
     "h.jsonl:1: field 'peer' must be at most 2147483647, got an integer of 1329 bits"),
    ('{"op":"isend","tensors":["x"],"peer":1,"nbytes":9223372036854775808}',
     "h.jsonl:1: field 'nbytes' must be at most 9223372036854775807, got 9223372036854775808"),
    ('{"op":"launch","writes":[{"buffer":"x","offset":%s}]}' % HUGE,
     "h.jsonl:1: field 'offset' must be at most 9223372036854775807, got an integer of 1329 bits"),
    ('{"op":"all_reduce","tensors":["x"],"ranks":[0,%s]}' % HUGE,
     "h.jsonl:1: field 'ranks' must hold ranks of at most 2147483647, got an integer of 1329 "
     "bits"),
    ('{"op":"launch","dur":-%s}' % HUGE, "h.jsonl:1: negative dur an integer of 1329 bits"),
])
def test_numbers_out_of_range_are_refused_at_read_time(line, message):
    """Issue 19 item 2: a huge integer literal was an OverflowError traceback (exit 1) in check,
    graph and shrink; every numeric field is now range-checked when read, naming the field."""
    assert error_of(line + "\n") == message


@pytest.mark.parametrize("command", [["check"], ["graph", "-o", "g.dot"],
                                     ["shrink", "-o", "s.jsonl"]])
def test_huge_numbers_are_one_line_in_every_command(tmp_path, capsys, command, monkeypatch):
    """The three commands of the finding: exit 2, one stderr line, no traceback."""
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "huge.jsonl"
    log.write_text('{"op":"launch","writes":["x"]}\n{"op":"launch","dur":%s}\n' % HUGE)
    assert main([command[0], str(log), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err == f"streamsim: {log}:2: field 'dur' must be at most 1e+15 (microseconds), " \
                  "got an integer of 1329 bits\n"


@pytest.mark.parametrize("data, message", [
    (b"", "h.jsonl: no ops: nothing analysed (the file is empty)"),
    (b"  \n\t\n",
     "h.jsonl: no ops: nothing analysed (the file holds only blank lines and comments)"),
    (b"# just a comment\n# and another\n",
     "h.jsonl: no ops: nothing analysed (the file holds only blank lines and comments)"),
    (b"\xef\xbb\xbf", "h.jsonl: no ops: nothing analysed (the file holds only blank lines and "
     "comments)"),
    ('# a comment\u2028{"op":"launch"}\n'.encode(),
     "h.jsonl:1: a comment holds U+2028, which some editors show as a line break: anything after "
     "it on this line would be ignored; remove it"),
    ('{"op":"launch"}\n# x\x85{"op":"launch"}\n'.encode(),
     "h.jsonl:2: a comment holds U+0085, which some editors show as a line break: anything after "
     "it on this line would be ignored; remove it"),
])
def test_no_ops_is_an_error_not_a_clean_verdict(data, message):
    """Issue 19 item 3: empty files, whitespace, comments only, a BOM only, separators hidden behind
    a comment were all read as "0 hazards", exit 0."""
    assert error_of(data) == message


def test_no_ops_through_the_cli_is_exit_2(tmp_path, capsys):
    log = tmp_path / "empty.jsonl"
    log.write_text("# nothing here\n")
    assert main(["check", str(log)]) == 2
    assert capsys.readouterr() == ("", f"streamsim: {log}: no ops: nothing analysed (the file "
                                       "holds only blank lines and comments)\n")


def _demo_log() -> str:
    from streamsim.sim.runner import simulate
    return oplog_text(simulate(str(ROOT / "models" / "vllm_pp.py"), "regressed_49274"))


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_every_line_ending_reads_the_same_ops(ending):
    """Issue 19 item 3: the vLLM demo log with CR-only endings was one comment line: 0 hazards,
    exit 0. ``\\n``, ``\\r\\n`` and a lone ``\\r`` all end a line (the choice documented in the
    README), with the same line numbers."""
    text = _demo_log()
    assert text.startswith("# ")  # the header comment that swallowed the whole CR-only file
    unix = parse_oplog(text, "d.jsonl")
    other = parse_oplog(text.replace("\n", ending).encode(), "d.jsonl")
    assert len(other.lines) == len(unix.lines) > 600
    assert [(ln.lineno, ln.op, ln.name) for ln in other.lines] == \
        [(ln.lineno, ln.op, ln.name) for ln in unix.lines]
    assert parse_oplog(text.replace("\n", ending), "d.jsonl").lines == other.lines  # str input


def test_cr_only_demo_log_reports_its_hazards(tmp_path, capsys):
    path = tmp_path / "demo_cr.jsonl"
    path.write_bytes(_demo_log().replace("\n", "\r").encode())
    assert main(["check", str(path), "--format", "json"]) == 1
    assert '"kind":"WAR"' in capsys.readouterr().out


def test_shrink_reads_cr_only_logs_with_the_readers_line_numbers(tmp_path, capsys):
    """shrink splits lines itself to write the kept ones back: the same rule as the reader."""
    text = ('{"op":"launch","name":"a","writes":["x"]}\r{"op":"launch","name":"pad"}\r'
            '{"op":"launch","name":"b","stream":"s","writes":["x"]}\r')
    src, out = tmp_path / "cr.jsonl", tmp_path / "small.jsonl"
    src.write_bytes(text.encode())
    assert main(["shrink", str(src), "-o", str(out), "-q"]) == 0
    kept = out.read_text().splitlines()
    assert kept[0].endswith("source lines 1, 3") and len(kept) == 3


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_devices_are_refused(device, capsys):
    """Issue 19 item 11: /dev/zero read without limit into a MemoryError traceback; /dev/null was
    a clean verdict on nothing."""
    assert main(["check", device]) == 2
    assert capsys.readouterr().err == \
        f"streamsim: {device}: cannot read the op log: a character device, not a file\n"


def test_a_fifo_without_writer_does_not_block(tmp_path):
    """Issue 19 item 11: `check` on a FIFO nobody writes to blocked for ever in open()."""
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    result = []
    worker = threading.Thread(target=lambda: result.append(_error_or_none(fifo)), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the thread so that the test process can end
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO without a writer blocked")
    assert result == [f"{fifo}: no ops: nothing analysed (the file is empty)"]


def _error_or_none(path) -> str | None:
    try:
        load_oplog(path)
    except ModelError as e:
        return str(e)
    return None


def test_a_pipe_is_read_whole_up_to_a_bound(tmp_path, monkeypatch):
    """A pipe with a writer is read to its end (``cat log | streamsim check /dev/stdin``), and
    refused past :data:`MAX_PIPE_BYTES` instead of growing without limit."""
    line = b'{"op":"launch","writes":["x"]}\n'
    for data, ok in ((line * 3, True), (line * 40, False)):
        r, w = os.pipe()
        writer = threading.Thread(target=lambda: (os.write(w, data), os.close(w)))
        writer.start()
        monkeypatch.setattr(source, "MAX_PIPE_BYTES", 1024)
        path = f"/proc/self/fd/{r}"
        try:
            if ok:
                assert len(load_oplog(path).lines) == 3
            else:
                with pytest.raises(ModelError) as exc:
                    load_oplog(path)
                assert str(exc.value) == (f"{path}: cannot read the op log: more than 1,024 bytes "
                                          "from a pipe: write it to a file first")
        finally:
            writer.join()
            os.close(r)


def test_replay_of_a_read_log_still_works_after_the_checks():
    """The checks change nothing for a valid log: the example replays as before."""
    trace = simulate_oplog(parse_oplog('{"op":"launch","rank":3,"dur":1000000000000000}\n', "x"),
                           max_time=1e16)
    assert trace.ops[-1].end == 1e15
