"""The simulation engine: simpy processes for host threads and streams, p2p and collectives.

It runs ops with the ordering and timing rules of docs/SEMANTICS.md and records a :class:`Trace`. It
knows nothing of hazards. Host programs run as greenlets so that a model reads like the worker it
mirrors (``work.wait()``, not ``yield from work.wait()``); a host runs ahead on its own clock and only
hands control to simpy when it must observe or wait for the device (syncs, queries, blocking sends).
Stream queues are deques woken by a simpy event: ``simpy.Store`` with a backlog is quadratic.
"""
from __future__ import annotations

import math
import os
import random
import sys
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, replace
from itertools import accumulate
from operator import attrgetter
from typing import Any, Callable, Iterable

import simpy
from greenlet import greenlet

from .gcpause import gc_paused
from .trace import HOST, STREAM, Access, Agent, Blocked, Note, Op, Stall, Trace

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

P2P_SENDS = frozenset({"isend", "isend_object"})
P2P_KINDS = P2P_SENDS | {"irecv"}
COLLECTIVE_KINDS = frozenset({"all_reduce", "all_gather", "broadcast"})


class ModelError(Exception):
    """A mistake in a model or op log: reported as one line, exit code 2."""


class BoundExceeded(ModelError):
    """The simulation passed its op-count or simulated-time bound (a runaway model)."""


@dataclass
class GroupConfig:
    """A process group: its backend and cost model (microseconds, bytes per microsecond)."""

    name: str
    ranks: tuple[int, ...]
    backend: str = "nccl"  # "nccl" or "gloo"
    latency: float = 10.0
    bandwidth: float = 25_000.0  # bytes/us (25 GB/s)
    eager_bytes: int = 64 * 1024
    blocking_wait: bool = False

    def transfer_time(self, nbytes: int) -> float:
        return self.latency + nbytes / self.bandwidth


class _Rec:
    """A mutable op record while the simulation runs, turned into an :class:`Op` in place at the end.

    It has exactly :class:`Op`'s slots, so :func:`_freeze` can make it an Op by assigning
    ``__class__`` (same layout: CPython allows it): no second object per op, no copy. Run-time state
    that an Op has no field for lives elsewhere: a pending op's scaled duration in its ``end`` slot
    (see :attr:`dur`), ``done_event`` waiters in ``Engine.waiters`` and comm matches in
    ``Engine.matches`` (both by op id), and "done" is ``end_seq >= 0``. ``after`` holds the _Rec
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
        self.after: list[_Rec] | tuple = ()
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


_op_end = attrgetter("end")

assert Op.__slots__ == ("id", "agent", "index", "kind", "name", "enqueued", "start", "end",
                        "start_seq", "end_seq", "accesses", "issuer", "after", "joins", "location",
                        "step", "line", "handle", "attrs"), "Op's fields changed: update _Rec"


class _Stream:
    """A FIFO device queue (compute stream, NCCL comm stream, or gloo work channel)."""

    __slots__ = ("agent", "queue", "wake", "last", "blocked", "process", "count")

    def __init__(self, agent: Agent):
        self.agent = agent
        self.count = 0  # ops created on this agent so far (the next op's index)
        self.queue: deque[_Rec] = deque()
        self.wake: simpy.Event | None = None
        self.last: _Rec | None = None  # the last op enqueued (its "current position")
        self.blocked: Blocked | Callable[[], Blocked] | None = None  # callable: built on a stall


class _Host:
    """One host thread: its clock runs ahead of simpy's until it must wait for the device."""

    __slots__ = ("agent", "clock", "glet", "current_stream", "step", "blocked", "finished",
                 "api", "occurrences", "last_key", "injected_hold", "shared", "count")

    def __init__(self, agent: Agent):
        self.agent = agent
        self.count = 0  # ops created on this agent so far (the next op's index)
        self.clock = 0.0
        self.glet: greenlet | None = None
        self.current_stream = "compute"
        self.step: int | None = None
        self.blocked: Blocked | None = None
        self.finished = False
        self.api: Any = None
        self.occurrences: dict[tuple[str, str], int] = {}  # (kind, location) -> actions issued
        self.last_key: tuple | None = None  # key of the program's latest action (for injections)
        self.injected_hold = False
        self.shared = False  # another host thread of this rank exists: act in simulated-time order


class _P2P:
    """One matched (or half-matched) point-to-point transfer."""

    __slots__ = ("send", "recv", "recv_started", "arrived", "arrival")

    def __init__(self, env: simpy.Environment):
        self.send: _Rec | None = None
        self.recv: _Rec | None = None
        self.recv_started = env.event()
        self.arrived = env.event()
        self.arrival: float | None = None


