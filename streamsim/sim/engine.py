"""The simulation engine: simpy processes for host threads and streams, p2p and collectives.

It runs ops with the ordering and timing rules of docs/semantics.md and records a :class:`Trace`. It
knows nothing of hazards. Host programs run as greenlets so that a model reads like the worker it
mirrors (``work.wait()``, not ``yield from work.wait()``); a host runs ahead on its own clock and only
hands control to simpy when it must observe or wait for the device (syncs, queries, blocking sends).
Stream queues are deques woken by a simpy event: ``simpy.Store`` with a backlog is quadratic.

One module because host actions, enqueues and the stream loop share op creation
(:meth:`Engine.new_rec`) and the hot path's state (half of all ops are host actions, the other half
stream ops); the comm side, records, locations and trace building live in their own modules.
"""
from __future__ import annotations

import dataclasses
import math
import random
from typing import TYPE_CHECKING, Any, Callable, Iterable

from greenlet import greenlet

from ..trace import HOST, STREAM, Access, Agent, Blocked, Note, Stall, Trace
from .comm import COLLECTIVE_KINDS, P2P_KINDS, P2P_SENDS, CommMixin
from .groups import GroupConfig, cost_model
from .errors import BoundExceeded, ModelError, OpsBoundExceeded, TimeBoundExceeded
from .finish import build_trace, caught_by_stall
from .handoff import Channels
from .locations import location_finder
from .records import HostState, Rec, StreamState

if TYPE_CHECKING:  # (annotations only)
    import simpy

__all__ = ["Engine", "GroupConfig", "ModelError", "BoundExceeded", "COLLECTIVE_KINDS",
           "P2P_KINDS", "P2P_SENDS"]


