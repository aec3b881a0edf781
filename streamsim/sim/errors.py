"""The errors of a simulation: bad input (a model, an op log, a flag), a run past its bounds (both
one line and exit code 2 on the command line), and a bug of streamsim's own (exit code 3).
"""
from __future__ import annotations


class InputError(Exception):
    """Bad input of any kind (a model, an op log, a command-line flag, an argument of the API):
    reported as one line, exit code 2.

    The message states the fact in the library's words. ``arguments`` names the API arguments
    (``strategy``, ``params``, ``max_wall``, ...) whose value the message is about, as the message
    names them (or, for one it does not name, as the input it starts with): the command line says
    its own flag for each instead (``streamsim.cli``), so no library message names a flag."""

    def __init__(self, *args, arguments: tuple[str, ...] = ()):
        super().__init__(*args)
        self.arguments = arguments
        self.named_after = 0  # where the message's own text starts (after a rewording's prefix)

    def reworded(self, prefix: str, message: str | None = None,
                 as_type: type | None = None) -> "InputError":
        """The same error (``as_type``, default its class; its arguments), its message ``prefix``
        + ``message`` (its own, or that made one line): what a caller raises to say where the
        error happened."""
        e = (as_type or type(self))(prefix + (str(self) if message is None else message),
                                    arguments=self.arguments)
        e.named_after = len(prefix) + self.named_after
        return e


ModelError = InputError  # the name it had when models were the only input (kept: one class)


class BoundExceeded(InputError):
    """The simulation passed one of its bounds (a runaway model). ``bound``: the API argument that
    sets it (the command line says how to raise it)."""

    bound = ""


class OpsBoundExceeded(BoundExceeded):
    """The model issued more ops than ``max_ops`` allows."""

    bound = "max_ops"

    @classmethod
    def passed(cls, max_ops: int) -> "OpsBoundExceeded":
        """The error of a run as it makes op ``max_ops + 1`` (the engine's and the compiled
        replay's: one wording)."""
        return cls(f"the model issued more than {max_ops} ops (max_ops); a runaway loop?")


class TimeBoundExceeded(BoundExceeded):
    """The simulated time passed ``max_time``."""

    bound = "max_time"

    @classmethod
    def passed(cls, max_time: float, agent: object = None) -> "TimeBoundExceeded":
        """The error of a run whose time passes ``max_time``: a host thread's own clock
        (``agent``, the thread: an action that ends past it, or a wait for its clock), or the
        run's next event (``agent`` None)."""
        if agent is None:
            return cls(f"simulated time passed max_time={max_time:g} us; a runaway model?")
        return cls(f"simulated time passed max_time={max_time:g} us on {agent}")


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
