"""The engine's mutable run-time records: an op while it runs, a stream's queue, a host's state.

:class:`Rec` becomes an :class:`~streamsim.trace.Op` in place when the run ends (same slots), so the
trace costs no second object per op.
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from ..trace import Access, Agent, Blocked, Op

if TYPE_CHECKING:  # (annotations only: simpy and greenlet are imported where an Engine is made)
    import simpy
    from greenlet import greenlet


class Rec:
    """A mutable op record while the simulation runs, turned into an :class:`Op` in place at the end.

    It has exactly :class:`Op`'s slots, so :func:`_freeze` can make it an Op by assigning
    ``__class__`` (same layout: CPython allows it): no second object per op, no copy. Run-time state
    that an Op has no field for lives elsewhere: a pending op's scaled duration in its ``end`` slot
    (see :attr:`dur`), ``done_event`` waiters in ``Engine.waiters`` and comm matches in
    ``Engine.matches`` (both by op id), and "done" is ``end_seq >= 0``. ``after`` holds the Rec
    objects (a list once an edge is added; most ops have none) until :func:`_freeze` swaps in ids.
    """

    __slots__ = Op.__slots__

    def __init__(self, id: int, agent: Agent, index: int, kind: str, name: str, enqueued: float,
                 step: int | None, location: str, accesses: tuple[Access, ...],
                 attrs: dict[str, Any]):
        self.id = id
        self.agent = agent
        self.index = index
        self.kind = kind
        self.name = name
        self.enqueued = enqueued
        self.start = 0.0
        self.end = 0.0  # the op's duration until it ends (see dur)
        self.start_seq = -1
        self.end_seq = -1
        self.accesses = accesses
        self.issuer: int | None = None
        self.after: list[Rec] | tuple = ()
        self.joins: list[int] | tuple = ()
        self.location = location
        self.step = step
        self.line: int | None = None
        self.handle: str | None = None
        self.attrs = attrs

    @property
    def done(self) -> bool:
        """The op has ended (host actions are created ended)."""
        return self.end_seq >= 0

    @property
    def dur(self) -> float:
        """The op's scaled duration, valid until it ends: kept in the ``end`` slot meanwhile (an op
        has no end time before it ends), which saves a slot that an Op does not have."""
        return self.end


assert Op.__slots__ == ("id", "agent", "index", "kind", "name", "enqueued", "start", "end",
                        "start_seq", "end_seq", "accesses", "issuer", "after", "joins", "location",
                        "step", "line", "handle", "attrs"), "Op's fields changed: update Rec"


class StreamState:
    """A FIFO device queue (compute stream, NCCL comm stream, or gloo work channel)."""

    __slots__ = ("agent", "queue", "wake", "last", "blocked", "process", "count")

    def __init__(self, agent: Agent):
        self.agent = agent
        self.count = 0  # ops created on this agent so far (the next op's index)
        self.queue: deque[Rec] = deque()
        self.wake: simpy.Event | None = None
        self.last: Rec | None = None  # the last op enqueued (its "current position")
        self.blocked: Blocked | Callable[[], Blocked] | None = None  # callable: built on a stall


class HostState:
    """One host thread: its clock runs ahead of simpy's until it must wait for the device."""

    __slots__ = ("agent", "clock", "glet", "current_stream", "step", "microbatch", "origin",
                 "blocked", "finished",
                 "api", "occurrences", "last_key", "injected_hold", "shared", "count")

    def __init__(self, agent: Agent):
        self.agent = agent
        self.count = 0  # ops created on this agent so far (the next op's index)
        self.clock = 0.0
        self.glet: greenlet | None = None
        self.current_stream = "compute"
        self.step: int | None = None
        self.microbatch: int | None = None  # see sim.labels
        self.origin: Any = None  # the file line the ops that follow stand for (see sim.origins)
        self.blocked: Blocked | None = None
        self.finished = False
        self.api: Any = None
        self.occurrences: dict[tuple[str, str], int] = {}  # (kind, location) -> actions issued
        self.last_key: tuple | None = None  # key of the program's latest action (for injections)
        self.injected_hold = False
        self.shared = False  # another host thread of this rank exists: act in simulated-time order
