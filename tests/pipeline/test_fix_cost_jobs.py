"""Fix costing in worker processes (``--jobs``, issue 26): the report does not depend on the
number of workers.

The re-runs that cost the fixes (every fix at once, then each costed root cause's fix alone) run
side by side in forked workers, and end in any order; their costs must be collected by index, so
that every output (text, JSON v4 and v3, Markdown, the ``--out`` set, ``--fixed-out``,
``--apply-fixes``) is byte for byte the one of ``--jobs 1``, today's in-process path. The logs
below have every fix kind, more root causes than are costed (the limit of 20, and the budget of
re-simulated ops), and a re-run that fails inside streamsim ("Fix not costed"); the model is
vLLM's regressed pipeline, a small one.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from streamsim import check_oplog, parse_oplog
from streamsim.cli.main import main
from streamsim.pipeline import fixcost, workers
from streamsim.sim.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
VLLM = str(ROOT / "models" / "vllm_pp.py")
JOBS = (1, 2, 3)


def _lines(*rows: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# every fix kind of tests/explore/test_fix_kinds_on_logs.py in one log, each on buffers, streams
# and handles of its own: 4 root causes, so 5 re-runs (all fixes, then each root cause's)
EVERY_KIND = _lines(
    {"op": "launch", "stream": "side", "reads": ["x"]},                    # record_stream
    {"op": "free", "buffer": "x"},
    {"op": "launch", "name": "fwd", "writes": ["h"], "dur": 9},           # wait_handle
    {"op": "isend", "tensors": ["h"], "peer": 1, "handle": "s", "dur": 40},
    {"op": "launch", "name": "fwd", "writes": ["h"], "dur": 9},
    {"op": "irecv", "rank": 1, "tensors": ["h"], "peer": 0},
    {"op": "launch", "name": "a", "writes": ["y"], "dur": 9},             # event
    {"op": "launch", "stream": "other", "name": "b", "reads": ["y"]},
    {"op": "launch", "name": "c", "writes": ["z"], "dur": 9},             # event_sync
    {"op": "host", "name": "d", "reads": ["z"]},
)


def _random_program(path: Path, n_ops: int, seed: int) -> str:
    """``benchmarks/programs.py``'s random program: many root causes (more than 20 are costed)."""
    spec = importlib.util.spec_from_file_location("programs", ROOT / "benchmarks" / "programs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.write_random_program(str(path), n_ops, streams=4, buffers=40, seed=seed)
    return str(path)


def _outputs(argv: list[str], capsys) -> dict[str, bytes]:
    """What one command prints in each format, with its exit code and stderr."""
    got: dict[str, bytes] = {}
    for fmt in (["--format", "text"], ["--format", "json"],
                ["--format", "json", "--json-version", "3"], ["--format", "markdown"]):
        code = main(argv + fmt)
        cap = capsys.readouterr()
        got[" ".join(fmt)] = f"{code}\n{cap.err}\n".encode() + cap.out.encode()
    return got


def _files(folder: Path) -> dict[str, bytes]:
    """The text files of an ``--out`` set (the PNG pictures are drawn from the same report)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.suffix in (".md", ".html", ".json", ".jsonl", ".dot")}


def _same_for_every_jobs(base: list[str], tmp: Path, capsys, out: bool = True) -> dict:
    """Run ``base`` with each of :data:`JOBS`; assert every output is byte-identical to jobs 1's;
    return jobs 1's."""
    first = None
    for jobs in JOBS:
        argv = base + ["--jobs", str(jobs)]
        got = _outputs(argv, capsys)
        if out:
            folder = tmp / f"out{jobs}"
            assert main(argv + ["--out", str(folder)]) in (0, 1)
            capsys.readouterr()
            got.update({f"--out {k}": v for k, v in _files(folder).items()})
        if first is None:
            first = got
        else:
            assert got.keys() == first.keys()
            for k in first:
                assert got[k] == first[k], f"--jobs {jobs} differs from --jobs 1 in {k}"
    return first


def test_every_fix_kind_log_reports_the_same_with_1_2_and_3_jobs(tmp_path, capsys):
    log = tmp_path / "kinds.jsonl"
    log.write_text(EVERY_KIND)
    r = check_oplog(str(log), jobs=2)
    kinds = {h.fix.kind for h in r.findings.hazards if h.fix is not None}
    assert kinds == {"record_stream", "wait_handle", "event", "event_sync"}  # what it exercises
    assert len(r.findings.root_causes) == 4 and all(c is not None for c in r.root_cause_costs)
    first = _same_for_every_jobs(["check", str(log)], tmp_path, capsys)
    assert b"fix cost" in first["--format text"]
    seen = set()
    for jobs in JOBS:  # --fixed-out and --apply-fixes too
        fixed = tmp_path / f"fixed{jobs}.jsonl"
        assert main(["check", str(log), "--jobs", str(jobs), "--fixed-out", str(fixed)]) == 1
        assert main(["check", str(log), "--jobs", str(jobs), "--apply-fixes"]) == 0
        seen.add((capsys.readouterr().out.replace(str(fixed), "FIXED"), fixed.read_bytes()))
    assert len(seen) == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_a_log_of_more_root_causes_than_are_costed_reports_the_same_with_1_2_and_3_jobs(
        tmp_path, capsys, seed):
    log = _random_program(tmp_path / "random.jsonl", 1500, seed)
    r = check_oplog(log)
    assert len(r.findings.root_causes) > fixcost.MAX_COSTED_ROOT_CAUSES  # the limit applies
    assert sum(c is not None for c in r.root_cause_costs) == fixcost.MAX_COSTED_ROOT_CAUSES
    _same_for_every_jobs(["check", log], tmp_path, capsys, out=False)


def test_the_budget_note_is_the_same_with_1_2_and_3_jobs(tmp_path, capsys, monkeypatch):
    log = _random_program(tmp_path / "random.jsonl", 1500, 2)
    monkeypatch.setattr(fixcost, "ROOT_CAUSE_COST_BUDGET", 4 * 1700)  # (forked workers inherit it)
    r = check_oplog(log)
    assert 0 < sum(c is not None for c in r.root_cause_costs) < fixcost.MAX_COSTED_ROOT_CAUSES
    first = _same_for_every_jobs(["check", log], tmp_path, capsys, out=False)
    assert b"re-simulated for them" in first["--format text"]


def test_a_rerun_failing_inside_streamsim_is_not_costed_the_same_with_1_2_and_3_jobs(
        tmp_path, capsys, monkeypatch):
    """An internal error in one re-run (here: the event fix's alone) makes that cost "not costed"
    and the note says so, whether the re-run ran here or in a worker; the exit code stays the
    findings'."""
    import streamsim.pipeline as pipeline
    replay = pipeline.simulate_oplog

    def failing(log, fixes=(), **kw):
        if len(fixes) == 1 and fixes[0].kind == "event":
            raise ModelError("a re-run's own failure")
        return replay(log, fixes=fixes, **kw)
    monkeypatch.setattr(pipeline, "simulate_oplog", failing)
    log = tmp_path / "kinds.jsonl"
    log.write_text(EVERY_KIND)
    first = _same_for_every_jobs(["check", str(log)], tmp_path, capsys, out=False)
    text = first["--format text"].decode()
    assert text.startswith("1\n") and "Fix not costed: internal error in streamsim" in text
    r = check_oplog(str(log), jobs=2)
    assert sum(c is None for c in r.root_cause_costs) == 1 and r.fix_cost is not None


def test_the_regressed_vllm_model_reports_the_same_with_1_2_and_3_jobs(tmp_path, capsys):
    base = ["run", VLLM, "--variant", "regressed_49274", "--set", "requests=3",
            "--set", "decode_steps=3"]
    first = _same_for_every_jobs(base, tmp_path, capsys)
    assert b"fix cost" in first["--format text"]
    r = check_oplog(parse_oplog(EVERY_KIND, "k.jsonl"), jobs=3)  # (the API takes jobs too)
    assert r.fix_cost is not None
    for jobs in (1, 2):
        assert main(["compare", VLLM, "--set", "requests=3", "--set", "decode_steps=3",
                     "--jobs", str(jobs)]) == 1
    one, two = capsys.readouterr().out.split("vllm_pp: ")[1:]
    assert one == two


def test_results_are_collected_in_task_order_not_completion_order():
    """The pool itself: task 0 ends last (it waits for a file the last task writes), and its
    result still comes first."""
    import os
    import tempfile
    import time
    flag = tempfile.mktemp()

    def task(i: int) -> int:
        if i == 0:
            for _ in range(2000):  # (bounded: 20 s at most, the test fails if it ever takes it)
                if os.path.exists(flag):
                    break
                time.sleep(0.01)
        if i == 3:
            open(flag, "w").close()
        return i * 10
    try:
        assert workers.run_indexed(task, 4, 2) == [0, 10, 20, 30]
    finally:
        if os.path.exists(flag):
            os.remove(flag)


def test_a_worker_takes_its_task_while_this_process_holds_the_gil():
    """A worker starts its task without any help from this process: fix costing's own first
    re-run holds the GIL for its whole length in compiled code, and a pool whose workers get their
    tasks from threads here (``ProcessPoolExecutor``'s manager and feeder) left them idle that
    long. Here task 0 spins in Python without releasing the GIL (no thread switch in 60 s),
    waiting for the flag that task 1, in the worker, sets; bounded to 10 s, it fails if the flag
    never came."""
    import multiprocessing
    import sys
    import time
    flag = workers.mp_context().RawValue("b", 0)  # (plain shared memory: no lock, no syscall)

    def task(i: int) -> bool:
        if i == 1:
            flag.value = 1
            return True
        if i == 0:
            end = time.monotonic() + 10
            while not flag.value and time.monotonic() < end:
                pass
            return bool(flag.value)
        return True
    interval = sys.getswitchinterval()
    sys.setswitchinterval(60)
    try:
        assert workers.run_indexed(task, 2, 2) == [True, True]
    finally:
        sys.setswitchinterval(interval)
    assert multiprocessing.active_children() == []  # (reaped)


def test_a_bad_jobs_value_is_an_input_error_naming_it(tmp_path, capsys):
    log = tmp_path / "kinds.jsonl"
    log.write_text(EVERY_KIND)
    with pytest.raises(ModelError, match="jobs must be an integer >= 1") as e:
        check_oplog(str(log), jobs=0)
    assert e.value.arguments == ("jobs",)
    with pytest.raises(SystemExit) as exit_:
        main(["check", str(log), "--jobs", "0"])
    assert exit_.value.code == 2
    assert "--jobs: expected an integer > 0, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", JOBS)
