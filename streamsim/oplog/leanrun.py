"""A run of an op log kept as the compiled replay's columns: fix costing's re-runs, measured
without their ``Op`` objects (docs/native.md)."""
from __future__ import annotations

from typing import Any

from ..sim.finish import trace_of
from ..trace import Trace


class LeanRun:
    """A run of an op log that the compiled replay keeps as columns (``_replay.Columns``,
    streamsim/native/_cols.pxd) rather than as a :class:`~streamsim.trace.Trace` of ``Op``
    objects: what fix costing needs of a re-run (its hazards left, metrics and shift, which
    ``native.measure_columns`` reads from the columns) without making 400,000 objects to count
    and free. :meth:`trace` makes the trace after all, the same one :func:`simulate_oplog`
    returns without ``lean``."""

    def __init__(self, columns: Any, source: str, meta: dict):
        self.columns = columns
        self.source = source
        self.meta = meta

    @property
    def end_time(self) -> float:
        """The run's makespan, as its trace's ``end_time``."""
        return self.columns.end_time

    def trace(self) -> Trace:
        """The run's trace: its ``Op`` objects made now."""
        ops, notes, agents = self.columns.trace_parts()
        return trace_of(tuple(ops), None, notes, agents, self.source, self.meta)
