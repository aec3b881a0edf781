"""What a fix-costing worker process (``--jobs``) may and may not do to the command's outcome.

A worker is a grandchild of ``streamsim`` (the supervisor forks the command's child, which forks
the workers). A worker that dies is streamsim's fault: exit 3 with the one-line internal-error
message, never exit 2 and never a hang; Ctrl-C ends the command with exit 130 and leaves no worker
behind. Every command here runs in a subprocess with a timeout (no test can hang the suite), in a
session of its own that the test kills whole if it fails.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STREAMSIM = [sys.executable, "-m", "streamsim"]
TIMEOUT = 300  # seconds: a bound against a hang, far above the runs' few seconds
# streamsim with each fix re-run of an op log made 0.3 s slower, so that the workers are
# still busy when a test acts on them, however fast a re-run is
SLOW_RERUNS = [sys.executable, "-c", textwrap.dedent("""
    import sys, time
    import streamsim.pipeline as pipeline
    from streamsim.cli.main import main
    replay = pipeline.simulate_oplog
    def slow(log, fixes=(), **kw):
        if fixes:
            time.sleep(0.3)
        return replay(log, fixes=fixes, **kw)
    pipeline.simulate_oplog = slow
    sys.exit(main())  # (the program's own arguments, supervised as the program is)
""")]


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> str:
    """A random program whose fix costing re-simulates it 15 times (with ``SLOW_RERUNS``, seconds
    of work for the workers)."""
    spec = importlib.util.spec_from_file_location("programs", ROOT / "benchmarks" / "programs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = tmp_path_factory.mktemp("workers") / "random.jsonl"
    mod.write_random_program(str(path), 40_000)
    return str(path)


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()  # state, ppid, pgrp, session, ...


def _session(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            f = _stat(int(name))
            if f and int(f[3]) == sid and f[0] not in (b"Z", b"X"):
                out.append(int(name))
    return out


def _grandchildren(root: int) -> list[int]:
    """Processes whose parent's parent is ``root``: the workers under the supervised child."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            f = _stat(int(name))
            if f and f[0] not in (b"Z", b"X"):
                parents[int(name)] = int(f[1])
    children = {p for p, pp in parents.items() if pp == root}
    return sorted(p for p, pp in parents.items() if pp in children)


def _start(argv: list[str], command: list[str] = STREAMSIM) -> subprocess.Popen:
    return subprocess.Popen(command + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, cwd=ROOT)


def _workers(proc: subprocess.Popen, count: int) -> list[int]:
    """Wait (polling, bounded by TIMEOUT) until ``count`` workers run under ``proc``."""
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end and proc.poll() is None:
        found = _grandchildren(proc.pid)
        if len(found) >= count:
            return found
        time.sleep(0.02)
    pytest.fail(f"no {count} workers appeared (exit {proc.poll()})")


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the command hung")
    return proc.returncode, err.decode()


def _cleanup(proc: subprocess.Popen) -> None:
    for pid in _session(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers fork")
def test_ctrl_c_while_workers_cost_fixes_exits_130_and_leaves_no_process(big_log):
    proc = _start(["check", big_log, "--jobs", "3"], SLOW_RERUNS)  # (2 workers and the command)
    try:
        _workers(proc, 2)  # (acted on at once: a worker that has not started up yet holds
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C since its fork, pipeline.workers._ctrl_c_held)
        code, err = _finish(proc)
        assert code == 130, err
        assert err.strip().splitlines()[-1] == "streamsim: interrupted"
        assert _session(proc.pid) == []  # the supervisor, its child and every worker are gone
    finally:
        _cleanup(proc)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers fork")
def test_a_worker_killed_from_outside_is_an_internal_error_exit_3_not_a_hang(big_log):
    proc = _start(["check", big_log, "--jobs", "3"], SLOW_RERUNS)  # (2 workers and the command)
    try:
        worker = _workers(proc, 2)[0]
        os.kill(worker, signal.SIGKILL)  # (the OOM killer's way)
        code, err = _finish(proc)
        assert code == 3, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "streamsim: internal error in streamsim while costing the fixes in 3 processes, "
            "when a worker process died (BrokenProcessPool"), err
        assert "please report it; traceback in " in lines[0]
        os.remove(lines[0].rsplit("traceback in ", 1)[1])
        assert _session(proc.pid) == []
    finally:
        _cleanup(proc)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork")
