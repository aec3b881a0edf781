"""Run a command's work in a child process, supervised from outside: the wall-clock bound of a
model run holds whatever the model does.

The bound (:mod:`streamsim.sim.wallclock`) is first a timer inside the process: it interrupts the
model and names the line it was on. A model can defeat that timer (``except BaseException`` around
its loop, ``signal.signal(SIGALRM, SIG_IGN)``, a long C call that holds the GIL), so the command
line forks: the child does the whole command, writing to the same stdout and stderr (nothing is
sent back, however large the trace), and this parent only waits. Each bounded run in the child, or
in the worker processes it forks (``explore``, ``sweep``), reports its deadline through a pipe;
past the bound plus :func:`grace` the parent stops the child and every process it started, prints
one line and exits 2.

The child stays in the terminal's process group, so Ctrl-C, Ctrl-Z, a debugger's prompt and
``| head`` behave as without the supervisor. A Ctrl-C reaches the child, which stops with exit
130; should it go on (a model that swallows ``KeyboardInterrupt``), the parent forwards the
interrupt once more after a second and kills it after three. ``STREAMSIM_SUPERVISE=0`` runs the
work in the process itself (the in-process timer alone then holds the bound). Where there is no
``fork`` the work runs in the process too; runs on a Dask cluster (``--scheduler``) are not
supervised (their workers are not this machine's processes).
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import Callable

from ..sim.wallclock import set_watchdog

CAUGHT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # signals the supervisor acts on

INTERRUPT_FORWARD = 1.0  # seconds after a Ctrl-C before the child is interrupted once more
INTERRUPT_KILL = 3.0  # ... and before it is killed
STOP_WAIT = 2.0  # seconds a child sent SIGTERM may take to end before it is killed
POLL = 0.2  # seconds between checks where the child's exit cannot be waited on directly


def grace(seconds: float) -> float:
    """How long past its bound a run may take to stop by itself (the in-process timer's error
    names the model's line, which is worth waiting for): a tenth of the bound, 1 to 10 s."""
    return min(10.0, max(1.0, seconds / 10))


def enabled() -> bool:
    return hasattr(os, "fork") and os.environ.get("STREAMSIM_SUPERVISE", "1") != "0"


def supervised(work: Callable[[], int]) -> int:
    """``work()``'s exit code, the work done in a supervised child process (see the module)."""
    if not enabled():
        return work()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    r, w = os.pipe()
    # Ctrl-C and friends are held from the fork until the parent's handlers are in place (else one
    # arriving in between would kill the parent and leave the child unwatched)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, CAUGHT)
    try:
        pid = os.fork()
        if pid == 0:  # the child: do the work, report deadlines, never return into the caller
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(r)
            set_watchdog(w)
            global _in_child
            _in_child = True
            os._exit(_child(work))
        os.close(w)
        global _waited
        _waited = True
        return _Supervisor(pid, r).wait(mask)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


_kept: list = []  # what the child's command made, kept alive until its os._exit (see keep)
_in_child = False
_waited = False  # this process forked the child that did the work (see only_waited)


def only_waited() -> bool:
    """This process handed its command's work to a supervised child and only waited for it: it
    made nothing of its own to flush or free (the child wrote the output, and ended with
    ``os._exit``), so it may end the same way (:func:`streamsim.cli.main.program`)."""
    return _waited and not _in_child


def keep(obj: object) -> None:
    """Keep ``obj`` (a command's report, with its trace) alive until the supervised child
    exits: ``os._exit`` then ends the process without freeing it object by object (a 400,000-op
    trace took 0.14 s to free: ~5% of its check). Elsewhere (the work run in-process, a test or
    library caller) it does nothing, so that nothing outlives its caller's use of it."""
    if _in_child:
        _kept.append(obj)


def _child(work: Callable[[], int]) -> int:
    try:
        code = work()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:  # a bug of streamsim: the traceback, as without the supervisor
        import traceback  # (only here: with textwrap, ~2 ms of every command's start-up)
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # (a reader that went away: nothing more to say)
            pass
    return code


class _Supervisor:
    """The parent's side: read deadlines, wait for the child, stop it when it must stop."""

    def __init__(self, pid: int, reports: int):
        self.pid = pid
        self.reports: int | None = reports
        self.pending = b""
        self.runs: dict[int, tuple[float, float, str]] = {}  # pid -> (deadline, bound, label)
        self.signals: list[int] = []
        self.interrupted: float | None = None
        self.forwarded = False

    def wait(self, mask: set | None = None) -> int:
        """The child's exit code; ``mask``: the signal mask to restore once the handlers are in."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        previous_fd = signal.set_wakeup_fd(wake_w)
        previous = {s: signal.signal(s, lambda signum, frame: self.signals.append(signum))
                    for s in CAUGHT}
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # (a held signal arrives now)
        pidfd = None
        try:
            try:  # (present on Linux builds, refused by kernels before 5.3 and some sandboxes)
                pidfd = os.pidfd_open(self.pid) if hasattr(os, "pidfd_open") else None
            except OSError:
                pidfd = None  # polled instead
            return self._loop(wake_r, pidfd)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            signal.set_wakeup_fd(previous_fd)
            for fd in (wake_r, wake_w, pidfd, self.reports):
                if fd is not None:
                    os.close(fd)

    def _loop(self, wake_r: int, pidfd: int | None) -> int:
        while True:
            fds = [fd for fd in (self.reports, wake_r, pidfd) if fd is not None]
            timeout = self._timeout()
            if pidfd is None:
                timeout = POLL if timeout is None else min(timeout, POLL)
            ready, _, _ = select.select(fds, [], [], timeout)
            if self.reports in ready:
                self._read_reports()
            if wake_r in ready:
                os.read(wake_r, 512)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return self._exit_code(status)
            code = self._act(time.monotonic())
            if code is not None:
                return code

    def _timeout(self) -> float | None:
        now = time.monotonic()
        times = [deadline for deadline, _, _ in self.runs.values()]
        if self.interrupted is not None:
            times.append(self.interrupted + (INTERRUPT_KILL if self.forwarded else
                                             INTERRUPT_FORWARD))
        return max(0.0, min(times) - now) if times else None

    def _read_reports(self) -> None:
        data = os.read(self.reports, 65536)
        if not data:  # every writer is gone (the child's exit is waited on separately)
            os.close(self.reports)
            self.reports = None
            return
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            parts = line.decode("utf-8", "replace").split(" ", 4)
            try:
                if parts[0] == "S":
                    seconds, start = float(parts[2]), float(parts[3])
                    self.runs[int(parts[1])] = (start + seconds + grace(seconds), seconds,
                                                parts[4] if len(parts) > 4 else "")
                elif parts[0] == "E":
                    self.runs.pop(int(parts[1]), None)
            except (IndexError, ValueError):  # not ours (a model writing to the pipe): ignore
                pass

    def _act(self, now: float) -> int | None:
        """Deal with signals received and deadlines passed; an exit code when it is over."""
        signals, self.signals = self.signals, []  # (one arriving meanwhile waits for the next turn)
        for signum in signals:
            if signum == signal.SIGINT:
                self.interrupted = self.interrupted or now
            else:  # SIGTERM, SIGHUP: the work goes with us
                self._stop(signum)
                return 128 + signum
        if self.interrupted is not None:
            if not self.forwarded and now >= self.interrupted + INTERRUPT_FORWARD:
                self.forwarded = True
                _signal(self.pid, signal.SIGINT)  # (a `kill -INT` of this process alone)
            elif self.forwarded and now >= self.interrupted + INTERRUPT_KILL:
                self._stop(signal.SIGKILL)
                _say("interrupted")
                return 130
        for pid, (deadline, seconds, label) in sorted(self.runs.items()):
            if now < deadline:
                continue
            if pid != self.pid and not _alive(pid):  # a worker that died without reporting
                del self.runs[pid]
                continue
            self._stop(signal.SIGKILL)
            _say(f"{label + ': ' if label else ''}the run took more than {seconds:g} s of "
                 "wall-clock time and went on when interrupted there (does the model catch "
                 "BaseException, or ignore SIGALRM?): stopped; raise the bound with --max-wall")
            return 2
        return None

    def _stop(self, signum: int) -> None:
        """Send ``signum`` to the child and every process it started, reap the child (killed if
        it is still there after :data:`STOP_WAIT` seconds), and wait until every process it
        started is gone too (:func:`_outlive`): the child, once reaped, no longer holds them,
        and a process signalled is not gone at once (a killed one frees its memory first), so
        the command could end while a worker still ran."""
        tree = _tree(self.pid)
        started = {pid: _start_time(pid) for pid in tree[1:]}
        for pid in tree:
            _signal(pid, signum)
            if signum != signal.SIGKILL:
                _signal(pid, signal.SIGCONT)  # (frozen by _tree: let it take the signal)
        reaped = False
        if signum != signal.SIGKILL:
            end = time.monotonic() + STOP_WAIT
            while time.monotonic() < end and not reaped:
                reaped = os.waitpid(self.pid, os.WNOHANG)[0] != 0
                if not reaped:
                    time.sleep(0.05)
            if not reaped:
                for pid in _tree(self.pid):
                    _signal(pid, signal.SIGKILL)
        if not reaped:
            os.waitpid(self.pid, 0)
        _outlive(started)

    def _exit_code(self, status: int) -> int:
        code = os.waitstatus_to_exitcode(status)
        if code >= 0:
            return code
        name = signal.Signals(-code).name
        _say(f"the work was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else ""))
        return 128 - code


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, each stopped (SIGSTOP) before its children are looked up, so
    that none can start another process meanwhile. Linux (``/proc``); elsewhere ``[root]``."""
    _signal(root, signal.SIGSTOP)
    found, order = {root}, [root]
    for _ in range(64):  # (a fork caught half-way shows up on the next pass)
        new = [pid for pid, parent in _parents().items() if parent in found and pid not in found]
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
            found.add(pid)
            order.append(pid)
    return order


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (``/proc/PID/stat``); empty where there is no /proc."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # (the command name may hold spaces)
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def _outlive(started: dict[int, bytes | None]) -> None:
    """Wait until each process of ``started`` (pid -> its start time, :func:`_start_time`) is
    gone, at most :data:`STOP_WAIT` seconds; kill those still there and wait as long again. A
    pid alive with another start time is another process now: gone, never signalled."""
    for last in (False, True):
        end = time.monotonic() + STOP_WAIT
        while True:
            left = [pid for pid, at in started.items() if _alive(pid) and _start_time(pid) == at]
            if not left or time.monotonic() >= end:
                break
            time.sleep(0.01)
        if not left or last:
            return
        for pid in left:
            _signal(pid, signal.SIGKILL)


def _start_time(pid: int) -> bytes | None:
    """When process ``pid`` started (``/proc/PID/stat``'s 22nd field), which tells it from a
    later process given its pid; None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # (fields 3 on: the name may hold spaces)
    return fields[19] if len(fields) > 19 else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def _say(message: str) -> None:
    try:
        sys.stderr.write(f"streamsim: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
