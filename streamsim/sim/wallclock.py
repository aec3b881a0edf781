"""A wall-clock bound on running a model: the one bound a model loop that issues no op meets.

``--max-ops`` and ``--max-time`` stop a model that keeps issuing ops; a ``while True: pass`` in a
model's ``build`` or host program issues none and would hang. Two guards hold the bound:

* in the process, a POSIX interval timer (main thread only) interrupts the model wherever it is, so
  the error names the model's line. It raises :class:`WallClockAlarm`, a ``BaseException``, so an
  ``except Exception`` in the model does not swallow it, and it fires again every second while the
  model goes on;
* from outside, when the command line runs the work in a supervised child process
  (``streamsim.cli.supervise``), each bounded block tells the supervisor its deadline through
  :func:`set_watchdog`'s pipe; the supervisor kills the work past the bound plus a grace period.
  That holds even against a model that catches ``BaseException`` or ignores ``SIGALRM``.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .errors import BoundExceeded

REFIRE = 1.0  # seconds between further alarms while a model goes on after the first one
_STATE = {"fd": None, "depth": 0, "default": None}


def default_wall_bound(max_ops: int) -> float:
    """Seconds a run may take: ``--max-wall`` when given (:func:`default_bound`), else 600, or
    100 us per op ``max_ops`` allows (the engine needs ~10)."""
    if _STATE["default"] is not None:
        return _STATE["default"]
    return max(600.0, max_ops * 1e-4)


@contextmanager
def default_bound(seconds: float | None) -> Iterator[None]:
    """Within the block, the bound of every run of this process (and of the worker processes it
    forks) that names none (``--max-wall``); None: the default of :func:`default_wall_bound`."""
    previous, _STATE["default"] = _STATE["default"], seconds
    try:
        yield
    finally:
        _STATE["default"] = previous


def set_watchdog(fd: int | None) -> None:
    """Report each bounded block's deadline to a supervisor through the pipe ``fd`` (inherited by
    forked workers); None stops reporting."""
    _STATE["fd"], _STATE["depth"] = fd, 0


class WallClockExceeded(BoundExceeded):
    """A run outlasted its wall-clock bound (raised where the run was: its model line is known)."""


class WallClockAlarm(BaseException):
    """The timer's interrupt inside model code: a ``BaseException``, so that ``except Exception``
    does not swallow it; turned into :class:`WallClockExceeded` where the model's code is left."""


@contextmanager
def wall_bound(seconds: float | None = None, *, max_ops: int = 0,
               label: str = "") -> Iterator[None]:
    """Interrupt whatever runs with :class:`WallClockAlarm` if the block lasts more than ``seconds``
    (None: :func:`default_wall_bound` of ``max_ops``, and the message says how to raise it), and
    tell a supervisor, if any, the deadline (``label`` names the run in its message)."""
    hint = ""
    if seconds is None:
        given = _STATE["default"] is not None
        seconds = default_wall_bound(max_ops)
        hint = " (raise it with max_wall)" if given else \
            " (the bound is 600 s, or 100 us per op max_ops allows)"
    with _reported(seconds, label):
        if (not seconds or threading.current_thread() is not threading.main_thread()
                or not hasattr(signal, "setitimer")
                or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
            yield  # (a bound already armed, by a caller or the process, stays the one that holds)
            return

        def expire(signum, frame):
            raise WallClockAlarm(f"the run took more than {seconds:g} s of wall-clock time "
                                 f"without finishing here: a loop that issues no ops?{hint}")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


@contextmanager
def _reported(seconds: float, label: str) -> Iterator[None]:
    """Tell the supervisor (if any) that this process starts a block bounded by ``seconds``, and
    when it ends; nested blocks are one block. One write of at most ``PIPE_BUF`` bytes each:
    atomic, whichever worker process writes."""
    fd = _STATE["fd"]
    if fd is None or not seconds:
        yield
        return
    outer = _STATE["depth"] == 0
    _STATE["depth"] += 1
    pid = os.getpid()
    if outer:
        _send(fd, f"S {pid} {seconds!r} {time.monotonic()!r} {label}"[:500])
    try:
        yield
    finally:
        _STATE["depth"] -= 1
        if outer:
            _send(fd, f"E {pid}")


def _forked() -> None:
    _STATE["depth"] = 0  # a worker forked inside a block reports its own blocks


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _send(fd: int, message: str) -> None:
    line = message.replace("\n", " ") + "\n"
    try:
        os.write(fd, line.encode("utf-8", "backslashreplace"))
    except OSError:  # the supervisor is gone: nothing to tell
        pass