def test_a_worker_that_crashes_in_its_rerun_is_exit_3_with_one_line(tmp_path):
    """A worker's re-run that dies by a signal of its own (a segfault in compiled code, say): the
    same one line and exit 3 (the re-run is made to kill its own process, in the workers only;
    the command's own re-runs are made slow, so that a worker takes one meanwhile)."""
    log = tmp_path / "kinds.jsonl"
    log.write_text(EVERY_KIND_LOG)
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        import streamsim.pipeline as pipeline
        from streamsim.cli.main import main
        parent, replay = os.getpid(), pipeline.simulate_oplog
        def crashing(log, fixes=(), **kw):
            if os.getpid() != parent and fixes:
                os.kill(os.getpid(), signal.SIGSEGV)
            if fixes:
                time.sleep(0.5)
            return replay(log, fixes=fixes, **kw)
        pipeline.simulate_oplog = crashing
        sys.exit(main(["check", {str(log)!r}, "--jobs", "2"]))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
        lines = err.decode().strip().splitlines()
        assert proc.returncode == 3 and out == b"", err
        assert len(lines) == 1 and "internal error in streamsim while costing the fixes in 2 " \
            "processes, when a worker process died" in lines[0], err
        os.remove(lines[0].rsplit("traceback in ", 1)[1])
        assert _session(proc.pid) == []
    finally:
        _cleanup(proc)


EVERY_KIND_LOG = "".join(line + "\n" for line in (
    '{"op": "launch", "stream": "side", "reads": ["x"]}',
    '{"op": "free", "buffer": "x"}',
    '{"op": "launch", "name": "a", "writes": ["y"], "dur": 9}',
    '{"op": "launch", "stream": "other", "name": "b", "reads": ["y"]}',
    '{"op": "launch", "name": "c", "writes": ["z"], "dur": 9}',
    '{"op": "host", "name": "d", "reads": ["z"]}',
))


LOOPING_IN_RERUNS = '''
import os, signal, time
from streamsim import Param
PARAMS = [Param("steps", int, 2, "steps")]
VARIANTS = {"racy": "two sends never waited"}
FIRST = os.getpid()  # the process that loaded the model: its re-runs in workers loop forever
def build(sim, p, variant):
    if os.getpid() == FIRST:
        time.sleep(0.2)  # (its own runs: slow enough that a worker takes a re-run meanwhile)
    if os.getpid() != FIRST:
        if HOSTILE:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            time.sleep(0.01)
    sim.group("pp", [0, 1])
    def stage0(host):
        a, b = host.buffer("a", 1 << 20), host.buffer("b", 1 << 20)
        for t in range(p.steps):
            host.step = t
            host.launch("fa", writes=[a], dur=900)
            host.group("pp").isend(a, dst=1)
            host.launch("fb", writes=[b], dur=900)
            host.group("pp").isend(b, dst=1)
    def stage1(host):
        a, b = host.buffer("a_in", 1 << 20), host.buffer("b_in", 1 << 20)
        for t in range(p.steps):
            host.step = t
            host.group("pp").irecv(a, src=0).wait()
            host.group("pp").irecv(b, src=0).wait()
    sim.spawn(0, stage0)
    sim.spawn(1, stage1)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers fork")
@pytest.mark.parametrize("hostile", [False, True])
def test_max_wall_bounds_the_reruns_in_workers(tmp_path, hostile):
    """A model whose re-runs (in workers only) never end: ``--max-wall`` stops the command with
    exit 2, by the in-process timer in the worker (its line named), or, when the model ignores
    SIGALRM, by the supervisor, which kills the whole tree; no process is left."""
    model = tmp_path / "loops.py"
    model.write_text(f"HOSTILE = {hostile}\n" + LOOPING_IN_RERUNS)
    proc = _start(["run", str(model), "--jobs", "2", "--max-wall", "1"])
    try:
        code, err = _finish(proc)
        assert code == 2, err
        line, = err.strip().splitlines()
        assert "took more than 1 s of wall-clock time" in line and "--max-wall" in line
        assert ("went on when interrupted there" in line) == hostile  # (the supervisor's words)
        assert _session(proc.pid) == []
    finally:
        _cleanup(proc)
