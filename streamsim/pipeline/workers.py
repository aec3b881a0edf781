"""Independent tasks of one command in forked worker processes, results in task order.

Costing the proposed fixes re-simulates the run several times (every fix at once, then each root
cause's fix alone); the re-runs are independent and decided before any of them runs, so they can
run side by side (``--jobs``). What must not change with the number of workers is the report: so a
task is named by its index, its result is collected by that index (never in completion order),
and a worker sends back only a small picklable result (a ``FixCost``), never a trace.

Workers are forked: a task is a closure over the run's trace, findings and re-run function, which
a fork inherits as it is (nothing is pickled on the way in, and the parent's pages are shared until
written). Where ``fork`` is not the start method (:func:`mp_context`), tasks run in this process,
one after another, as with one job.

Errors keep their meaning (docs/cli.md, exit codes): an :class:`~streamsim.sim.errors.InputError`
raised by a task (a model re-run past ``--max-wall``, say) is sent back as plain data and raised
here, the first one in task order, as with one job; a worker that dies (killed, a segfault) is
streamsim's fault, an :class:`~streamsim.sim.errors.InternalError` (exit 3). On any way out (an
error, Ctrl-C) the workers still running are killed and reaped before this returns, and a worker
whose parent dies is killed by the kernel (``PR_SET_PDEATHSIG`` on Linux): none is left behind.
"""
from __future__ import annotations

import os
import signal
import sys
import traceback
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..sim.errors import InputError, InternalError

T = TypeVar("T")

# Workers a default --jobs starts at most, whatever the CPUs: each holds one re-run's trace at a
# time (about the run's own size again: docs/cli.md gives peak RSS for 1 and 2 jobs), so memory
# grows with the workers; past 4 the re-runs left (at most 21, usually a handful) gain little.
MAX_DEFAULT_JOBS = 4


def mp_context():
    """The multiprocessing context of streamsim's local workers (``explore``/``sweep`` runs, fix
    costing): fork on Linux (a worker inherits the loaded model and the run's state), spawn
    elsewhere (macOS's fork is unsafe with system frameworks)."""
    import multiprocessing as mp
    return mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def can_fork() -> bool:
    """Whether tasks that are closures can run in workers here (the context forks)."""
    return mp_context().get_start_method() == "fork"


def cpus() -> int:
    """CPUs this process may run on (its affinity mask, as ``taskset`` or a container's cpuset
    limits it), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_jobs(tasks: int) -> int:
    """Workers for ``tasks`` independent tasks when ``--jobs`` is not given: the CPUs available,
    at most :data:`MAX_DEFAULT_JOBS` (memory: one trace per worker), at most one per task."""
    return max(1, min(cpus(), MAX_DEFAULT_JOBS, tasks))


def check_jobs(jobs: int | None) -> None:
    """Refuse a ``jobs`` below 1 (None: the default, :func:`default_jobs`)."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InputError(f"jobs must be an integer >= 1, got {jobs!r}", arguments=("jobs",))


@dataclass(frozen=True)
class Failed:
    """A task's :class:`InputError`, sent back as plain data and raised again in the parent: an
    exception object does not always survive pickling back from a worker (once Dask was imported,
    a forked ``explore`` worker failed to pickle a ModelError and died, and the caller got a
    BrokenProcessPool instead of the message)."""

    error: type
    message: str
    arguments: tuple[str, ...] = ()
    named_after: int = 0

    @classmethod
    def of(cls, e: InputError) -> "Failed":
        """``e`` as plain data (its class, message, arguments; a bound's flag is its class's)."""
        return cls(type(e), str(e), e.arguments, e.named_after)

    def exception(self) -> InputError:
        """The error again, as the task raised it."""
        e = self.error(self.message, arguments=self.arguments)
        e.named_after = self.named_after
        return e


def _worker_start(parent: int) -> None:
    """In each worker, first: die with the parent (no orphan keeps computing if the parent is
    killed), leave Ctrl-C to the parent, which stops every worker itself, and write through
    stream objects of its own (:func:`_fresh_streams`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # (held since the fork: _ctrl_c_held; a Ctrl-C
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # pending is dropped)
    _fresh_streams()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the line above: no one to serve
        os._exit(1)


def _fresh_streams() -> None:
    """Give the worker new ``sys.stdout``/``sys.stderr`` objects on the same files: a fork copies
    only the forking thread, so a lock of the parent's stream held at that instant by another
    thread (the progress line redrawing on a terminal) would stay held in the worker forever, and a
    model's ``print()`` in a re-run (sent to stderr) would hang there. The old objects stay
    referenced (``sys.__stderr__``...), so none is finalized, and the parent flushed them before
    forking (multiprocessing does)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = os.dup(stream.fileno())
        except (AttributeError, OSError, ValueError):  # (no real file: a test's capture)
            continue
        setattr(sys, name, open(fd, "w", encoding=stream.encoding, errors=stream.errors,
                                buffering=1))  # (line-buffered, as a terminal's stderr)


