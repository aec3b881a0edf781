"""The errors of a simulation: bad input (a model, an op log, a flag), a run past its bounds (both
one line and exit code 2 on the command line), and a bug of streamsim's own (exit code 3).
"""
from __future__ import annotations


class InputError(Exception):
    """Bad input of any kind (a model, an op log, a command-line flag, an argument of the API):
    reported as one line, exit code 2."""


ModelError = InputError  # the name it had when models were the only input (kept: one class)


class BoundExceeded(InputError):
    """The simulation passed its op-count or simulated-time bound (a runaway model)."""


class InternalError(Exception):
    """A bug of streamsim's, not a mistake in the input: the command line says so in one line
    (it is never passed off as the user's line), saves the traceback, and exits with code 3.

    ``where`` says what streamsim was doing (``"replaying log.jsonl:2"``); ``cause`` is the
    exception it met there (its traceback is the one saved)."""

    def __init__(self, where: str, cause: BaseException):
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        super().__init__(f"internal error in streamsim while {where} ({what}) - please report it")
        self.where, self.cause = where, cause


def is_streamsim_frame(filename: str) -> bool:
    """Whether a traceback frame's file is streamsim's own code (this package)."""
    import os
    return os.path.realpath(filename).startswith(_PACKAGE)


def _package_dir() -> str:
    import os
    return os.path.realpath(os.path.dirname(os.path.dirname(__file__))) + os.sep


_PACKAGE = _package_dir()
