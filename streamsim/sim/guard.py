"""Running a model's own code: whatever it raises becomes one line, its ``print()`` stays off
stdout, and a real Ctrl-C is told apart from a ``KeyboardInterrupt`` the model raises itself.

A model is Python executed with the user's rights; streamsim cannot sandbox it, but it can make sure
that its failures read like every other mistake (one :class:`ModelError` line naming the model's
line, exit 2) and that its output cannot corrupt a report written to stdout (``--format json``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager, redirect_stdout
from typing import Iterator

from .errors import BoundExceeded, InternalError, ModelError, is_streamsim_frame
from .wallclock import WallClockAlarm, WallClockExceeded

_SIGINT = {"watched": False, "seen": False}


@contextmanager
def watching_interrupts() -> Iterator[None]:
    """Within the block, note every real Ctrl-C (SIGINT) before it raises ``KeyboardInterrupt``:
    the command line runs its work so, and a model raising ``KeyboardInterrupt`` itself is then a
    model error (exit 2) while a Ctrl-C of streamsim is an interrupt (exit 130). Outside such a
    block (a notebook, a library caller), every ``KeyboardInterrupt`` counts as real."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum, frame):
        _SIGINT["seen"] = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    saved = dict(_SIGINT)
    _SIGINT.update(watched=True, seen=False)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _SIGINT.update(saved)


def real_interrupt() -> bool:
    """Whether a ``KeyboardInterrupt`` comes from a real Ctrl-C (:func:`watching_interrupts`)."""
    return _SIGINT["seen"] or not _SIGINT["watched"]


@contextmanager
def model_output() -> Iterator[None]:
    """Run model code with its ``print()`` (``sys.stdout``) sent to stderr: stdout carries only
    streamsim's report, so ``--format json`` stays valid JSON whatever the model prints."""
    with redirect_stdout(sys.stderr):
        yield


def one_line(text: str) -> str:
    """``text`` on one line: its non-blank lines joined with `` / `` (an exception message may span
    several; an error is one line on stderr)."""
    if "\n" not in text and "\r" not in text:
        return text
    return " / ".join(s.strip() for s in text.splitlines() if s.strip())


def user_frame(exc: BaseException, path: str) -> str:
    """``path:line`` of the deepest traceback frame inside ``path`` (or just ``path``)."""
    import traceback  # (where a failure is explained: with textwrap, ~2 ms of a start-up)
    where = path
    real = os.path.realpath(path)
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.realpath(frame.filename) == real:
            where = f"{path}:{frame.lineno}"
    return where


def _raised_in_streamsim(e: BaseException, path: str) -> bool:
    """Whether ``e`` was raised in streamsim's own code rather than the model's: the innermost
    traceback frame that is either decides (a library either of them called is on the caller's
    side). An exception there (a KeyError, a TypeError) is a bug of streamsim's, even when a
    model's call led to it: a mistake in an API call is a ModelError, raised on purpose."""
    import traceback  # (as in user_frame)
    model = os.path.realpath(path)
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if is_streamsim_frame(frame.filename):
            return True
        if os.path.realpath(frame.filename) == model:
            return False
    return False


def model_failure(e: BaseException, path: str, *, loading: bool = False) -> BaseException:
    """What to raise for ``e``, raised by the code of the model at ``path`` (while ``loading`` it,
    or running it): a one-line :class:`ModelError` naming the model's line, whatever ``e`` is
    (any ``BaseException``), except a real Ctrl-C, which is ``e`` itself."""
    if isinstance(e, KeyboardInterrupt) and real_interrupt():
        return e
    if isinstance(e, (WallClockAlarm, WallClockExceeded)):  # interrupted wherever the model was
        bound = WallClockExceeded("", arguments=("max_wall", "max_ops"))  # (its hint names one)
        return bound.reworded(f"{user_frame(e, path)}: ", one_line(str(e)))
    if isinstance(e, BoundExceeded):
        return e.reworded(f"{path}: ", one_line(str(e)))
    while_loading = " while loading" if loading else ""
    if isinstance(e, ModelError):
        msg = one_line(str(e))
        return e.reworded("" if msg.startswith(path) else f"{user_frame(e, path)}: ", msg,
                          as_type=ModelError)
    if isinstance(e, SystemExit):  # would end the tool silently, exit code and all
        return ModelError(f"{user_frame(e, path)}: the model called sys.exit({e.code!r})"
                          f"{while_loading}")
    if isinstance(e, KeyboardInterrupt):
        return ModelError(f"{user_frame(e, path)}: the model raised KeyboardInterrupt"
                          f"{while_loading}")
    if isinstance(e, InternalError):
        return e
    if isinstance(e, Exception) and _raised_in_streamsim(e, path):  # the model called us; we failed
        return InternalError(f"running {path}", e)
    what = f"{type(e).__name__}: {one_line(str(e))}" if str(e) else type(e).__name__
    return ModelError(f"{user_frame(e, path)}: {'error while loading: ' if loading else ''}{what}")
