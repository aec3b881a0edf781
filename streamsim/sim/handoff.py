"""Hand-offs between the host threads of one rank: a queue's put and get, a thread's end and its
join (docs/semantics.md, "What orders what", rule 8).

A channel is named per rank. The k-th ``get`` of a channel pairs with its k-th ``put`` (in the
order the engine issues them: an op log's line order, which the replay keeps between threads):
the get blocks its thread until that put has been issued, and the put happens before the get
(its ``after`` edge, of kind ``handoff``), so everything the putting thread did before the put is
ordered before everything the getting thread does after the get. A put never blocks (an
unbounded queue). A fix of kind ``handoff`` is a put and a get on a channel of its own.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable

from ..trace import Blocked
from .records import HostState, Rec

if TYPE_CHECKING:  # (annotations only: simpy is imported where an Engine is made)
    import simpy


def put(engine, h: HostState, channel: str, name: str) -> None:
    """Thread ``h`` puts on its rank's channel ``channel``: a host action of no duration."""
    rec = engine.host_op(h, "put", name)
    rec.attrs["channel"] = channel
    engine.channels.put((h.agent.rank, channel), rec)


def get(engine, h: HostState, channel: str, name: str) -> None:
    """Thread ``h`` gets from its rank's channel ``channel``: it blocks until the matching put
    has been issued, and the put is the get's ``after`` edge."""
    rec = engine.blocking_op(h, "get", name)
    rec.attrs["channel"] = channel
    matched = engine.channels.get(engine, h, rec, (h.agent.rank, channel), name)
    engine.wait_recs(h, rec, [matched], f"{name} waits for its put")
    engine.end_blocking(h, rec)


class Channels:
    """Every channel of a run: its puts so far, how many gets it has had, and the simpy events
    of gets waiting for a put not yet issued."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.puts: dict[Hashable, list[Rec]] = {}
        self.gets: dict[Hashable, int] = {}
        self.waiting: dict[tuple[Hashable, int], simpy.Event] = {}

    def put(self, key: Hashable, rec: Rec) -> None:
        """Host op ``rec`` put on channel ``key`` ((rank, name)): wake the get that waits for it."""
        puts = self.puts.setdefault(key, [])
        puts.append(rec)
        ev = self.waiting.pop((key, len(puts) - 1), None)
        if ev is not None:
            ev.succeed()

    def get(self, engine, h: HostState, rec: Rec, key: Hashable, what: str) -> Rec:
        """Blocking op ``rec`` of thread ``h`` gets from channel ``key``: its put, once issued
        (``h`` blocks until then, ``what`` saying on what)."""
        k = self.gets.get(key, 0)
        self.gets[key] = k + 1
        puts = self.puts.get(key, ())
        if len(puts) <= k:
            ev = self.waiting[(key, k)] = self.env.event()
            others = tuple(x.agent for x in engine.hosts_of_rank.get(h.agent.rank, ())
                           if x is not h and not x.finished)
            # the get's start moves past the put's end in the global sequence (Engine.wait_recs
            # does the same for the ops a blocking op waits on)
            lend = rec.start_seq == engine.seq - 1
            if lend:
                engine.seq -= 1
                engine.lent[rec.id] = rec.start_seq
            engine.block(h, ev, Blocked(h.agent, rec.id, f"{what} waits for put #{k + 1} of its "
                                        "channel (another thread's)", others))
            if lend:
                del engine.lent[rec.id]
            else:
                engine.seq_holes = True
            rec.start_seq = engine.seq
            engine.seq += 1
            puts = self.puts[key]
        return puts[k]


class Calls:
    """The hand-off calls of a host thread (mixed into :class:`streamsim.sim.host.Host`, which
    has ``_e``, its engine, and ``_h``, its thread's state)."""

    _e: Any
    _h: HostState

    def put(self, channel: str, *, name: str | None = None) -> None:
        """``queue.put(item)`` on the rank's channel ``channel``, or a thread's end before its
        ``join()``: never blocks; what this thread did before it happens before the get that
        takes it."""
        put(self._e, self._h, channel, name or f"put({channel})")

    def get(self, channel: str, *, name: str | None = None) -> None:
        """``queue.get()``: block until the channel's matching put (the k-th get takes the k-th
        put), issued by another thread of the rank, and be ordered after it."""
        get(self._e, self._h, channel, name or f"get({channel})")