def test_the_first_input_error_in_task_order_is_raised_as_with_one_job(jobs):
    """Tasks 1 and 3 fail (task 3, in this process, first in time): the error raised is task 1's,
    of its own class and arguments, as one process running them in order would raise it."""
    from streamsim.sim.errors import OpsBoundExceeded

    def task(i: int) -> int:
        if i in (1, 3):
            raise OpsBoundExceeded(f"task {i} passed max_ops", arguments=("max_ops",))
        return i
    with pytest.raises(OpsBoundExceeded, match="^task 1 passed max_ops$") as e:
        workers.run_indexed(task, 4, jobs)
    assert e.value.arguments == ("max_ops",) and e.value.bound == "max_ops"


def test_a_bug_in_a_workers_task_is_raised_here_with_the_workers_traceback():
    """Any other exception of a task in a worker (a bug: the command's exit 3) is raised here as
    the task raised it, in task order, its traceback in the worker kept as a note. (Task 0, here,
    waits until the worker has begun task 1, so that this process does not take it.)"""
    import time
    begun = workers.mp_context().RawValue("b", 0)

    def task(i: int) -> int:
        if i == 1:
            begun.value = 1
            raise ValueError("broken in the worker")
        end = time.monotonic() + 10
        while not begun.value and time.monotonic() < end:
            time.sleep(0.001)
        return i
    with pytest.raises(ValueError) as e:
        workers.run_indexed(task, 2, 2)
    assert str(e.value) == "broken in the worker"
    notes = getattr(e.value, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith("raised in a worker process:\n") and \
        'raise ValueError("broken in the worker")' in notes[0]


def test_a_result_that_does_not_pickle_is_an_error_naming_the_task_not_a_dead_worker():
    """A worker's result that cannot be sent back is raised here as a RuntimeError naming the
    task (its worker does not die with a traceback on the command's stderr)."""
    import time
    begun = workers.mp_context().RawValue("b", 0)

    def task(i: int):
        if i == 1:
            begun.value = 1
            return lambda: None  # (a lambda does not pickle)
        end = time.monotonic() + 10
        while not begun.value and time.monotonic() < end:
            time.sleep(0.001)
        return i
    with pytest.raises(RuntimeError, match="task 1's ok outcome could not be sent back"):
        workers.run_indexed(task, 2, 2)


def test_the_first_error_in_task_order_is_raised_without_waiting_for_later_tasks():
    """Task 1 fails in the worker, which then takes task 2 and runs it for 30 s: the error is
    raised as soon as tasks 0 and 1 are in, and the worker still running task 2 is killed (no
    wait for a result nobody will read)."""
    import multiprocessing
    import time
    from streamsim.sim.errors import OpsBoundExceeded
    begun = workers.mp_context().RawValue("b", 0)

    def task(i: int) -> int:
        if i == 1:
            raise OpsBoundExceeded("task 1 passed max_ops", arguments=("max_ops",))
        if i == 2:
            begun.value = 1
            time.sleep(30)
        if i == 0:
            end = time.monotonic() + 10
            while not begun.value and time.monotonic() < end:
                time.sleep(0.001)
        return i
    t0 = time.monotonic()
    with pytest.raises(OpsBoundExceeded, match="^task 1 passed max_ops$"):
        workers.run_indexed(task, 4, 2)
    assert time.monotonic() - t0 < 15
    assert multiprocessing.active_children() == []  # (killed and reaped)


WORKER_DIES_HOLDING_THE_LOCK = """
import os, signal, sys, time
from streamsim.pipeline import workers
from streamsim.sim.errors import InternalError
parent, real = os.getpid(), workers._claim
def claim(claimed, index, died=None):
    if os.getpid() != parent:  # (a worker: killed from outside as it holds the flags' lock)
        claimed.get_lock().acquire()
        os.kill(os.getpid(), signal.SIGKILL)
    return real(claimed, index) if died is None else real(claimed, index, died)
workers._claim = claim
def task(i):
    time.sleep(0.3)
    return i
try:
    workers.run_indexed(task, 3, 2, "testing")
except InternalError as e:
    print(e)
"""


def test_a_worker_killed_while_it_holds_the_tasks_lock_is_an_internal_error_not_a_hang():
    """A worker killed between two of its tasks, as it holds the lock of the flags that say
    which tasks are taken (a kill from outside at that moment: the command of
    tests/cli/test_fix_cost_workers.py hung so once, in CI): this process, which takes tasks
    too, does not wait for that lock forever; it finds the worker dead and raises the internal
    error of a worker's death, as when the worker's pipe ends. In a child process with a time
    bound, since what this guards against is a hang."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", WORKER_DIES_HOLDING_THE_LOCK],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("internal error in streamsim while testing in 2 processes, "
                                  "when a worker process died (BrokenProcessPool: worker "), \
        done.stdout + done.stderr
    assert "ended with exit code -9" in done.stdout