class _Collective:
    __slots__ = ("members", "expected", "all_started", "end")

    def __init__(self, env: simpy.Environment, expected: int):
        self.members: list[_Rec] = []
        self.expected = expected
        self.all_started = env.event()
        self.end = 0.0


class Engine:
    """Runs host programs and streams on simpy and records the trace."""

    def __init__(self, *, seed: int | None = None, jitter: float = 0.0, max_ops: int = 5_000_000,
                 max_time: float = 1e12, launch_overhead: float = 0.0,
                 perturb: Callable[[random.Random, _Rec], float] | None = None):
        if jitter < 0:
            raise ModelError(f"jitter must be >= 0, got {jitter}")
        self.env = simpy.Environment()
        self.rng = random.Random(0 if seed is None else seed)
        self.seed, self.jitter = seed, jitter
        self.max_ops, self.max_time = max_ops, max_time
        self.launch_overhead = launch_overhead
        self.perturb = perturb
        self.recs: list[_Rec] = []
        self.waiters: dict[int, list[simpy.Event]] = {}  # op id -> done_event()s to fire at its end
        self.matches: dict[int, Any] = {}  # comm op id -> its _P2P or _Collective, until it runs
        self.seq = 0
        self.seq_holes = False  # wait_recs moved a blocking op's start: renumber seqs densely
        self.lent: dict[int, int] = {}  # blocking op id -> the position its start handed back
        self.streams: dict[Agent, _Stream] = {}
        self.stream_at: dict[tuple[int, str], _Stream] = {}  # (rank, name): no Agent hashing
        self.hosts: dict[Agent, _Host] = {}
        self.groups: dict[str, GroupConfig] = {}
        self.p2p: dict[tuple, _P2P] = {}
        self.p2p_issued: dict[tuple, int] = {}
        self.collectives: dict[tuple, _Collective] = {}
        self.coll_issued: dict[tuple, int] = {}
        self.notes: list[Note] = []
        # (rank, buffer) -> streams record_stream named since its last free: the caching allocator
        # keeps them per block, so one host thread of the rank may record and another free
        self.recorded_streams: dict[tuple[int, str], list[str]] = {}
        # (rank, buffer) -> the free that ended its current life (until a new alloc): a later use
        # or free of it is a lifetime bug, noted (see note_freed_use)
        self.freed: dict[tuple[int, str], _Rec] = {}
        self.current: _Host | None = None
        self.main_glet: greenlet | None = None
        self.injections: dict[tuple[Agent, int], list[Callable[[], None]]] = {}
        self.post_injections: dict[tuple[Agent, int], list[Callable[[], None]]] = {}
        self.issued_by_key: dict[tuple[Agent, int], list[_Rec]] = {}
        self.keyed = False  # set by inject_fixes: remember which action issued which ops
        self.works: dict[int, Any] = {}  # issuing host op id -> the Work the model received
        self.location_kind = ""  # the kind of op whose location is being looked up (a hint)
        self.location_of: Callable[[], str] = _location_finder(self)
        self.tag_rec: Callable[[_Rec], None] | None = None  # op-log replay: line and name per op

    # -- records -------------------------------------------------------------------------------
    def new_rec(self, agent: Agent, kind: str, name: str, dur: float, owner: _Host | _Stream,
                enqueued: float, step: int | None, location: str,
                accesses: tuple[Access, ...] = (), attrs: dict[str, Any] | None = None) -> _Rec:
        """A new op of ``agent`` (whose _Host or _Stream is ``owner``), its scaled duration in
        its ``end`` slot until it ends. host_op and enqueue inline this (hot path)."""
        recs = self.recs
        n = len(recs)
        if n >= self.max_ops:
            self._too_many_ops()
        idx = owner.count
        owner.count = idx + 1
        rec = _Rec(n, agent, idx, kind, name, enqueued, step, location, accesses,
                   {} if attrs is None else attrs)
        if self.tag_rec is not None:
            self.tag_rec(rec)
        if dur or self.perturb is not None:  # (scaling 0 is 0: skip the call on the hot path)
            rec.end = self.scaled(dur, rec)  # a pending op's end slot holds its duration
        recs.append(rec)
        return rec

    def _too_many_ops(self) -> None:
        """Stop a runaway model (new_rec and its inlined copies check the bound)."""
        raise BoundExceeded(f"the model issued more than {self.max_ops} ops (max_ops); "
                            "a runaway loop? raise the bound with --max-ops")

    def scaled(self, dur: float, rec: _Rec) -> float:
        """Apply seeded multiplicative jitter (and any strategy's perturbation) to a duration."""
        if not 0 <= dur < math.inf:  # (nan fails both)
            raise ModelError(f"{'negative' if dur < 0 else 'non-finite'} duration {dur} for "
                             f"{rec.name}")
        if self.jitter and dur > 0:
            try:
                dur *= math.exp(self.jitter * (2.0 * self.rng.random() - 1.0))
            except OverflowError:
                raise ModelError(f"jitter {self.jitter:g} overflows the duration of {rec.name} "
                                 "(factors up to e^jitter)") from None
        if self.perturb is not None:
            dur += self.perturb(self.rng, rec)
        return dur

    def mark_start(self, rec: _Rec, t: float) -> None:
        rec.start = float(t)
        rec.start_seq = self.seq
        self.seq += 1

    def mark_end(self, rec: _Rec, t: float) -> None:
        rec.end = float(t)
        rec.end_seq = self.seq
        self.seq += 1
        if self.waiters:
            self._wake_waiters(rec)

    def _wake_waiters(self, rec: _Rec) -> None:
        """Fire the done_event()s of ``rec``, which just ended."""
        waiters = self.waiters.pop(rec.id, None)
        if waiters:
            for ev in waiters:
                ev.succeed()

    def done_event(self, rec: _Rec) -> simpy.Event:
        """An event that fires when ``rec`` (not yet done) ends."""
        ev = self.env.event()
        self.waiters.setdefault(rec.id, []).append(ev)
        return ev

    # -- agents ----------------------------------------------------------------------------------
    def stream(self, rank: int, name: str) -> _Stream:
        s = self.stream_at.get((rank, name))
        if s is None:
            agent = Agent(rank, STREAM, name)
            s = self.stream_at[(rank, name)] = self.streams[agent] = _Stream(agent)
            self.env.process(self._stream_loop(s))
        return s

    def add_host(self, rank: int, thread: str, program: Callable, args: tuple, api_factory) -> None:
        agent = Agent(rank, HOST, thread)
        if agent in self.hosts:
            raise ModelError(f"host thread {thread!r} of rank {rank} spawned twice")
        h = self.hosts[agent] = _Host(agent)
        h.api = api_factory(self, h)
        peers = [x for a, x in self.hosts.items() if a.rank == rank]
        if len(peers) > 1:  # threads of a rank share streams and events: no running ahead
            for x in peers:
                x.shared = True
        self.stream(rank, "compute")
        self.env.process(self._host_driver(h, program, args))

    # -- host side -------------------------------------------------------------------------------
    def _host_driver(self, h: _Host, program: Callable, args: tuple):
        g = h.glet = greenlet(program)
        self.current = h
        request = g.switch(h.api, *args)
        while not g.dead:
            yield request
            self.current = h
            request = g.switch()
        if self.post_injections:
            self.current = h
            done = greenlet(lambda: self.run_injections(h, self.post_injections, h.last_key))
            request = done.switch()
            while not done.dead:
                yield request
                request = done.switch()
        h.finished = True
        h.blocked = None

    def block(self, h: _Host, ev: simpy.Event, blocked: Blocked | None = None) -> Any:
        """From inside a host greenlet: wait (in simulated time) for ``ev``."""
        h.blocked = blocked
        value = self.main_glet.switch(ev)
        h.blocked = None
        if self.env.now > h.clock:
            h.clock = self.env.now
        return value

    def settle(self, h: _Host) -> None:
        """Before touching state shared with the rank's other host threads (streams, events, p2p
        counters), bring simpy's time up to this host's clock so threads act in simulated-time
        order, not in the order their greenlets happened to run ahead."""
        if h.shared and h.clock > self.env.now:
            self.sync_clock(h)

    def sync_clock(self, h: _Host) -> None:
        """Bring simpy's time up to the host's clock, so the host can observe device state."""
        if h.clock > self.env.now:
            if h.clock > self.max_time:
                raise BoundExceeded(f"simulated time passed max_time={self.max_time:g} us "
                                    f"on {h.agent}; raise the bound with --max-time")
            self.block(h, self.env.timeout(h.clock - self.env.now))

    def host_op(self, h: _Host, kind: str, name: str, dur: float = 0.0,
                accesses: tuple[Access, ...] = (), location: str | None = None) -> _Rec:
        """Issue a non-blocking host action: it occupies the host for ``dur``."""
        if self.current is not h:
            raise ModelError("streamsim API calls must be made from a running host program "
                             "(a function passed to Simulation.spawn)")
        if h.shared:
            self.settle(h)
        if location is None:
            self.location_kind = kind
            location = self.location_of()
        key = self._before_issue(h, kind, location) if self.keyed else None
        recs = self.recs  # new_rec, inlined (hot path: half of all ops are host actions)
        n = len(recs)
        if n >= self.max_ops:
            self._too_many_ops()
        idx = h.count
        h.count = idx + 1
        rec = _Rec(n, h.agent, idx, kind, name, float(h.clock), h.step, location, accesses, {})
        if self.tag_rec is not None:
            self.tag_rec(rec)
        if dur or self.perturb is not None:  # (scaling 0 is 0: skip the call on the hot path)
            rec.end = self.scaled(dur, rec)  # a pending op's end slot holds its duration
        recs.append(rec)
        rec.start = rec.enqueued  # mark_start and mark_end, inlined (hot path)
        rec.start_seq = seq = self.seq
        h.clock += rec.end  # (the duration, until it is replaced by the end time just below)
        if h.clock > self.max_time:  # a host that never blocks must still stop at the bound
            raise BoundExceeded(f"simulated time passed max_time={self.max_time:g} us "
                                f"on {h.agent}; raise the bound with --max-time")
        rec.end = float(h.clock)
        rec.end_seq = seq + 1  # done: nothing can wait for an op that is created finished
        if accesses and self.freed:
            self.note_freed_use(rec)
        self.seq = seq + 2
        if self.keyed:
            self._note_issue(h, key, rec)
        return rec

    def blocking_op(self, h: _Host, kind: str, name: str, location: str | None = None) -> _Rec:
        """Start a host action that will block; the caller waits and then calls :meth:`end_blocking`."""
        if self.current is not h:
            raise ModelError("streamsim API calls must be made from a running host program "
                             "(a function passed to Simulation.spawn)")
        if location is None:
            self.location_kind = kind
            location = self.location_of()
        key = self._before_issue(h, kind, location) if self.keyed else None
        rec = self.new_rec(h.agent, kind, name, 0.0, h, h.clock, h.step, location)
        self.sync_clock(h)
        self.mark_start(rec, h.clock)
        if self.keyed:
            self._note_issue(h, key, rec)
        return rec

    def _note_issue(self, h: _Host, key: tuple | None, rec: _Rec) -> None:
        """With fixes injected: remember which program action issued ``rec``, or mark it as one of
        a fix's own syncs (host_op and blocking_op, after :meth:`_before_issue`)."""
        if key is not None:
            self.issued_by_key.setdefault(key, []).append(rec)
        elif h.injected_hold:
            rec.attrs["injected"] = True  # a fix's sync, not the program's own action

    def end_blocking(self, h: _Host, rec: _Rec) -> None:
        h.clock = max(h.clock, self.env.now)
        self.mark_end(rec, h.clock)

    def wait_recs(self, h: _Host, rec: _Rec, deps: Iterable[_Rec], reason: str) -> None:
        """Block host ``h`` (inside blocking op ``rec``) until every op of ``deps`` has ended."""
        for dep in deps:
            rec.after = [*rec.after, dep]
            if not dep.done:
                # `after` ops end before this op starts in the global sequence (trace contract):
                # the op's start moves past dep's end. When its start holds the latest position
                # (as it does: nothing ran since blocking_op), hand that position back while it
                # waits, so that no hole is left for run() to renumber away with a pass over
                # every op (run() puts it back if the run stalls with the op still waiting).
                lend = rec.start_seq == self.seq - 1
                if lend:
                    self.seq -= 1
                    self.lent[rec.id] = rec.start_seq
                self.block(h, self.done_event(dep),
                           Blocked(h.agent, rec.id, reason, (dep.agent,)))
                if lend:
                    del self.lent[rec.id]
                else:
                    self.seq_holes = True  # run() closes the hole left at the old start
                rec.start_seq = self.seq
                self.seq += 1

    def _before_issue(self, h: _Host, kind: str, location: str) -> tuple | None:
        """Run fix injections around the program's next action; return that action's key.

        A key is (host agent, kind, location, n): the n-th action of that kind issued from that
        model line by this thread, injected ones not counted. A fix found in one run names the same
        action in a re-run even when timing changes how often a polling loop elsewhere runs.
        """
        if h.injected_hold:
            return None
        if self.post_injections and h.last_key is not None:
            self.run_injections(h, self.post_injections, h.last_key)
        site = (kind, location)
        n = h.occurrences.get(site, 0)
        h.occurrences[site] = n + 1
        h.last_key = key = (h.agent, kind, location, n)
        if self.injections:
            self.run_injections(h, self.injections, key)
        return key

    def run_injections(self, h: _Host, table: dict, key: tuple[Agent, int]) -> None:
        todo = table.pop(key, None)
        if todo:
            h.injected_hold = True
            try:
                for fn in todo:
                    fn()
            finally:
                h.injected_hold = False

    def enqueue(self, h: _Host, stream_name: str, kind: str, name: str, dur: float = 0.0,
                accesses: tuple[Access, ...] = (), after: Iterable[_Rec] = (),
                issue_kind: str | None = None, location: str | None = None) -> _Rec:
        """Issue a stream op: a host action (launch overhead) that enqueues ``kind`` on a stream."""
        issue = self.host_op(h, issue_kind or kind, name, self.launch_overhead, (), location)
        s = self.stream_at.get((h.agent.rank, stream_name)) or self.stream(h.agent.rank, stream_name)
        recs = self.recs  # new_rec, inlined (hot path: the other half of the ops)
        n = len(recs)
        if n >= self.max_ops:
            self._too_many_ops()
        idx = s.count
        s.count = idx + 1
        rec = _Rec(n, s.agent, idx, kind, name, h.clock, h.step, issue.location, accesses,
                   {"current_stream": h.current_stream})
        if self.tag_rec is not None:
            self.tag_rec(rec)
        if dur or self.perturb is not None:
            rec.end = self.scaled(dur, rec)
        recs.append(rec)
        rec.issuer = issue.id
        if after:
            rec.after = list(after)
        if accesses and self.freed:
            self.note_freed_use(rec)
        s.last = rec
        s.queue.append(rec)
        if s.wake is not None:
            wake, s.wake = s.wake, None
            wake.succeed()
        return rec

    def note_freed_use(self, rec: _Rec) -> None:
        """Note each buffer ``rec`` touches after the host freed it (no alloc since): in program
        order, so no race, but the caching allocator may already have handed the block on."""
        named: dict[tuple[int, str], None] = {}
        for acc in rec.accesses:
            key = (acc.view.rank, acc.view.buffer)
            free = self.freed.get(key)
            if free is not None and key not in named:
                named[key] = None
                self.notes.append(Note("use-after-free", f"{rec.name} at {rec.location} uses "
                                       f"{acc.view.buffer!r} on rank{key[0]} after {free.name} at "
                                       f"{free.location} freed it (no alloc since)", rec.id))
        if named:  # (the op-log writer keeps such a use in the freed life: no alloc line before it)
            rec.attrs["after_free"] = tuple(buf for _, buf in named)

    # -- device side -----------------------------------------------------------------------------
    def _stream_loop(self, s: _Stream):
        env = self.env
        q = s.queue
        while True:
            if not q:
                s.wake = env.event()
                yield s.wake
                continue
            rec = q.popleft()
            now = env.now
            if rec.enqueued > now:
                yield env.timeout(rec.enqueued - now)
            for dep in rec.after:
                if not dep.done:
                    s.blocked = lambda rec=rec, dep=dep: Blocked(  # built only if it stalls
                        s.agent, rec.id, f"{rec.name} waits for {dep.name} on {dep.agent}",
                        (dep.agent,))
                    yield self.done_event(dep)
                    s.blocked = None
            if rec.kind in P2P_KINDS:
                yield from self._run_p2p(s, rec)
            elif rec.kind in COLLECTIVE_KINDS:
                yield from self._run_collective(s, rec)
            else:  # mark_start and mark_end, inlined (hot path)
                dur = rec.end
                rec.start = start = float(env.now)
                rec.start_seq = self.seq
                self.seq += 1
                if dur > 0:
                    yield env.timeout(dur)
                    rec.end = start + dur  # == env.now: the timeout fired at now + dur
                else:
                    rec.end = start
                rec.end_seq = self.seq
                self.seq += 1
                if self.waiters:  # _wake_waiters, inlined (there is nearly always some waiter)
                    waiters = self.waiters.pop(rec.id, None)
                    if waiters:
                        for ev in waiters:
                            ev.succeed()

    def p2p_entry(self, group: str, src: int, dst: int, is_send: bool) -> _P2P:
        """The k-th send src→dst pairs with the k-th receive on dst from src (per group)."""
        side = (group, src, dst, is_send)
        k = self.p2p_issued.get(side, 0)
        self.p2p_issued[side] = k + 1
        key = (group, src, dst, k)
        m = self.p2p.get(key)
        if m is None:
            m = self.p2p[key] = _P2P(self.env)
        return m

    def _run_p2p(self, s: _Stream, rec: _Rec):
        env = self.env
        m: _P2P = self.matches.pop(rec.id)
        cfg = self.groups[rec.attrs["group"]]
        dur = rec.dur
        self.mark_start(rec, env.now)
        if rec.kind in P2P_SENDS:
            if rec.attrs["nbytes"] > cfg.eager_bytes and not m.recv_started.triggered:
                s.blocked = lambda: Blocked(s.agent, rec.id, f"rendezvous {rec.name} to rank"
                                            f"{rec.attrs['peer']} waits for the matching receive",
                                            self._peer_agents(m.recv, rec.attrs["peer"]))
                yield m.recv_started
                s.blocked = None
            if dur > 0:
                yield env.timeout(dur)
            self.mark_end(rec, env.now)
            m.arrival = env.now
            m.arrived.succeed()
        else:
            m.recv_started.succeed()
            if not m.arrived.triggered:
                s.blocked = lambda: Blocked(s.agent, rec.id, f"{_from_peer(rec)} waits for the "
                                            "matching send's data",
                                            self._peer_agents(m.send, rec.attrs["peer"]))
                yield m.arrived
                s.blocked = None
            rec.joins = [m.send.id]
            self.mark_end(rec, env.now)

    def _peer_agents(self, peer_rec: _Rec | None, peer_rank: int) -> tuple[Agent, ...]:
        if peer_rec is not None:
            return (peer_rec.agent,)
        return tuple(a for a in self.hosts if a.rank == peer_rank and not self.hosts[a].finished)

    def collective_entry(self, group: str, rank: int, size: int) -> _Collective:
        k = self.coll_issued.get((group, rank), 0)
        self.coll_issued[(group, rank)] = k + 1
        c = self.collectives.get((group, k))
        if c is None:
            c = self.collectives[(group, k)] = _Collective(self.env, size)
        return c

    def _run_collective(self, s: _Stream, rec: _Rec):
        env = self.env
        c: _Collective = self.matches.pop(rec.id)
        self.mark_start(rec, env.now)
        c.members.append(rec)
        if len(c.members) == c.expected:
            c.end = env.now + max(m.dur for m in c.members)
            c.all_started.succeed()
        else:
            ranks = self.groups[rec.attrs["group"]].ranks
            started = {m.agent.rank for m in c.members}
            waiting = tuple(a for a in self.hosts if a.rank in ranks and a.rank not in started)
            s.blocked = Blocked(s.agent, rec.id, f"{rec.name} waits for every rank of group "
                                f"{rec.attrs['group']!r} to join", waiting)
            yield c.all_started
            s.blocked = None
        if c.end > env.now:
            yield env.timeout(c.end - env.now)
        rec.joins = [m.id for m in c.members if m is not rec]
        self.mark_end(rec, env.now)

    # -- running -----------------------------------------------------------------------------------
    def run(self, source: str = "", meta: dict | None = None) -> Trace:
        """Simulate until every host finished or nothing can move, and return the trace."""
        # The run allocates millions of long-lived objects and almost no cyclic garbage: with the
        # cyclic collector on, its full collections rescan them all and take most of the time.
        with gc_paused():
            try:
                return self._run(source, meta)
            finally:
                self._release()

    def _release(self) -> None:
        """Drop the per-op bookkeeping once the trace is built. The engine ends inside reference
        cycles (environment, processes, greenlets), so what it still held would wait for a full
        cyclic collection: seconds for a million ops, charged to whatever runs next (the analysis).
        Released here, it is freed at once by reference counting."""
        self.recs = []
        self.p2p, self.p2p_issued = {}, {}
        self.collectives, self.coll_issued = {}, {}
        self.issued_by_key, self.works = {}, {}
        self.waiters, self.matches = {}, {}

    def _run(self, source: str, meta: dict | None) -> Trace:
        self.main_glet = greenlet.getcurrent()
        env, limit = self.env, self.max_time
        step, peek = env.step, env.peek
        try:
            while True:  # env.run(until=...) would jump the clock to the bound; step instead
                t = peek()
                if t > limit:
                    if t == float("inf"):
                        break
                    raise BoundExceeded(f"simulated time passed max_time={limit:g} us; "
                                        "a runaway model? raise the bound with --max-time")
                step()
        except simpy.core.EmptySchedule:
            pass
        except Exception as exc:
            orig = exc.__cause__  # simpy re-raises a copy of a failed process's exception:
            if type(orig) is type(exc):  # raise the original, whose traceback has the model's line
                raise orig from None
            raise
        blocked = [h.blocked or Blocked(h.agent, None, "blocked", ())
                   for h in self.hosts.values() if not h.finished]
        blocked += [s.blocked() if callable(s.blocked) else s.blocked  # (stream waits: lazily)
                    for s in self.streams.values() if s.blocked is not None]
        stall = Stall(self.env.now, tuple(sorted(blocked, key=lambda b: b.agent))) if blocked else None
        caught = [r for r in self.recs if r.start_seq >= 0 and r.end_seq < 0] if blocked else []
        waiting = {r.id: _unsatisfied(r) for r in caught}  # (before any of them is marked ended)
        for r in caught:  # ops caught mid-way by a stall end where the simulation stopped
            r.attrs["unfinished"] = True
            self.mark_end(r, self.env.now)
        self._unmatched_notes()
        started = [r for r in self.recs if r.start_seq >= 0] if blocked else self.recs  # (a
        # stream stops with queued ops only when blocked: without a stall every op has run)
        # ops that never started hold no sequence slot and are left out: the rest are renumbered
        new_id = {r.id: i for i, r in enumerate(started)} if len(started) != len(self.recs) else None
        if any(waiting.values()):
            _move_unsatisfied(waiting, started, new_id)
        if new_id is not None:
            _hand_waits_to_issuers(self.recs, new_id)
        bound = self.seq
        if self.lent:  # (only in a stall: a host still waits inside wait_recs)
            _reinsert_lent(started, self.lent)
            bound += len(self.lent)
        if self.seq_holes:
            _dense_seqs(started, bound)
        ops = _freeze(started) if new_id is None else _freeze_dense(started, new_id)
        if stall is not None and new_id is not None:
            stall = _renumber_stall(stall, new_id)
        agents = sorted(set(self.hosts) | set(self.streams))
        end_time = max(map(_op_end, ops), default=0.0)
        return Trace(ops=ops, agents=tuple(agents), stall=stall, notes=tuple(self.notes),
                     end_time=end_time, source=source, meta=dict(meta or {}))

    def _unmatched_notes(self) -> None:
        for (group, src, dst, k), m in sorted(self.p2p.items(), key=lambda kv: kv[0][:3] + (kv[0][3],)):
            if m.send is not None and m.recv is None:
                self.notes.append(Note("unmatched-send", f"send #{k} from rank{src} to rank{dst} "
                                       f"on group {group!r} ({m.send.name}) has no matching "
                                       "receive", m.send.id))


