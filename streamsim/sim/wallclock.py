"""A wall-clock bound on running a model: the one bound a model loop that issues no op meets.

``--max-ops`` and ``--max-time`` stop a model that keeps issuing ops; a ``while True: pass`` in a
model's ``build`` or host program issues none and would hang. Only a signal can interrupt it, so the
bound is a POSIX interval timer, armed in the main thread only (elsewhere it is not armed).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

from .errors import BoundExceeded


def default_wall_bound(max_ops: int) -> float:
    """Seconds a run may take: 600, or 100 us per op ``max_ops`` allows (the engine needs ~10)."""
    return max(600.0, max_ops * 1e-4)


class WallClockExceeded(BoundExceeded):
    """A run outlasted its wall-clock bound (raised where the run was: its model line is known)."""


@contextmanager
def wall_bound(seconds: float | None = None, *, max_ops: int = 0) -> Iterator[None]:
    """Raise :class:`WallClockExceeded` in whatever runs, if the block lasts more than ``seconds``
    (None: :func:`default_wall_bound` of ``max_ops``, and the message says how to raise it)."""
    hint = ""
    if seconds is None:
        seconds = default_wall_bound(max_ops)
        hint = " (the bound is 600 s, or 100 us per op --max-ops allows)"
    if (not seconds or threading.current_thread() is not threading.main_thread()
            or not hasattr(signal, "setitimer") or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        yield  # (a bound already armed, by a caller or the process: it stays the one that holds)
        return

    def expire(signum, frame):
        raise WallClockExceeded(f"the run took more than {seconds:g} s of wall-clock time "
                                f"without finishing here: a loop that issues no ops?{hint}")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