CLAIM_PATIENCE = 0.1  # seconds this process waits for the flags' lock before it looks for a
# worker that died holding it


def _claim(claimed, index: int, died: Callable[[], None] | None = None) -> bool:
    """Take task ``index`` for this process, unless another took it first (``claimed``: a shared
    array of flags, one per task, made before the fork). ``died``: called each time the flags'
    lock is not had within ``CLAIM_PATIENCE``; it raises when a worker died. A worker killed
    while it holds the lock (the OOM killer, a kill from outside, between two of its tasks)
    never releases it: without ``died``, this process waited for it forever, the command hung.
    A worker waits without it: the command's process, which has ``died``, kills it then."""
    lock = claimed.get_lock()
    while not lock.acquire(timeout=CLAIM_PATIENCE):
        if died is not None:
            died()
    try:
        if claimed[index]:
            return False
        claimed[index] = 1
        return True
    finally:
        lock.release()


def run_indexed(task: Callable[[int], T], n: int, jobs: int, what: str = "running tasks"
                ) -> list[T]:
    """``[task(0), ..., task(n - 1)]``, computed by ``jobs`` processes side by side: this one and
    ``jobs - 1`` forked workers; the list is in index order whatever order the tasks end in, so
    that what is made of it does not depend on ``jobs``. ``jobs`` 1 (or one task, or no fork
    here) runs the tasks in this process, in order.

    This process takes the first task (fix costing's largest re-run: every fix at once; here it
    runs on the run's pages as they are, where a forked worker would first pay the faults of
    copying those it writes, while the workers start), then the others from the last on; each
    worker takes them from the second on, as soon as it is forked; each task once (a flag per
    task in shared memory, set under its lock by whoever takes it first). A worker sends each
    result back on a pipe of its own as it has it, and ends once no task is left. This process
    then takes the results in index order, waiting on the pipes for those it has not yet; at the
    first error in index order it stops there, and the workers still running are killed.

    Workers are plain forked processes (``multiprocessing.Process``), not a
    ``ProcessPoolExecutor``: an executor hands each task to its workers from threads of this
    process (its manager thread and its queue's feeder), which wait for the GIL while this
    process runs its own task in compiled code, so the workers started their first task up to
    0.15 s late (a third of a re-run of the 200,000-line random program), and the last re-run
    to end was theirs.

    An :class:`InputError` of a task is raised here (the first in index order, once every earlier
    task has its result, as one job would raise it), and so is any other exception of a task (as
    the task raised it, or, where it does not pickle, as a RuntimeError with its traceback); a
    worker that dies (killed, a segfault) raises :class:`InternalError` whose message says it
    was ``what`` (``"costing the fixes"``). ``task`` must return something small and
    picklable."""
    jobs = min(jobs, n)
    if jobs <= 1 or not can_fork():
        return [task(i) for i in range(n)]
    ctx = mp_context()
    claimed = ctx.Array("b", n)  # (zeros: no task taken yet)
    parent = os.getpid()
    procs: list = []  # (the worker, the read end of its pipe)
    done = False
    try:
        held = _ctrl_c_held()
        try:
            for _ in range(jobs - 1):
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_worker, args=(task, n, claimed, send, parent),
                                   daemon=True)
                proc.start()  # (forks now: the worker takes its first task at once)
                send.close()  # (so that the pipe ends when the worker has closed its end)
                procs.append((proc, receive))
        finally:
            _ctrl_c_released(held)
        got: dict[int, tuple[str, object]] = {}

        def died() -> None:  # (a worker that died holding the flags' lock: see _claim)
            for proc, _ in procs:
                if proc.exitcode not in (None, 0):
                    raise _died(what, jobs, proc)
        for i in (0, *reversed(range(1, n))):  # this process's share: tasks no worker took
            if _claim(claimed, i, died):
                got[i] = _outcome(task, i)
                if got[i][0] != "ok":
                    break  # (an error: it is raised below once the earlier tasks are in)
        out: list[T] = []
        live = dict(procs)  # worker -> the read end of its pipe, until the pipe ends
        for i in range(n):  # index order: never in the order they end
            while i not in got:  # (a worker's task: wait for its result, taking any that come)
                _receive_some(live, got, what, jobs)
            how, value = got[i]
            if how == "failed":  # (the first error in index order, the earlier tasks all in:
                assert isinstance(value, Failed)  # the workers still running are killed)
                raise value.exception()
            if how == "raised":
                raise value  # type: ignore[misc]
            out.append(value)  # type: ignore[arg-type]
        done = True
        return out
    finally:
        for proc, receive in procs:
            if done:
                proc.join()  # (its tasks all answered: it ends once it finds none left)
            else:
                _kill(proc)
            receive.close()