class Engine(CommMixin):
    """Runs host programs and streams on simpy and records the trace."""

    def __init__(self, *, seed: int | None = None, jitter: float = 0.0, max_ops: int = 5_000_000,
                 max_time: float = 1e12, launch_overhead: float = 0.0,
                 perturb: Callable[[random.Random, Rec], float] | None = None):
        if jitter < 0:
            raise ModelError(f"jitter must be >= 0, got {jitter}")
        import simpy  # (here, not with this module: importing streamsim does not import simpy,
        # ~20 ms of a process's start with the importlib.metadata it imports, until an engine runs)
        self.env = simpy.Environment()
        self._empty_schedule = simpy.core.EmptySchedule
        self.rng = random.Random(0 if seed is None else seed)
        self.seed, self.jitter = seed, jitter
        self.max_ops, self.max_time = max_ops, max_time
        self.launch_overhead = launch_overhead
        self.perturb = perturb
        self.recs: list[Rec] = []
        self.waiters: dict[int, list[simpy.Event]] = {}  # op id -> done_event()s to fire at its end
        self.matches: dict[int, Any] = {}  # comm op id -> its _P2P or _Collective, until it runs
        self.seq = 0
        self.seq_holes = False  # wait_recs moved a blocking op's start: renumber seqs densely
        self.lent: dict[int, int] = {}  # blocking op id -> the position its start handed back
        self.streams: dict[Agent, StreamState] = {}
        self.stream_at: dict[tuple[int, str], StreamState] = {}  # (rank, name): no Agent hashing
        self.hosts: dict[Agent, HostState] = {}
        self.hosts_of_rank: dict[int, list[HostState]] = {}  # rank -> its host threads (no scans)
        self.groups: dict[str, GroupConfig] = {}
        self._init_comm()
        self.notes: list[Note] = []
        self.gloo_sends_waited: set[int] = set()  # gloo isends waited once (a second wait hangs)
        # (rank, buffer) -> streams record_stream named since its last free: the caching allocator
        # keeps them per block, so one host thread of the rank may record and another free
        self.recorded_streams: dict[tuple[int, str], list[str]] = {}
        # (rank, buffer) -> the free that ended its current life (until a new alloc): a later use
        # or free of it is a lifetime bug, noted (see note_freed_use)
        self.freed: dict[tuple[int, str], Rec] = {}
        self.allocations: list = []  # every host.buffer (trace.Alloc), for the memory metrics
        # (rank, storage name) of every host.buffer not yet freed: a new buffer of a live name is
        # a storage of its own, named label#k (see Host.buffer); storage -> label when they differ
        self.live: set[tuple[int, str]] = set()
        self.labels: dict[tuple[int, str], str] = {}
        self.held: set[tuple[int, str]] = set()  # freed after record_stream: not named again
        self.current: HostState | None = None
        self.main_glet: greenlet | None = None
        self.failed: BaseException | None = None  # what a host program raised, as it raised it
        self.injections: dict[tuple[Agent, int], list[Callable[[], None]]] = {}
        self.post_injections: dict[tuple[Agent, int], list[Callable[[], None]]] = {}
        self.work_waiters: dict[tuple, simpy.Event] = {}  # a fix's wait for another thread's
        # handle: the handle's injection key -> the event its issue fires (sim.inject)
        self.replaying_log = False  # an op log's replay: every line runs (sim.inject)
        self.fix_events: dict[tuple[int, str], tuple] = {}  # (rank, name) -> an injected fix's
        # Event and the simpy event of its first record (sim.inject)
        self.issued_by_key: dict[tuple[Agent, int], list[Rec]] = {}
        self.keyed = False  # set by inject_fixes: remember which action issued which ops
        self.works: dict[int, Any] = {}  # issuing host op id -> the Work the model received
        self.location_kind = ""  # the kind of op whose location is being looked up (a hint)
        self.location_of: Callable[..., str] = location_finder(self)
        self.tag_rec: Callable[[Rec], None] | None = None  # op-log replay: line and name per op
        self.channels = Channels(self.env)  # hand-offs between host threads (sim.handoff)

    # -- records -------------------------------------------------------------------------------
    def new_rec(self, agent: Agent, kind: str, name: str, dur: float, owner: HostState | StreamState,
                enqueued: float, step: int | None, location: str,
                accesses: tuple[Access, ...] = (), attrs: dict[str, Any] | None = None) -> Rec:
        """A new op of ``agent`` (whose HostState or StreamState is ``owner``), its scaled duration in
        its ``end`` slot until it ends: every op the engine records is made here (host actions,
        stream ops, the comm side's ops). Checks the ``max_ops`` bound."""
        recs = self.recs
        n = len(recs)
        if n >= self.max_ops:
            self._too_many_ops()
        idx = owner.count
        owner.count = idx + 1
        rec = Rec(n, agent, idx, kind, name, enqueued, step, location, accesses,
                   {} if attrs is None else attrs)
        if self.tag_rec is not None:
            self.tag_rec(rec)
        if dur or self.perturb is not None:  # (scaling 0 is 0: skip the call on the hot path)
            rec.end = self.scaled(dur, rec)  # a pending op's end slot holds its duration
        recs.append(rec)
        return rec

    def _too_many_ops(self) -> None:
        """Stop a runaway model (new_rec checks the bound)."""
        raise OpsBoundExceeded.passed(self.max_ops)

    def scaled(self, dur: float, rec: Rec) -> float:
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

    def mark_start(self, rec: Rec, t: float) -> None:
        rec.start = float(t)
        rec.start_seq = self.seq
        self.seq += 1

    def mark_end(self, rec: Rec, t: float) -> None:
        rec.end = float(t)
        rec.end_seq = self.seq
        self.seq += 1
        if self.waiters:
            self._wake_waiters(rec)

    def _wake_waiters(self, rec: Rec) -> None:
        """Fire the done_event()s of ``rec``, which just ended."""
        waiters = self.waiters.pop(rec.id, None)
        if waiters:
            for ev in waiters:
                ev.succeed()

    def done_event(self, rec: Rec) -> simpy.Event:
        """An event that fires when ``rec`` (not yet done) ends."""
        ev = self.env.event()
        self.waiters.setdefault(rec.id, []).append(ev)
        return ev

    # -- agents ----------------------------------------------------------------------------------
    def stream(self, rank: int, name: str) -> StreamState:
        s = self.stream_at.get((rank, name))
        if s is None:
            agent = Agent(rank, STREAM, self.checked_stream(rank, name))
            s = self.stream_at[(rank, name)] = self.streams[agent] = StreamState(agent)
            self.env.process(self._stream_loop(s))
        return s

    def add_host(self, rank: int, thread: str, program: Callable, args: tuple, api_factory) -> None:
        agent = Agent(rank, HOST, thread)
        if agent in self.hosts:
            raise ModelError(f"host thread {thread!r} of rank {rank} spawned twice")
        h = self.hosts[agent] = HostState(agent)
        h.api = api_factory(self, h)
        peers = self.hosts_of_rank.setdefault(rank, [])
        peers.append(h)
        if len(peers) > 1:  # threads of a rank share streams and events: no running ahead
            for x in peers:
                x.shared = True
        self.stream(rank, "compute")
        self.env.process(self._host_driver(h, program, args))

    # -- host side -------------------------------------------------------------------------------
    def _host_driver(self, h: HostState, program: Callable, args: tuple):
        g = h.glet = greenlet(program)
        self.current = h
        try:
            request = g.switch(h.api, *args)
            while not g.dead:
                yield request
                self.current = h
                request = g.switch()
        except BaseException as e:  # (simpy passes on a copy, made with type(e)(*e.args): an
            # exception class whose constructor takes other arguments breaks it). The first
            # thread's to fail is the run's error: a thread already due at the same step runs
            # before simpy stops the run, and may fail too (a bound passed once is passed by
            # every thread after it), but what it says is not where the run went wrong.
            if self.failed is None:
                self.failed = e
            raise
        if self.post_injections:
            self.current = h
            done = greenlet(lambda: self.run_injections(h, self.post_injections, h.last_key))
            request = done.switch()
            while not done.dead:
                yield request
                self.current = h  # (another thread ran meanwhile: a fix's sync that settles)
                request = done.switch()
        h.finished = True
        h.blocked = None

    def block(self, h: HostState, ev: simpy.Event, blocked: Blocked | None = None) -> Any:
        """From inside a host greenlet: wait (in simulated time) for ``ev``."""
        h.blocked = blocked
        value = self.main_glet.switch(ev)
        h.blocked = None
        if self.env.now > h.clock:
            h.clock = self.env.now
        return value

    def settle(self, h: HostState) -> None:
        """Before touching state shared with the rank's other host threads (streams, events, p2p
        counters), bring simpy's time up to this host's clock so threads act in simulated-time
        order, not in the order their greenlets happened to run ahead."""
        if h.shared and h.clock > self.env.now:
            self.sync_clock(h)

    def sync_clock(self, h: HostState) -> None:
        """Bring simpy's time up to the host's clock, so the host can observe device state."""
        if h.clock > self.env.now:
            if h.clock > self.max_time:
                raise TimeBoundExceeded.passed(self.max_time, h.agent)
            self.block(h, self.env.timeout(h.clock - self.env.now))

    def host_op(self, h: HostState, kind: str, name: str, dur: float = 0.0,
                accesses: tuple[Access, ...] = (), location: str | None = None) -> Rec:
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
        rec = self.new_rec(h.agent, kind, name, dur, h, float(h.clock), h.step, location, accesses)
        rec.start = rec.enqueued  # mark_start and mark_end, inlined (hot path)
        rec.start_seq = seq = self.seq
        h.clock += rec.end  # (the duration, until it is replaced by the end time just below)
        if h.clock > self.max_time:  # a host that never blocks must still stop at the bound
            raise TimeBoundExceeded.passed(self.max_time, h.agent)
        rec.end = float(h.clock)
        rec.end_seq = seq + 1  # done: nothing can wait for an op that is created finished
        if accesses and self.freed:
            self.note_freed_use(rec)
        self.seq = seq + 2
        if self.keyed:
            self._note_issue(h, key, rec)
        return rec

    def blocking_op(self, h: HostState, kind: str, name: str, location: str | None = None) -> Rec:
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

    def _note_issue(self, h: HostState, key: tuple | None, rec: Rec) -> None:
        """With fixes injected: remember which program action issued ``rec``, or mark it as one of
        a fix's own syncs (host_op and blocking_op, after :meth:`_before_issue`)."""
        if key is not None:
            self.issued_by_key.setdefault(key, []).append(rec)
        elif h.injected_hold:
            rec.attrs["injected"] = True  # a fix's sync, not the program's own action

    def end_blocking(self, h: HostState, rec: Rec) -> None:
        h.clock = max(h.clock, self.env.now)
        self.mark_end(rec, h.clock)

    def wait_recs(self, h: HostState, rec: Rec, deps: Iterable[Rec], reason: str) -> None:
        """Block host ``h`` (inside blocking op ``rec``) until every op of ``deps`` has ended."""
        after = rec.after = list(rec.after)  # (its own list: grown in place, not copied per dep)
        for dep in deps:
            after.append(dep)
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

    def _before_issue(self, h: HostState, kind: str, location: str) -> tuple | None:
        """Run fix injections around the program's next action; return that action's key.

        A key is (host agent, kind, location, n): the n-th action of that kind issued from that
        model line by this thread, injected ones not counted. A fix found in one run names the same
        action in a re-run even when timing changes how often a polling loop elsewhere runs.
        """
        if h.injected_hold:
            return None
        self.flush_post_injections(h)
        site = (kind, location)
        n = h.occurrences.get(site, 0)
        h.occurrences[site] = n + 1
        h.last_key = key = (h.agent, kind, location, n)
        if self.injections:
            self.run_injections(h, self.injections, key)
        return key

    def issued_work(self, issuer: int, work: Any) -> None:
        """Host action ``issuer`` returned ``work``; wake a fix's wait for it (sim.inject)."""
        self.works[issuer] = work
        for key, ev in list(self.work_waiters.items()) if self.work_waiters else ():
            issued = self.issued_by_key.get(key)
            if issued and issued[0].id == issuer:
                del self.work_waiters[key]
                ev.succeed()

    def flush_post_injections(self, h: HostState) -> None:
        """Run now the syncs a fix inserts after the thread's last action (they run, otherwise,
        when its next action is issued): for a thread about to wait for another one, which may
        itself be waiting for them."""
        if self.post_injections and h.last_key is not None:
            self.run_injections(h, self.post_injections, h.last_key)

    def run_injections(self, h: HostState, table: dict, key: tuple[Agent, int]) -> None:
        todo = table.pop(key, None)
        if todo:
            h.injected_hold = True
            try:
                for fn in todo:
                    fn()
            finally:
                h.injected_hold = False

    def enqueue(self, h: HostState, stream_name: str, kind: str, name: str, dur: float = 0.0,
                accesses: tuple[Access, ...] = (),
                after: Iterable[Rec] | Callable[[], Iterable[Rec]] = (),
                issue_kind: str | None = None, location: str | None = None) -> Rec:
        """Issue a stream op: a host action (launch overhead) that enqueues ``kind`` on a stream.

        ``after`` may be a callable: it is then called once the issuing action ran the syncs a fix
        inserted before it, which an edge taken from a stream's current position must include."""
        issue = self.host_op(h, issue_kind or kind, name, self.launch_overhead, (), location)
        if callable(after):
            after = after()
        s = self.stream_at.get((h.agent.rank, stream_name)) or self.stream(h.agent.rank, stream_name)
        rec = self.new_rec(s.agent, kind, name, dur, s, h.clock, h.step, issue.location, accesses,
                           {"current_stream": h.current_stream})
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

    def note_freed_use(self, rec: Rec) -> None:
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
    def _stream_loop(self, s: StreamState):
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
                if "batch" in rec.attrs:
                    yield from self._run_batch(s, rec)
                else:
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

    # -- running -----------------------------------------------------------------------------------
    def run(self, source: str = "", meta: dict | None = None) -> Trace:
        """Simulate until every host finished or nothing can move, and return the trace."""
        try:  # (the garbage collector's policy is its callers': see gcpause)
            return self._run(source, meta)
        finally:
            self._release()

    def _release(self) -> None:
        """Drop the per-op bookkeeping once the trace is built. The engine ends inside reference
        cycles (environment, processes, greenlets), so what it still held would wait for a full
        cyclic collection: seconds for a million ops, charged to whatever runs next (the analysis).
        Released here, it is freed at once by reference counting."""
        self.recs = []
        self._release_comm()
        self.issued_by_key, self.works = {}, {}
        self.waiters, self.matches = {}, {}
        self.tag_rec = self.location_of = None  # (an op-log replay's hooks hold the parsed log)

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
                    raise TimeBoundExceeded.passed(limit)
                step()
        except self._empty_schedule:
            pass
        except BaseException as exc:
            if self.failed is not None:  # a host program's own exception, traceback and all
                raise self.failed from None
            orig = exc.__cause__  # simpy re-raises a copy of a failed process's exception:
            if type(orig) is type(exc):  # raise the original, whose traceback has the model's line
                raise orig from None
            raise
        blocked = [h.blocked or Blocked(h.agent, None, "blocked", ())
                   for h in self.hosts.values() if not h.finished]
        blocked += [s.blocked() if callable(s.blocked) else s.blocked  # (stream waits: lazily)
                    for s in self.streams.values() if s.blocked is not None]
        # The run stopped when the last thing that could run had run: a host's own work advances
        # its clock, not simpy's, until it next syncs (so env.now alone depended on whether a
        # later host action happened to sync the clock, and a replay of the same run disagreed)
        now = max([self.env.now] + [h.clock for h in self.hosts.values()])
        stall = Stall(now, tuple(sorted(blocked, key=lambda b: b.agent))) if blocked else None
        meta = {**(meta or {}), "cost_model": self.cost_model()}
        caught, waiting = caught_by_stall(self.recs, stall)
        for r in caught:  # ops caught mid-way by a stall end where the simulation stopped
            r.attrs["unfinished"] = True
            self.mark_end(r, stall.time)
        self.unmatched_notes()
        trace = build_trace(self.recs, stall, waiting, seq=self.seq, lent=self.lent,
                            seq_holes=self.seq_holes, notes=self.notes,
                            agents=set(self.hosts) | set(self.streams), source=source, meta=meta)
        if self.allocations:  # (the memory metrics read them; an op log's are alloc ops)
            trace = dataclasses.replace(trace, allocations=tuple(self.allocations))
        return trace

    def cost_model(self) -> dict:
        """What the run's timing read besides each op's own duration (op log v2's declarations,
        written by ``dump_oplog``): the launch overhead and each group's settings."""
        return cost_model(self.launch_overhead, self.groups.values())
