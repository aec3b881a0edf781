"""Where an op comes from, when the host program replays a file: the label :class:`Origin`.

A model's op is located by the model line that issued it (:mod:`.locations`). A host program that
replays a file (an op log, ``streamsim.oplog.replay``) issues every op from the same few lines of
the replay, so it says instead which line of the file the ops that follow stand for:
``host.origin = Origin(...)`` labels them, as ``host.step = t`` labels them with a step
(:mod:`.labels`). Each op the program's own calls make then takes the origin's line number, name
and attrs, and its ``FILE:LINE`` location (a fix's injected syncs keep their own name and line);
a buffer it allocates (``host.buffer``) takes that location as its site.
The engine's hook that applies the label is installed the first time a program sets one: a model
that never does pays nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

if TYPE_CHECKING:
    from .engine import Engine


class Origin(NamedTuple):
    """The file line the ops that follow stand for: its number, the name reports give the ops,
    ``FILE:LINE`` (where errors and notes point), what the ``attrs`` of its ops gain (``attrs``)
    and of its host action (``host_attrs``, e.g. a recorded clock only the host action carries),
    and ``on_start``, called as the line's host action is made (a replay lets the lines that wait
    for a blocking line go as it starts), or None."""

    line: int
    name: str
    location: str
    attrs: dict[str, Any]
    host_attrs: dict[str, Any]
    on_start: Callable[[], None] | None = None


def install(engine: Engine) -> None:
    """Make ``engine`` label each op with its host thread's origin, if it has one (once)."""
    if getattr(engine.tag_rec, "labels_origin", False):
        return
    previous, finder = engine.tag_rec, engine.location_of

    def tag(rec) -> None:  # (the engine's record hook: called for every new op)
        if previous is not None:
            previous(rec)
        h = engine.current
        if h is None or h.origin is None or h.injected_hold:  # a fix's op is not the line's
            return
        o = h.origin
        rec.line = o.line
        rec.name = o.name
        if rec.agent is h.agent:  # the line's host action
            if o.host_attrs:
                rec.attrs.update(o.host_attrs)
            if o.on_start is not None:
                o.on_start()
        elif o.attrs:
            rec.attrs.update(o.attrs)

    def location(kind: str | None = None) -> str:
        h = engine.current
        return h.origin.location if h is not None and h.origin is not None else finder(kind)
    tag.labels_origin = True  # type: ignore[attr-defined]
    engine.tag_rec = tag
    engine.location_of = location