def _from_peer(rec: _Rec) -> str:
    """``irecv(x) from rank1``: the receive's name, with its peer unless the name already says it."""
    peer = f"from rank{rec.attrs['peer']}"
    return rec.name if rec.name.endswith(peer) else f"{rec.name} {peer}"


def _unsatisfied(r: _Rec) -> list[_Rec]:
    """The ops an op caught by a stall still waited for (its ``after`` entries that never ended)."""
    return [d for d in r.after if not d.done] if r.after else []


def _move_unsatisfied(waiting: dict[int, list[_Rec]], started: list[_Rec],
                      new_id: dict[int, int] | None) -> None:
    """Take the waits a stall left unsatisfied out of ``after`` (whose ops end before the op starts,
    the trace's contract) into ``attrs["waiting_for"]``, as final op ids, for the reports that name
    what the op waited on (``trace.waited_on``)."""
    for r in started:
        pending = waiting.get(r.id)
        if pending:
            r.after = [d for d in r.after if d not in pending]
            ids = [d.id if new_id is None else new_id.get(d.id) for d in pending]
            r.attrs["waiting_for"] = tuple(i for i in ids if i is not None)


def _hand_waits_to_issuers(recs: list[_Rec], new_id: dict[int, int]) -> None:
    """A stream op that never started (queued behind a stall) is left out of the trace, and with it
    what it was to wait for: its issuing host action keeps that in ``attrs["waiting_for"]`` (a
    ``work.wait()`` was called: its handle must not be reported as never waited)."""
    for r in recs:
        if r.start_seq < 0 and r.after and r.issuer in new_id:
            kept = tuple(new_id[d.id] for d in r.after if d.id in new_id)
            if kept:
                issue = recs[r.issuer]
                issue.attrs["waiting_for"] = (*issue.attrs.get("waiting_for", ()), *kept)