def _receive_some(live: dict, got: dict, what: str, jobs: int) -> None:
    """Wait until a worker of ``live`` sends a result (put in ``got``) or its pipe ends (the
    worker is then reaped and left out of ``live``); InternalError when that worker died, or
    when none is left to send the result awaited (every task is taken by a live process: this
    process stops taking them only at an error, a worker only when none is left)."""
    from multiprocessing.connection import wait
    if not live:
        raise InternalError(f"{what} in {jobs} processes, when no process was left to run a "
                            "task", AssertionError("a task taken by no process"))
    ready = wait(list(live.values()))
    for proc, receive in list(live.items()):
        if receive not in ready:
            continue
        try:
            i, outcome = receive.recv()
        except EOFError:
            del live[proc]
            proc.join()
            if proc.exitcode != 0:
                raise _died(what, jobs, proc)
            continue
        got[i] = outcome


def _died(what: str, jobs: int, proc) -> InternalError:
    """The error of worker ``proc``'s death (ended with a non-zero exit code: killed, a
    segfault), while this process was ``what`` in ``jobs`` processes."""
    from concurrent.futures.process import BrokenProcessPool
    cause = BrokenProcessPool(f"worker {proc.pid} ended with exit code {proc.exitcode}")
    e = InternalError(f"{what} in {jobs} processes, when a worker process died", cause)
    e.__cause__ = cause
    return e


def _worker(task: Callable[[int], T], n: int, claimed, send, parent: int) -> None:
    """A worker's life (:func:`run_indexed`): take the tasks no process has taken, from the
    second on, and send back each one's index and outcome (:func:`_outcome`); end when none is
    left. An outcome that does not pickle (what the task returned, or an exception of its own)
    is sent as a RuntimeError naming the task, with the task's traceback if it raised."""
    _worker_start(parent)
    try:
        for i in range(1, n):
            if _claim(claimed, i):
                outcome = _outcome(task, i)
                where = ""
                if outcome[0] == "raised":  # (its traceback does not travel with it)
                    where = "".join(traceback.format_exception(outcome[1]))
                    outcome[1].add_note(f"raised in a worker process:\n{where}")
                try:
                    send.send((i, outcome))
                except Exception as e:  # (what the task returned or raised does not pickle)
                    send.send((i, ("raised", RuntimeError(
                        f"task {i}'s {outcome[0]} outcome could not be sent back from its "
                        f"worker process ({type(e).__name__}: {e})\n{where}"))))
    finally:
        send.close()


def _ctrl_c_held() -> object:
    """Hold SIGINT in this thread while the workers are forked (they inherit the mask): a Ctrl-C
    between a worker's fork and its :func:`_worker_start` would raise KeyboardInterrupt there,
    and the worker's death make an interrupted command exit 3 rather than 130. Held, not
    ignored: this process gets it once :func:`_ctrl_c_released` lets it through. Returns the
    mask to restore (None: nothing held, where there is no ``pthread_sigmask``)."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _ctrl_c_released(held: object) -> None:
    """Restore the mask :func:`_ctrl_c_held` changed (a Ctrl-C held meanwhile arrives now)."""
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _outcome(task: Callable[[int], T], index: int) -> tuple[str, object]:
    """Task ``index`` run in this process: ``("ok", result)``, ``("failed", Failed)`` for an
    input error, ``("raised", exception)`` for any other exception."""
    try:
        return "ok", task(index)
    except InputError as e:
        return "failed", Failed.of(e)
    except Exception as e:  # (raised again where the results are collected, in index order)
        return "raised", e


def _kill(proc) -> None:
    """Kill a worker and reap it (an error or Ctrl-C left tasks running whose results nobody
    will read)."""
    try:
        proc.kill()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        proc.join()
    except (OSError, ValueError, AttributeError, AssertionError):
        pass
