"""The op log (its format: docs/oplog.md), streamsim's interchange format: read, replay,
write.

* :func:`load_oplog` / :func:`parse_oplog` validate a log into an :class:`OpLog` (``read``, with
  the op and field tables of ``schema``, the ``batch`` rule of ``batches``); every mistake is one
  ``ModelError`` ``FILE:LINE: why``;
* :func:`simulate_oplog` replays it through the same engine and API as a model (``replay``);
* :func:`dump_oplog` / :func:`oplog_text` write any trace back as an op log (``write``);
* :func:`is_oplog_path`: the one rule that tells an op log from a model file (anything that is not
  a ``.py`` model file is read as an op log: never executed).
"""
from .read import GroupSpec, Line, OpLog, load_oplog, parse_oplog
from .replay import simulate_oplog

__all__ = ["OpLog", "Line", "GroupSpec", "load_oplog", "parse_oplog", "simulate_oplog",
           "dump_oplog", "oplog_text", "is_oplog_path"]


def is_oplog_path(path: str) -> bool:
    """Whether an input file is read as an op log rather than run as a model: the one rule for
    every command that takes either. Only ``.py`` files (any case) are models, executed as Python;
    every other file is read as an op log, so that nothing else is ever executed."""
    from ..sim.model import is_model_path
    return not is_model_path(path)


def __getattr__(name: str):
    if name in ("dump_oplog", "oplog_text"):  # (imported on first use: checking a log writes none)
        from . import write
        return getattr(write, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
