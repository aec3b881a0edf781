"""The op log (docs OPLOG.md), streamsim's interchange format: read, replay, write.

* :func:`load_oplog` / :func:`parse_oplog` validate a log into an :class:`OpLog` (``oplog_read``);
  every mistake is one ``ModelError`` ``FILE:LINE: what is wrong``;
* :func:`simulate_oplog` replays it through the same engine and API as a model (``oplog_replay``);
* :func:`dump_oplog` writes any trace back as an op log (``oplog_write``).
"""
from .oplog_read import GroupSpec, Line, OpLog, load_oplog, parse_oplog
from .oplog_replay import simulate_oplog
from .oplog_write import dump_oplog, oplog_text

__all__ = ["OpLog", "Line", "GroupSpec", "load_oplog", "parse_oplog", "simulate_oplog",
           "dump_oplog", "oplog_text"]