def _reinsert_lent(recs: list[_Rec], lent: dict[int, int]) -> None:
    """Give the starts that blocking ops handed back while waiting (see ``Engine.wait_recs``) and
    still held when the run stopped their positions back: each goes just before the op that took
    its position (several at one position: in the order they handed it back), and every position
    from there on moves up to make room. The result is the numbering without any handing back."""
    order = sorted(lent, key=lambda rid: lent[rid])  # (a stable sort: ties in handing-back order)
    new_start = {rid: lent[rid] + i for i, rid in enumerate(order)}
    points = sorted(lent.values())
    for r in recs:
        start = new_start.get(r.id)
        r.start_seq = r.start_seq + bisect_right(points, r.start_seq) if start is None else start
        r.end_seq += bisect_right(points, r.end_seq)


def _dense_seqs(recs: list[_Rec], bound: int) -> None:
    """Renumber start/end sequence positions 0..2n-1, keeping their order (fills wait_recs' holes)."""
    used = bytearray(bound)
    for r in recs:
        used[r.start_seq] = used[r.end_seq] = 1
    rank = list(accumulate(used))  # rank[p] - 1: how many used positions precede position p
    for r in recs:
        r.start_seq = rank[r.start_seq] - 1
        r.end_seq = rank[r.end_seq] - 1


