"""`--out DIR` is all or nothing (issue 19 item 8), under a kill at any point and under concurrency.

Files were staged, then renamed one by one: a SIGKILL between renames left a set mixed from two
runs plus orphan temp files, and two runs into one folder interleaved. The writer is now killed
(``os._exit`` in a forked child, so no cleanup code runs) before each of its file operations in
turn; after each kill the folder holds the earlier set or the new one, and the next run cleans up.
"""
from __future__ import annotations

import errno
import os
import shutil

import pytest

import streamsim.report.atomic as atomic
from streamsim.cli.main import main

OLD = {"report.md": b"old report", "report.json": b"{}", "hb.svg": b"<svg/>", "trace.json": b"[1]"}
NEW = {"report.md": b"new report" * 1000, "report.json": b'{"x": 1}', "trace.json": b"[2]",
       "timeline.png": b"png"}
NAMES = set(OLD) | set(NEW) | {"report.html", "hb.png", "hb.dot"}
MUTATORS = [("os", "open"), ("os", "write"), ("os", "fsync"), ("os", "close"), ("os", "rename"),
            ("os", "chmod"), ("os", "mkdir"), ("os", "unlink"), ("os", "rmdir"),
            ("shutil", "rmtree"), ("atomic", "_exchange")]


def contents(folder: str) -> dict[str, bytes] | None:
    if not os.path.isdir(folder):
        return None
    out = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def run_killed_at(k: int | None, folder: str, files: dict) -> int:
    """Write ``files`` into ``folder`` in a forked child that dies (``os._exit``, no cleanup)
    just before its ``k``-th file operation; returns how many operations it reached."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        count = [0]
        modules = {"os": os, "shutil": shutil, "atomic": atomic}
        for mod, name in MUTATORS:
            real = getattr(modules[mod], name)

            def counted(*args, _real=real, **kw):
                count[0] += 1
                if count[0] == k:
                    os._exit(137)
                return _real(*args, **kw)
            setattr(modules[mod], name, counted)
        try:
            atomic.replace_folder(folder, files, NAMES)
            code = 0
        except BaseException:
            code = 1
        n = count[0]
        os.write(w, str(n).encode())
        os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    data = os.read(r, 64)
    os.close(r)
    if k is None:
        assert os.waitstatus_to_exitcode(status) == 0
        return int(data)
    return -1


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_kill_before_any_file_operation_leaves_one_whole_set(tmp_path, monkeypatch, exchange):
    """Killed before each file operation in turn: the folder holds the earlier set or the new one
    exactly (without the atomic exchange, also possibly no folder while the two renames happen);
    the next run deletes what the killed one left beside it."""
    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    monkeypatch.setattr(atomic, "STALE_AFTER", 0.0)  # (the killed writer's leftovers are fresh)
    folder = str(tmp_path / "out")
    atomic.replace_folder(folder, OLD, NAMES)
    total = run_killed_at(None, folder, NEW)
    assert total > len(NEW) * 3  # every file is opened, written, synced and closed
    seen = []
    for k in range(1, total + 1):
        atomic.replace_folder(folder, OLD, NAMES)  # (and it cleans up the previous kill's leftovers)
        assert sorted(os.listdir(tmp_path)) == ["out"], k
        run_killed_at(k, folder, NEW)
        state = contents(folder)
        assert state in (OLD, NEW) or (not exchange and state is None), (k, state)
        seen.append("old" if state == OLD else "new" if state == NEW else "none")
    assert seen[0] == "old" and seen[-1] == "new"  # both outcomes happen, in that order
    atomic.replace_folder(folder, NEW, NAMES)
    assert sorted(os.listdir(tmp_path)) == ["out"] and contents(folder) == NEW


def test_concurrent_runs_into_one_folder_never_mix(tmp_path):
    """Two processes write different sets into one folder 15 times each while this one reads it:
    every read (of a folder still in place when read) is one whole set, and so is the end."""
    folder = str(tmp_path / "out")
    sets = [{"report.md": b"A" * 5000, "report.json": b"a"},
            {"report.md": b"B" * 7000, "report.json": b"b", "hb.svg": b"<b/>"}]
    atomic.replace_folder(folder, sets[0], NAMES)
    pids = []
    for i in (0, 1):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for _ in range(15):
                    atomic.replace_folder(folder, sets[i], NAMES)
            except BaseException:
                code = 1
            os._exit(code)
        pids.append(pid)
    reads, codes = 0, {}

    def running() -> bool:
        for p in pids:
            if p not in codes:
                done, status = os.waitpid(p, os.WNOHANG)
                if done:
                    codes[p] = os.waitstatus_to_exitcode(status)
        return len(codes) < len(pids)
    while running() and reads < 2000:
        try:
            fd = os.open(folder, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            got = {}
            for name in os.listdir(fd):
                f = os.open(name, os.O_RDONLY, dir_fd=fd)
                got[name] = os.read(f, 1 << 20)
                os.close(f)
            still = os.stat(folder).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:  # a folder swapped away and being deleted: not a read of it
            continue
        finally:
            os.close(fd)
        if still:
            assert got in sets, got
            reads += 1
    for p in pids:
        if p not in codes:
            codes[p] = os.waitstatus_to_exitcode(os.waitpid(p, 0)[1])
    assert list(codes.values()) == [0, 0]
    assert reads > 0  # (the reader did see the folder while the writers swapped it)
    assert contents(folder) in sets
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_folder_holding_other_files_is_refused_not_replaced(tmp_path, capsys):
    """--out now replaces the whole folder: one that holds a file streamsim did not write is
    refused (exit 2, one line), and left as it was."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    log = tmp_path / "race.jsonl"
    log.write_text('{"op":"launch","writes":["x"]}\n{"op":"launch","stream":"s","writes":["x"]}\n')
    assert main(["check", str(log), "--out", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == (f"streamsim: {folder}: holds 'notes.txt', which streamsim did not write, and the "
                   "whole folder would be replaced: give a new folder, or one that only streamsim "
                   "writes to\n")
    assert os.listdir(folder) == ["notes.txt"]


def test_a_full_disk_names_the_file(tmp_path, monkeypatch, capsys):
    """Issue 19 item 11: "No space left on device" named no file (a write error has none): for
    --out and for a single picture, the file the user asked for is named."""
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    log = tmp_path / "race.jsonl"
    log.write_text('{"op":"launch","writes":["x"]}\n{"op":"launch","stream":"s","writes":["x"]}\n')
    monkeypatch.setattr(os, "fsync", full)
    assert main(["check", str(log), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"streamsim: {tmp_path / 'out' / 'report.md'}: No space "
                                       "left on device\n")
    assert main(["timeline", str(log), "-o", str(tmp_path / "t.png")]) == 2
    assert capsys.readouterr().err == f"streamsim: {tmp_path / 't.png'}: No space left on device\n"
    assert sorted(os.listdir(tmp_path)) == ["race.jsonl"]  # nothing half-written, no temp file


def test_a_refused_folder_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """The refusal came after the whole simulation, analysis and fix costing: a user waited for
    nothing. check and run now refuse such a --out before simulating anything."""
    import streamsim.cli.commands as commands
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")

    def never(*args, **kw):
        raise AssertionError("simulated before refusing --out")
    monkeypatch.setattr(commands, "oplog_report", never)
    monkeypatch.setattr(commands, "_model_report", never)
    log = tmp_path / "race.jsonl"
    log.write_text('{"op":"launch","writes":["x"]}\n')
    model = tmp_path / "m.py"
    model.write_text("def build(sim, p, variant):\n    pass\n")
    assert main(["check", str(log), "--out", str(folder)]) == 2
    assert main(["run", str(model), "--out", str(folder)]) == 2
    assert capsys.readouterr().err.count("which streamsim did not write") == 2


def test_without_the_exchange_a_failed_rename_puts_the_earlier_set_back(tmp_path, monkeypatch):
    """Without renameat2's exchange the earlier set is renamed away first; if putting the new set
    in place then failed, the earlier one stayed under a temporary name that the next run deletes:
    no folder, no results. It is now put back."""
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    folder = str(tmp_path / "out")
    atomic.replace_folder(folder, OLD, NAMES)
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the new set into place
            raise OSError(errno.EIO, "injected")
        real_rename(src, dst)
    monkeypatch.setattr(atomic.os, "rename", rename)
    with pytest.raises(OSError):
        atomic.replace_folder(folder, NEW, NAMES)
    monkeypatch.setattr(atomic.os, "rename", real_rename)
    assert contents(folder) == OLD
