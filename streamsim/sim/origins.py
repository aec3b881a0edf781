"""Where a run's ops come from, when its host programs replay a file: the replay's one hook.

A model's op is located by the model line that issued it (:mod:`.locations`). Host programs
that replay a file (an op log, ``streamsim.oplog.replay``) issue every op from the same few
lines of the replay, so they say instead where each op comes from: an :class:`Origins` given to
``Simulation(origins=...)`` is asked, for every op the program's own calls make (a fix's
injected syncs are not asked about), which file line it stands for (:class:`Origin`), and for
the ``FILE:LINE`` an error or note names. Its answers become each op's ``line``, ``name`` and
``attrs`` in the trace. A run with origins also issues every action whatever the timing (a log
is what happened): a fix's wait for a handle another thread issues waits for that issue.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from .engine import Engine
    from .host import Host


class Origin(NamedTuple):
    """The file line an op stands for: its number, the name reports give the op, and what the
    op's ``attrs`` gain from the line (e.g. ``site``: the user code a recorder saw)."""

    line: int
    name: str
    attrs: dict[str, Any]


class Origins(Protocol):
    """What a replay tells the engine about the ops its host programs make."""

    def origin(self, host: Host, on_host: bool) -> Origin | None:
        """The origin of the op that ``host``'s running call is making: ``on_host`` says whether
        it is the call's host action (else an op it enqueues, or a comm op's stream op). None:
        no line (the op keeps its own name)."""

    def location(self, host: Host | None) -> str:
        """``FILE:LINE`` of what ``host`` is issuing now (None: no host is running)."""


def install(engine: Engine, origins: Origins) -> None:
    """Make ``engine`` ask ``origins`` about every op a program's own call makes."""
    origin = origins.origin

    def tag(rec) -> None:  # (the engine's record hook: called for every new op)
        h = engine.current
        if h is None or h.injected_hold:  # an injected fix is not the line's own op
            return
        o = origin(h.api, rec.agent is h.agent)
        if o is not None:
            rec.line = o.line
            rec.name = o.name
            if o.attrs:
                rec.attrs.update(o.attrs)

    where = origins.location

    def location() -> str:
        h = engine.current
        return where(h.api if h is not None else None)
    engine.tag_rec = tag
    engine.location_of = location
    engine.replaying_log = True