def _freeze(recs: list[_Rec]) -> tuple[Op, ...]:
    """Turn the records into Ops in place (see :class:`_Rec`), with ``after`` as op ids."""
    for r in recs:
        if r.after.__class__ is list:
            r.after = tuple([a.id for a in r.after])
        if r.joins.__class__ is list:
            r.joins = tuple(r.joins)
        r.__class__ = Op
    return tuple(recs)


def _freeze_dense(recs: list[_Rec], new_id: dict[int, int]) -> tuple[Op, ...]:
    """Freeze the ops that ran, renumbering ids densely (never-started ops hold no sequence slot)."""
    for r in recs:
        r.after = [a for a in r.after if a.id in new_id]
    ops = []
    for op in _freeze(recs):
        ops.append(Op(**{**{f: getattr(op, f) for f in Op.__slots__}, "id": new_id[op.id],
                         "issuer": new_id.get(op.issuer) if op.issuer is not None else None,
                         "after": tuple(new_id[a] for a in op.after),
                         "joins": tuple(new_id[j] for j in op.joins if j in new_id)}))
    return tuple(ops)


def _renumber_stall(stall: Stall, new_id: dict[int, int]) -> Stall:
    """The stall with its blocked agents' op ids renumbered as the trace's; an op that never started
    (a stream op queued behind the wait that blocks) is not in the trace: None, its reason says it."""
    return Stall(stall.time, tuple(b if b.op is None else replace(b, op=new_id.get(b.op))
                                   for b in stall.blocked))


