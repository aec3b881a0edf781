"""The supervised child keeps what its command made until it exits (``supervise.keep``): the
process ends without freeing a large report object by object; anywhere else nothing is kept."""
from __future__ import annotations

import gc
import os
import signal
import time
import weakref

import pytest

from streamsim.cli import supervise


class Freed:
    """Writes ``freed`` to its file when it is freed."""

    def __init__(self, path):
        self.path = path

    def __del__(self):
        self.path.write_text("freed")


@pytest.mark.skipif(not supervise.enabled(), reason="no fork here: nothing is supervised")
def test_the_child_exits_without_freeing_what_it_kept(tmp_path):
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"

    def work() -> int:
        supervise.keep(Freed(kept))
        Freed(dropped)  # (not kept: freed at once)
        return 3
    assert supervise.supervised(work) == 3
    assert dropped.read_text() == "freed" and not kept.exists()


def test_outside_the_child_nothing_is_kept(tmp_path):
    obj = Freed(tmp_path / "x")
    ref = weakref.ref(obj)
    supervise.keep(obj)
    del obj
    gc.collect()
    assert ref() is None and (tmp_path / "x").read_text() == "freed"


PROGRAM = """import atexit, sys
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
from streamsim.cli.main import program
sys.argv = ["streamsim", "check", "--no-fix-cost", "--format", "json", sys.argv[1]]
sys.exit(program())
"""


@pytest.mark.skipif(not supervise.enabled(), reason="no fork here: nothing is supervised")
@pytest.mark.parametrize("supervised", ["1", "0"])
def test_the_program_ends_at_once_only_where_a_child_did_the_work(tmp_path, supervised):
    """``program``: where the supervised child did the work, the waiting process ends with
    ``os._exit`` (no teardown: its atexit handlers do not run), and its output and exit code
    are the work's; run in the process itself (``STREAMSIM_SUPERVISE=0``) it exits as usual."""
    import os
    import subprocess
    import sys
    log = tmp_path / "race.jsonl"  # (a report larger than a pipe's buffer, written by the child)
    log.write_text("".join(f'{{"op":"launch","name":"k{i}","writes":["x"],"stream":"s{i % 2}"}}\n'
                           for i in range(400)))
    env = {**os.environ, "STREAMSIM_SUPERVISE": supervised}
    got = subprocess.run([sys.executable, "-c", PROGRAM, str(log)], capture_output=True,
                         text=True, env=env, timeout=120)
    same = subprocess.run([sys.executable, "-m", "streamsim", "check", "--no-fix-cost", "--format", "json", str(log)],
                          capture_output=True, text=True, env={**env, "STREAMSIM_SUPERVISE": "0"},
                          timeout=120)
    assert got.returncode == same.returncode == 1, (got.stderr, same.stderr)
    assert got.stdout == same.stdout and len(got.stdout) > 65536
    assert ("atexit ran" in got.stderr) == (supervised == "0"), got.stderr


@pytest.mark.skipif(not supervise.enabled() or not os.path.exists("/proc/self/stat"),
                    reason="no fork or no /proc here")
def test_stopping_the_work_waits_until_every_process_it_started_is_gone():
    """A stop (SIGTERM, or a bound passed) returns only once the child's own processes are gone
    too, not as soon as the child is reaped: a worker that takes a while to die (here 0.5 s in
    its SIGTERM handler; a killed one freeing its memory) would else outlive the command."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: start a grandchild slow to die, report its pid, wait
        try:
            os.close(r)
            grand = os.fork()
            if grand == 0:
                signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.5), os._exit(0)))
                os.write(w, f"{os.getpid()}\n".encode())
                while True:
                    time.sleep(1)
            while True:
                time.sleep(1)
        finally:
            os._exit(1)
    os.close(w)
    with os.fdopen(r) as f:
        grand = int(f.readline())
    reports = os.open(os.devnull, os.O_RDONLY)
    try:
        supervise._Supervisor(pid, reports)._stop(signal.SIGTERM)
        assert not supervise._alive(grand)
    finally:
        os.close(reports)
        for p in (pid, grand):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
