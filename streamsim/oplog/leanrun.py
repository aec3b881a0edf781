"""A run of an op log kept as the compiled replay's columns: fix costing's re-runs, measured
without their ``Op`` objects, and a check's first run, reported without them when it is clean
(docs/native.md)."""
from __future__ import annotations

from dataclasses import fields
from functools import cached_property
from operator import attrgetter
from typing import Any, Mapping, Sequence

from ..sim.finish import trace_of
from ..trace import Op, Trace


_FIRST, _SECOND = attrgetter("first"), attrgetter("second")  # (a hazard's two op ids)


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


class LeanTrace(Trace):
    """The trace of a :class:`LeanRun` whose ``Op`` objects are made when ``ops`` is first read
    (then the same ops, equal fields, as :meth:`LeanRun.trace` makes; the columns are let go).
    A check's first run is analysed from its columns (the compiled HB pass, metrics and handles
    never waited read them: ``native._columns_of``), and its report makes only the ops it names,
    each alone (:meth:`op`, kept: the same object each time, and in ``ops`` if they are all made
    later): the two of each hazard for its fix and root cause, those the report describes, and
    the ops fix costing's syncs delay (its keying reads the columns: ``native.keying``).
    ``--out``'s pictures, or a caller of the API reading ``report.trace.ops``, make them all.
    Its other fields are set at once. It equals that trace, and copies and pickles as a plain
    :class:`Trace`; ``dataclasses.replace`` makes one of the fields it is given."""

    def __init__(self, run: LeanRun | None = None, **given: Any):
        if run is None:  # (dataclasses.replace: every field given, the ops too)
            Trace.__init__(self, **given)
            return
        put = object.__setattr__  # (a frozen dataclass's fields: set once, here)
        put(self, "_run", run)
        put(self, "_alone", {})  # op id -> the op made alone (while ``ops`` is not made)
        put(self, "agents", run.columns.agents)
        put(self, "stall", None)  # (the compiled replay leaves a run that stalls to the engine)
        put(self, "notes", tuple(run.columns.notes))
        put(self, "end_time", run.columns.end_time)
        put(self, "source", run.source)
        put(self, "meta", dict(run.meta))
        put(self, "allocations", ())

    @cached_property
    def ops(self) -> tuple[Op, ...]:  # type: ignore[override]
        """The run's ops, made from its columns on the first read (those made alone before: the
        very objects :meth:`op` handed out)."""
        ops = self.columns.trace_parts()[0]
        alone = self.__dict__.pop("_alone")
        for i, op in alone.items():
            ops[i] = op
        del self.__dict__["_run"]  # (the columns, the replay's arrays and lines: not needed now)
        return tuple(ops)

    def op(self, op_id: int) -> Op:
        """Op ``op_id``; while the ops are not made, made alone from the columns (equal to the
        one ``ops`` would hold, and kept: the same object on every call)."""
        alone = self.__dict__.get("_alone")
        if alone is None:  # (made: ``ops`` popped it)
            return Trace.op(self, op_id)
        got = alone.get(op_id)
        if got is None:
            got = alone[op_id] = self.columns.op(op_id)
        return got

    def ops_by_id(self, ids: Sequence[int]) -> Sequence[Op] | Mapping[int, Op]:
        alone = self.__dict__.get("_alone")
        if alone is None:  # (made)
            return self.ops
        missing = set(ids).difference(alone)  # (in C: most ids asked for are made already)
        if missing:
            new = sorted(missing)  # (once each)
            alone.update(zip(new, self.columns.ops_of(new)))  # (made in one call, kept)
        return alone  # (every op made alone so far, these among them: not a dict of its own)

    def ops_of_hazards(self, hazards: Sequence[Any]) -> Sequence[Op] | Mapping[int, Op]:
        if self.made:
            return self.ops
        n = len(self.columns)
        try:  # (each hazard's two ids gathered in C: 120,000 getattr calls in Python before)
            ids = set(map(_FIRST, hazards))
            ids.update(map(_SECOND, hazards))
        except AttributeError:  # (an object of another kind among them: named none)
            ids = {i for h in hazards
                   for i in (getattr(h, "first", None), getattr(h, "second", None))}
        got = sorted(ids) if set(map(type, ids)) == {int} else None  # (ints: each an op's id,
        if got is None or got[0] < 0 or got[-1] >= n:  # checked in C, not one at a time)
            got = sorted(i for i in ids if type(i) is int and 0 <= i < n)
        return self.ops_by_id(got)

    def ops_of_kind(self, kind: str) -> list[Op]:
        if self.made:
            return Trace.ops_of_kind(self, kind)
        ids = self.columns.ids_of(kind)
        got = self.ops_by_id(ids)  # (in one block)
        return [got[i] for i in ids]

    def __len__(self) -> int:
        return len(self.ops) if self.made else len(self.columns)

    @property
    def columns(self) -> Any:
        """The run's columns (``_replay.Columns``) while its ops are not made, which the
        compiled passes read instead (``native._columns_of``); None once they are."""
        run = self.__dict__.get("_run")
        return None if run is None else run.columns

    @property
    def made(self) -> bool:
        """Whether the ops were made (``ops`` read)."""
        return "ops" in self.__dict__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Trace))

    __hash__ = Trace.__hash__

    def __reduce__(self) -> tuple:
        """Pickled (and copied) as the plain :class:`Trace` of its fields."""
        return Trace, tuple(getattr(self, f.name) for f in fields(Trace))