def _model_location() -> str:
    """``file:line`` of the innermost caller outside the streamsim package (the model's line)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return ""
    return f"{_display_path(f.f_code.co_filename)}:{f.f_lineno}"


def _location_finder(engine: "Engine") -> Callable[[], str]:
    """:func:`_model_location`, cached: one per engine (so a later run in another working directory
    computes its own paths). Per code object it keeps the display path (relpath is slow) and the
    ``file:line`` string of each instruction offset (``f_lineno`` scans the line table), so ops
    issued from one model line share one location string. Walking frames materialises a frame
    object per step, so it first tries the depth the model frame had last time for this kind of
    op (``engine.location_kind``): right when that frame is outside streamsim and the frame inside
    it is streamsim's (package code calls model code only as the host program itself)."""
    codes: dict[int, tuple] = {}  # id(code) -> (code, path or None inside streamsim, {lasti: loc})
    getframe = sys._getframe
    depths: dict[str, int] = {}  # op kind -> depth (from location()) of the model frame last time

    def entry_of(code) -> tuple:
        entry = codes.get(id(code))
        if entry is None:  # the entry holds the code object: its id is not reused meanwhile
            filename = code.co_filename
            entry = codes[id(code)] = (code, None if filename.startswith(_PACKAGE_DIR)
                                       else _display_path(filename), {})
        return entry

    def location() -> str:
        kind = engine.location_kind
        d = depths.get(kind, 3)
        try:  # the frame inside the model frame, and the model frame as its f_back: one
            inner = getframe(d - 1)  # getframe, and the model frame's object persists across ops
        except ValueError:
            inner = None
        f = inner.f_back if inner is not None else None
        if f is not None and inner.f_code.co_filename.startswith(_PACKAGE_DIR):
            entry = codes.get(id(f.f_code)) or entry_of(f.f_code)
            if entry[1] is not None:
                lines = entry[2]
                loc = lines.get(f.f_lasti)
                if loc is None:
                    loc = lines[f.f_lasti] = f"{entry[1]}:{f.f_lineno}"
                return loc
        d = 2
        f = getframe(2)
        while f is not None:
            entry = codes.get(id(f.f_code)) or entry_of(f.f_code)
            if entry[1] is not None:
                depths[kind] = d
                lines = entry[2]
                loc = lines.get(f.f_lasti)
                if loc is None:
                    loc = lines[f.f_lasti] = f"{entry[1]}:{f.f_lineno}"
                return loc
            f = f.f_back
            d += 1
        return ""
    return location


def _display_path(path: str) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return path
