"""Replay a parsed op log through the engine: one host program per (rank, host thread).

Each program issues its thread's lines in order through the modelling API, exactly as a model would,
so an op log and a model are simulated and analysed by the same code. While a line runs, the engine's
``tag_rec`` hook stamps every op it creates with the line number and the line's name, and
``location_of`` answers ``FILE:LINE``: reports then point into the log.

``dur`` is the duration of kernels (``launch``), host work (``host``), sends (``isend``,
``send_object``, ``isend_object``) and collectives. Receives end when their data arrives, and
records, waits, syncs, queries, ``alloc``, ``free`` and ``record_stream`` take no time of their own,
so their ``dur`` is not used. A line's optional ``step`` labels its ops (and the stream ops it
enqueues) with that step, as ``host.step`` does in a model, so a recorded schedule gets step
metrics. ``alloc`` is a host action of its own (kind ``alloc``, no access,
``attrs`` naming buffer, size and allocation stream) so that it has a place in reports; it enqueues
nothing (allocation is host work), so it changes no stream's order.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

from ..sim.api import Event, Host, P2POp, Simulation, Work
from ..kinds import COLLECTIVE_KINDS
from ..sim.comm import batch_issue_order
from ..sim.errors import InternalError, ModelError
from ..sim.records import HostState, Rec
from ..sim.memory import Buffer
from .batches import batches as group_batches
from .issueorder import issue_gates
from .read import Line, OpLog, load_oplog
from ..trace import Agent, Blocked, Trace


def simulate_oplog(oplog: OpLog | str | os.PathLike, *, seed: int | None = None, jitter: float = 0.0,
                   max_ops: int = 5_000_000, max_time: float = 1e12, fixes: Sequence = (),
                   base: Trace | None = None, perturb=None) -> Trace:
    """Simulate an op log (an :class:`OpLog` or a path) into a trace; ops carry ``line``/``location``.

    ``fixes`` found in ``base`` (a trace of the same log) are injected as for a model, to cost them;
    ``perturb`` is the engine's duration perturbation (a schedule-exploration strategy).
    Every mistake the run reveals is a ``ModelError`` naming ``FILE:LINE``.
    """
    if not isinstance(oplog, OpLog):
        oplog = load_oplog(oplog)
    sim = Simulation(seed=seed, jitter=jitter, max_ops=max_ops, max_time=max_time, perturb=perturb,
                     launch_overhead=oplog.launch_overhead)
    sim.engine.replaying_log = True
    for g in oplog.groups.values():  # (a declaration's settings, else the backend's defaults)
        sim.group(g.name, g.ranks, g.backend, p2p_streams=g.p2p_streams, latency=g.latency,
                  bandwidth=g.bandwidth, eager_bytes=g.eager_bytes, blocking_wait=g.blocking_wait)
    replay = _Replay(sim, oplog)
    by_thread: dict[tuple[int, str], list[Line]] = {t: [] for t in oplog.threads}
    for line in oplog.lines:
        by_thread[(line.rank, line.host)].append(line)
    for (rank, host), lines in by_thread.items():
        sim.spawn(rank, replay.program, lines, thread=host)
    meta = {"oplog": oplog.path, "seed": seed, "jitter": jitter}
    try:
        if fixes:
            from ..sim.inject import inject_fixes
            inject_fixes(sim.engine, base, fixes)
        return sim.run(source=oplog.path, meta=meta)
    except ModelError as e:
        msg = str(e)
        if msg.startswith(oplog.path + ":"):
            raise
        raise type(e)(f"{oplog.path}: {msg}") from None
    except InternalError:
        raise
    except Exception as e:  # nothing of the user's runs in a replay: any other failure is ours
        raise InternalError(f"replaying {oplog.path}", e) from e
    finally:  # its table of bound methods is a cycle that would keep every line alive
        replay.run.clear()


# (see _Replay.take) the blocking lines whose effect on shared state is at their start
_TAKEN_AS_THEY_START = frozenset({"send_object", "recv_object", "sync_stream", "sync_device",
                                  "sync_event", "get"})  # (a get: its put may be a later line)
# op kind (every one of streamsim.kinds.OP_KINDS) -> the _Replay method that issues its line
HANDLERS: dict[str, str] = {
    "launch": "launch", "host": "host_work", "record": "record", "wait_event": "wait_event",
    "sync_event": "sync_event", "sync_stream": "sync_stream", "sync_device": "sync_device",
    "isend": "p2p", "irecv": "p2p", **{k: "collective" for k in sorted(COLLECTIVE_KINDS)},
    "send_object": "send_object", "recv_object": "recv_object", "isend_object": "isend_object",
    "wait": "wait", "query": "query", "alloc": "alloc", "free": "free",
    "record_stream": "record_stream", "put": "put", "get": "get",
}


class _Replay:
    """State shared by the host programs of one replay: per-rank buffers, events and handles."""

    def __init__(self, sim: Simulation, oplog: OpLog):
        self.engine = e = sim.engine
        self.oplog = oplog
        self.current: dict[HostState, Line] = {}  # (by HostState: no Agent hashing per op)
        self.events: dict[tuple[int, str], Event] = {}
        self.works: dict[int, Work] = {}  # issuing line -> its Work
        self.pending: dict[int, object] = {}  # issuing line -> simpy event a waiter blocks on
        self.lines = {ln.lineno: ln for ln in oplog.lines if ln.handle is not None}
        self.batch_lines: dict[HostState, list[Line]] = {}  # a batch being issued: its lines to tag
        # Line order between a rank's threads (issueorder): line -> earlier lines it waits for;
        # the lines some line waits for, and a simpy event for each one a thread is blocked on.
        self.gates = issue_gates(oplog.lines, oplog.threads,
                                 [g.name for g in oplog.groups.values() if g.backend == "gloo"])
        self.awaited = {p for deps in self.gates.values() for p in deps}
        self.taken: set[int] = set()
        self.taking: dict[int, object] = {}
        self.by_lineno: dict[int, Line] | None = None
        e.tag_rec = self.tag
        e.location_of = self.location
        self.run: dict[str, Callable[[Host, Line], None]] = {
            kind: getattr(self, method) for kind, method in HANDLERS.items()}

    # -- engine hooks ------------------------------------------------------------------------------
    def tag(self, rec: Rec) -> None:
        h = self.engine.current
        if h is None or h.injected_hold:  # an injected fix is not the line's own op
            return
        pending = self.batch_lines.get(h) if self.batch_lines else None
        if pending:  # a batch: its ops come one line each, the host action then its stream op
            line = pending[0]
            if rec.agent != h.agent:
                pending.pop(0)
        else:
            line = self.current.get(h)
        if line is not None:
            rec.line = line.lineno
            rec.name = line.name
            if line.site is not None:
                rec.attrs["site"] = line.site
            if (line.t is not None or line.result is not None) and rec.agent is h.agent:
                if line.t is not None:  # (on the line's host action: the writer writes it back)
                    rec.attrs["t"] = line.t
                if line.result is not None:
                    rec.attrs["observed"] = True  # (the query's result is the program's)
            if line.inferred is not None:  # (provenance: the writer keeps it)
                rec.attrs["inferred"] = line.inferred
            elif line.any_source:
                rec.attrs["any_source"] = True
            if line.op in _TAKEN_AS_THEY_START and line.lineno in self.awaited and \
                    line.lineno not in self.taken:
                self.take(line.lineno)

    def location(self) -> str:
        h = self.engine.current
        if h is None:
            return self.oplog.path
        pending = self.batch_lines.get(h) if self.batch_lines else None
        line = pending[0] if pending else self.current.get(h)  # (a batch: the line being issued)
        return line.location if line is not None else self.oplog.path

    # -- the host program --------------------------------------------------------------------------
    def program(self, host: Host, lines: list[Line]) -> None:
        state = host._h
        run, current = self.run, self.current
        batches = group_batches(lines)
        for i, line in enumerate(lines):
            current[state] = line
            host.step = line.step  # (each line names its own step, or none)
            if line.t is not None and line.t > state.clock:
                state.clock = line.t  # (the program's own time before it: host time unseen)
            batch = batches.get(i)
            if batch == ():
                continue  # (issued with the first line of its batch)
            if self.awaited or self.gates:
                self.in_line_order(host, batch or (line,))
            try:
                if batch:
                    self.batch(host, batch)
                else:
                    run[line.op](host, line)
                if self.awaited:
                    for ln in batch or (line,):
                        if ln.lineno in self.awaited and ln.lineno not in self.taken:
                            self.take(ln.lineno)
            except ModelError as e:
                msg = str(e)
                if msg.startswith(self.oplog.path + ":"):
                    raise
                raise type(e)(f"{line.location}: {msg}") from None
            except Exception as e:  # (not the user's: see simulate_oplog)
                raise InternalError(f"replaying {line.location}", e) from e

    def in_line_order(self, host: Host, lines: Sequence[Line]) -> None:
        """Before ``lines`` (one line, or one batch) take effect: wait until every earlier line of
        another thread of the rank that touches the same state has (:mod:`.issueorder`)."""
        e, h = self.engine, host._h
        e.settle(h)  # (so that what this line does is at this host's time, not before it)
        for ln in lines:
            for p in self.gates.get(ln.lineno, ()):
                if p not in self.taken:
                    e.flush_post_injections(h)  # (a fix's record after this thread's last line)
                    ev = self.taking.get(p)
                    if ev is None:
                        ev = self.taking[p] = e.env.event()
                    other = self.oplog_line(p)
                    e.block(h, ev, Blocked(h.agent, None, f"{ln.op} at line {ln.lineno} waits "
                                           f"for line {p} of thread {other.host!r} to be issued "
                                           "(lines take effect in line order)",
                                           (Agent(other.rank, "host", other.host),)))

    def take(self, lineno: int) -> None:
        """Line ``lineno`` has taken effect: the lines that wait for it may go on. A line is
        taken once its call returns (its effect, and the syncs a fix put before it, are then
        done), except a blocking line whose effect is at its start, taken as it starts
        (:meth:`tag`): a gloo send or receive (another thread's use of the group must not wait
        for the message to arrive) and a host sync (it captures the positions it drains as it
        begins: another thread's later kernel on a drained stream is not held until it returns,
        nor drained by it)."""
        self.taken.add(lineno)
        ev = self.taking.pop(lineno, None)
        if ev is not None:
            ev.succeed()

    def oplog_line(self, lineno: int) -> Line:
        if self.by_lineno is None:
            self.by_lineno = {ln.lineno: ln for ln in self.oplog.lines}
        return self.by_lineno[lineno]

    # -- per-rank names ------------------------------------------------------------------------------
    def event(self, host: Host, name: str) -> Event:
        key = (host.rank, name)
        ev = self.events.get(key)
        if ev is None:
            ev = self.events[key] = host.event(name)
        return ev

    def issued(self, line: Line, work: Work) -> None:
        self.works[line.lineno] = work
        ev = self.pending.pop(line.lineno, None)
        if ev is not None:
            ev.succeed()

    def work(self, host: Host, line: Line) -> Work:
        """The Work of the line ``line`` names; another thread may not have issued it yet: wait."""
        w = self.works.get(line.target)
        if w is None:
            e = self.engine
            ev = self.pending.get(line.target)
            if ev is None:
                ev = self.pending[line.target] = e.env.event()
            issuer = self.lines[line.target]
            e.block(host._h, ev, Blocked(host._h.agent, None, f"{line.op} on handle "
                                         f"{line.handle!r} waits for line {line.target} to be "
                                         "issued", (Agent(issuer.rank, "host", issuer.host),)))
            w = self.works[line.target]
        return w

    # -- ops -------------------------------------------------------------------------------------------
    def launch(self, host: Host, ln: Line) -> None:
        host.launch(ln.name, reads=ln.reads, writes=ln.writes, dur=ln.dur, stream=ln.stream)

    def host_work(self, host: Host, ln: Line) -> None:
        host.host_work(ln.name, reads=ln.reads, writes=ln.writes, dur=ln.dur)

    def record(self, host: Host, ln: Line) -> None:
        host.record(self.event(host, ln.event), ln.stream)

    def wait_event(self, host: Host, ln: Line) -> None:
        host.wait_event(self.event(host, ln.event), ln.stream)

    def sync_stream(self, host: Host, ln: Line) -> None:
        host.sync_stream(ln.stream)

    def sync_device(self, host: Host, ln: Line) -> None:
        host.synchronize()

    def sync_event(self, host: Host, ln: Line) -> None:
        host.sync_event(self.event(host, ln.event))

    def p2p(self, host: Host, ln: Line) -> None:
        group = host.group(ln.group)
        with host.use_stream(ln.stream):
            if ln.op == "isend":
                w = group.isend(list(ln.reads), ln.peer, nbytes=ln.nbytes, dur=ln.dur,
                                name=ln.name, handle=ln.handle)
            else:
                w = group.irecv(list(ln.writes), ln.peer, nbytes=ln.nbytes, name=ln.name,
                                handle=ln.handle)
        self.issued(ln, w)

    def batch(self, host: Host, lines: list[Line]) -> None:
        """The lines of one batch_isend_irecv, issued by one call; each line's own name and
        handle tag the op it gives (the engine's tag hook reads ``current``)."""
        first = lines[0]
        ops = [P2POp(ln.op, list(ln.reads if ln.op == "isend" else ln.writes), ln.peer,
                     nbytes=ln.nbytes, dur=ln.dur if ln.op == "isend" else None, name=ln.name,
                     handle=ln.handle) for ln in lines]
        state = host._h
        self.batch_lines[state] = [lines[i] for i in batch_issue_order([ln.op for ln in lines])]
        try:
            with host.use_stream(first.stream):
                works = host.group(first.group).batch_isend_irecv(ops)
        finally:
            self.batch_lines.pop(state, None)
        for ln, w in zip(lines, works):
            self.issued(ln, w)

    def collective(self, host: Host, ln: Line) -> None:
        cfg = host.group(ln.group).cfg
        with host.use_stream(ln.stream):
            w = host.collective(cfg, ln.op, list(ln.reads), list(ln.writes), ln.nbytes, ln.dur,
                                ln.name, ln.handle, ln.root)
        self.issued(ln, w)

    def send_object(self, host: Host, ln: Line) -> None:
        host.group(ln.group).send_object(ln.nbytes or 0, ln.peer, name=ln.name, dur=ln.dur)

    def recv_object(self, host: Host, ln: Line) -> None:
        host.group(ln.group).recv_object(ln.peer, name=ln.name)

    def isend_object(self, host: Host, ln: Line) -> None:
        w = host.group(ln.group).isend_object(ln.nbytes or 0, ln.peer, name=ln.name,
                                              handle=ln.handle, dur=ln.dur)
        self.issued(ln, w)

    def wait(self, host: Host, ln: Line) -> None:
        w = self.work(host, ln)
        if ln.blocking or w._cfg.backend == "gloo":
            w.wait(blocking=ln.blocking)
        else:  # NCCL: the current stream waits for the op
            with host.use_stream(ln.stream):
                w.wait(blocking=False)

    def query(self, host: Host, ln: Line) -> None:
        self.work(host, ln).is_completed(observed=ln.result)

    def alloc(self, host: Host, ln: Line) -> None:
        rec = self.engine.host_op(host._h, "alloc", ln.name)
        rec.attrs.update(buffer=ln.buffer, nbytes=ln.nbytes, stream=ln.stream)
        if ln.label is not None:
            rec.attrs["label"] = ln.label
        self.engine.freed.pop((host.rank, ln.buffer), None)  # a new life: uses are no longer late

    # The reader resolved which life of the buffer a free or record_stream acts on (its size and
    # allocation stream): the Buffer is that life.
    def free(self, host: Host, ln: Line) -> None:
        host.free(Buffer(host.rank, ln.buffer, ln.nbytes, ln.stream))

    def record_stream(self, host: Host, ln: Line) -> None:
        host.record_stream(Buffer(host.rank, ln.buffer, ln.nbytes), ln.stream)

    def put(self, host: Host, ln: Line) -> None:
        host.put(ln.channel, name=ln.name)

    def get(self, host: Host, ln: Line) -> None:
        host.get(ln.channel, name=ln.name)

