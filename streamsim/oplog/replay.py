"""Replay a parsed op log through the modelling API: one host program per (rank, host thread).

Each program issues its thread's lines in order through the public modelling API, exactly as a
model would, so an op log and a model are simulated and analysed by the same code. The call that
replays a line is its kind's declaration (``streamsim.kinds``, ``OpKind.replay``, e.g.
``host.launch(name, reads=reads, writes=writes, dur=dur, stream=stream)``): this module turns
each declaration into a function once (:func:`replay_call`), so a new op kind whose call takes the
line's fields needs nothing here. Before a line runs, its program labels the ops that follow
with the line (``host.origin``, :class:`~streamsim.sim.origins.Origin`: as ``host.step`` labels
them with a step): every op the line's call makes has the line number and the line's name, and
errors name ``FILE:LINE``: reports then point into the log.

``dur`` is the duration of kernels (``launch``), host work (``host``), sends (``isend``,
``send_object``, ``isend_object``) and collectives (``kinds.TIMED_KINDS``: their call passes
it). Receives end when their data arrives, and records, waits, syncs, queries, ``alloc``,
``free`` and ``record_stream`` take no time of their own, so their ``dur`` is not used. A line's
optional ``step`` labels its ops (and the stream ops it enqueues) with that step, as
``host.step`` does in a model, so a recorded schedule gets step metrics. ``alloc`` is a host
action of its own (``Host.alloc``: kind ``alloc``, no access, ``attrs`` naming buffer, size and
allocation stream) so that it has a place in reports; it enqueues nothing (allocation is host
work), so it changes no stream's order.

One module because it is one replay: the engine's path and the compiled one
(:func:`_replayed_natively`) take the same log, groups, gates and bounds, and each error the
compiled path meets (a bound passed, a failure of its own) is worded here as the engine's path
words it; split, the two halves would each need the other's wording.
"""
from __future__ import annotations

import functools
import os
import random
import re
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .. import native
from ..kinds import COMM_ROLES, HANDLE_KINDS, OP_KINDS, OpKind, stream_role
from ..sim.groups import cost_model, declare_group
from ..sim.errors import (BoundExceeded, InternalError, ModelError, OpsBoundExceeded,
                          TimeBoundExceeded)
from ..sim.finish import trace_of
from ..sim.handles import P2POp
from ..sim.memory import Buffer, Ref
from ..sim.origins import Origin
from ..sim.records import Rec
from .batches import batches as group_batches
from .issueorder import issue_gates
from .leanrun import LeanRun
from .read import Line, OpLog, load_oplog
from .schema import LINE_FIELDS
from ..trace import Access, Agent, Note, Op, Trace, View

if TYPE_CHECKING:  # (the engine, imported where its replay runs: the compiled one needs none of it)
    from ..sim.api import Event, Host, Signal, Simulation, Work


def simulate_oplog(oplog: OpLog | str | os.PathLike, *, seed: int | None = None, jitter: float = 0.0,
                   max_ops: int = 5_000_000, max_time: float = 1e12, fixes: Sequence = (),
                   base: Trace | None = None, perturb=None, lean: bool = False
                   ) -> "Trace | LeanRun":
    """Simulate an op log (an :class:`OpLog` or a path) into a trace; ops carry ``line``/``location``.

    ``fixes`` found in ``base`` (a trace of the same log) are injected as for a model, to cost them;
    ``perturb`` is the engine's duration perturbation (a schedule-exploration strategy).
    ``lean``: a :class:`LeanRun` (the run as the compiled replay's columns, no ``Op`` made)
    where the compiled replay and measures run it, else the trace (fix costing's re-runs).
    Every mistake the run reveals is a ``ModelError`` naming ``FILE:LINE``.
    """
    if not isinstance(oplog, OpLog):
        oplog = load_oplog(oplog)
    if perturb is None:
        trace = _replayed_natively(oplog, seed, jitter, max_ops, max_time, fixes, base,
                                   lean and native.lean_reruns())
        if trace is not None:
            return trace
    from ..sim.api import Simulation
    replay = _Replay(oplog)
    sim = Simulation(seed=seed, jitter=jitter, max_ops=max_ops, max_time=max_time, perturb=perturb,
                     launch_overhead=oplog.launch_overhead, replay=True)
    by_thread: dict[tuple[int, str], list[Line]] = {t: [] for t in oplog.threads}
    for line in oplog.lines:
        by_thread[(line.rank, line.host)].append(line)
    for (rank, host), lines in by_thread.items():
        sim.spawn(rank, replay.program, lines, thread=host)
    meta = {"oplog": oplog.path, "seed": seed, "jitter": jitter}
    try:
        _declare_groups(sim.group, oplog)  # (a group the engine refuses: named with the file)
        if fixes:
            sim.inject_fixes(fixes, base)
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


def _replayed_natively(oplog: OpLog, seed: int | None, jitter: float, max_ops: int,
                       max_time: float, fixes: Sequence = (), base: Trace | None = None,
                       lean: bool = False) -> "Trace | LeanRun | None":
    """The trace of the compiled replay (streamsim/native/_replay.pyx), the same as this
    module's through the engine gives; None when it is not built or off, or does not cover the
    log (a kind outside ``_replay.KINDS``, a fix's sync that blocks the host between two members
    of a batch, a run that stalls, or anything the engine would refuse or bound): the engine then
    runs, and words any error and the deadlock. The threads of a rank keep the line order of
    :class:`_Replay` (``issue_gates``)."""
    compiled = native.replayer()
    if compiled is None or not 0 <= jitter < float("inf"):
        return None
    threaded = len({rank for rank, _ in oplog.threads}) != len(oplog.threads)
    groups = _group_configs(oplog)
    if groups is None:
        return None
    try:
        syncs = None
        if fixes:  # (first: a fix it cannot inject costs no line order)
            syncs = _injections(fixes, base, compiled)
            if syncs is None:
                return None
        gates = _gates(oplog) if threaded else None
        # (the run's own replay, not a fix costing re-run: its schedule's arrays, freed as it
        # ends, are handed back rather than left as holes its columns do not fill; at 1,000,000
        # lines of the recorded-like pipeline, a peak 9 MB lower)
        with native.large_blocks_mapped(not fixes):
            got = compiled.replay(oplog.lines, oplog.threads, oplog.launch_overhead, seed,
                                  jitter, max_ops, max_time,
                                  random.Random(0 if seed is None else seed), syncs, groups,
                                  gates, _TAKEN_AS_THEY_START, lean=lean)
        if got is None:
            return None
        meta = {"oplog": oplog.path, "seed": seed, "jitter": jitter,
                "cost_model": cost_model(oplog.launch_overhead, groups.values())}
        if lean:
            return LeanRun(got, oplog.path, meta)
        ops, notes, agents = got
        return trace_of(tuple(ops), None, notes, agents, oplog.path, meta)
    except native.BoundPassed as e:  # (worded as the engine's, named as the program names it)
        raise _bound_error(e, oplog.path, max_ops, max_time) from None
    except Exception as e:  # (what the log could get wrong, the replay gave up on: ours)
        raise InternalError(f"replaying {oplog.path}", e) from e


def _bound_error(passed: native.BoundPassed, path: str, max_ops: int,
                 max_time: float) -> BoundExceeded:
    """The error of a bound the compiled replay passed (``passed``): the engine's, named as
    :meth:`_Replay.program` and :func:`simulate_oplog` name it (the line whose call passed it,
    else the file)."""
    if passed.bound == "max_ops":
        e: BoundExceeded = OpsBoundExceeded.passed(max_ops)
    else:
        e = TimeBoundExceeded.passed(max_time, passed.agent)
    where = path if passed.lineno is None else f"{path}:{passed.lineno}"
    return type(e)(f"{where}: {e}")


def _group_configs(oplog: OpLog) -> dict | None:
    """The engine's configuration of each of the log's groups, made as :func:`simulate_oplog`
    declares them (``declare_group``, which ``Simulation.group`` calls: its defaults, its
    checks; no engine made, nor simpy imported); None when one is refused (the engine's run
    then says why)."""
    groups: dict = {}
    try:
        _declare_groups(functools.partial(declare_group, groups), oplog)
    except ModelError:
        return None
    return groups


def _declare_groups(declare: Callable, oplog: OpLog) -> None:
    """Declare the log's groups with ``declare`` (``Simulation.group``, or ``declare_group``
    into a dict): a declaration's settings, else the backend's defaults."""
    for g in oplog.groups.values():
        declare(g.name, g.ranks, g.backend, p2p_streams=g.p2p_streams, latency=g.latency,
                bandwidth=g.bandwidth, eager_bytes=g.eager_bytes, blocking_wait=g.blocking_wait)


def _injections(fixes: Sequence, base: Trace | None, compiled) -> Any:
    """The syncs of ``fixes`` for the compiled replay (``_replay.fix_syncs``), registered as
    ``sim.inject.inject_fixes`` registers them with the engine: each with the program action
    it is issued before or after; None when a fix is of a kind it does not know or is not keyed
    and cannot be keyed here."""
    syncs = compiled.fix_syncs(list(fixes))  # (the compiled replay's form: _replay.pyx)
    if syncs is not compiled.NOT_KEYED:
        return syncs
    if base is None:
        return None  # (the engine's error)
    from ..sim.inject import key_fixes  # (loaded only when fixes run)
    try:
        keyed = key_fixes(base, fixes)
    except ModelError:
        return None  # (the engine's, as its run raises it)
    syncs = compiled.fix_syncs(list(keyed))
    return None if syncs is compiled.NOT_KEYED else syncs


native.bind_replayer(Op=Op, Rec=Rec, Agent=Agent, Access=Access, View=View, Note=Note, Ref=Ref,
                     Line=Line,
                     is_comm=lambda name: stream_role(name) in COMM_ROLES)

# (see _Replay.take) the blocking lines whose effect on shared state is at their start
def _gates(oplog: OpLog) -> dict:
    """The line order between the threads of each rank (:func:`issue_gates`): line -> the
    earlier lines of other threads it waits for. The same for the engine and the compiled
    replay."""
    return issue_gates(oplog.lines, oplog.threads,
                       [g.name for g in oplog.groups.values() if g.backend == "gloo"])


_TAKEN_AS_THEY_START = frozenset({"send_object", "recv_object", "sync_stream", "sync_device",
                                  "sync_event", "get"})  # (a get: its put may be a later line)
_CALL = re.compile(r"(host|group|work)\.([A-Za-z_]\w*)\(([\w=, ]*)\)\Z")  # (identifiers only)
_RECEIVERS = {"host": "host", "group": "host.group(ln.group)", "work": "self.work(host, ln)"}
_NO_ATTRS: dict[str, Any] = {}
LIFE = "life"  # a replay call's argument that is no line field: the Buffer of the line's buffer life


def parse_call(text: str) -> tuple[str, str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    """An ``OpKind.replay`` declaration, ``receiver.method(field, param=field, ...)``, as
    (receiver, method, positional fields, (parameter, field) pairs)."""
    m = _CALL.match(text)
    if m is None:
        raise ValueError(f"not a replay call: {text!r}")
    receiver, method, args = m.groups()
    pos: list[str] = []
    kw: list[tuple[str, str]] = []
    for arg in filter(None, (a.strip() for a in args.split(","))):
        param, _, field = arg.rpartition("=")
        if not field.isidentifier() or param and not param.isidentifier():
            raise ValueError(f"not a replay call: {text!r}")
        if param:
            kw.append((param, field))
        elif kw:
            raise ValueError(f"a positional argument after a keyword one: {text!r}")
        else:
            pos.append(field)
    return receiver, method, tuple(pos), tuple(kw)


def replay_call(k: OpKind) -> Callable[[Any, Host, Line], None]:
    """The function ``f(replay, host, line)`` that replays a line of kind ``k``: its
    ``OpKind.replay`` call, with its receiver and arguments taken from the line, under ``with
    host.use_stream(stream)`` for a line whose stream is the current one, the Work it returns
    kept as the line's handle. Made as Python source once per kind (as ``dataclasses`` makes its
    methods), so that a line costs what a hand-written call would: the replay is on the hot path
    of every check."""
    receiver, method, pos, kw = parse_call(k.replay)
    args = ", ".join([_argument(f, k) for f in pos] + [f"{p}={_argument(f, k)}" for p, f in kw])
    call = f"{_RECEIVERS[receiver]}.{method}({args})"
    if k.name in HANDLE_KINDS:
        call = f"self.issued(ln, {call})"
    if k.line_stream == "current":
        call = f"with host.use_stream(ln.stream):\n        {call}"
    env = {"Buffer": Buffer}
    exec(f"def run(self, host, ln):\n    {call}\n", env)  # (identifiers only: see parse_call)
    return env["run"]


def _argument(field: str, k: OpKind) -> str:
    """The expression of a call's argument ``field`` for a line ``ln`` of kind ``k``: the line's
    field (``event``: the rank's Event of that name), or :data:`LIFE`: the life of the line's
    buffer, which the reader resolved (its size and, for a ``free``, its allocation stream)."""
    if field == "event":
        return "self.event(host, ln.event)"
    if field == LIFE:
        stream = ", ln.stream" if k.line_stream == "allocation" else ""
        return f"Buffer(host.rank, ln.buffer, ln.nbytes{stream})"
    if field not in LINE_FIELDS:
        raise AssertionError(f"op {k.name!r}: its replay call names {field!r}, not a field of a "
                             "line")
    return f"ln.{field}"


class _Replay:
    """State shared by the host programs of one replay: per-rank events and handles, the lines
    being issued, and the line order between threads."""

    def __init__(self, oplog: OpLog):
        self.oplog = oplog
        self.events: dict[tuple[int, str], Event] = {}
        self.works: dict[int, Work] = {}  # issuing line -> its Work
        self.pending: dict[int, Signal] = {}  # issuing line -> the signal a waiter blocks on
        self.lines = {ln.lineno: ln for ln in oplog.lines if ln.handle is not None}
        # Line order between a rank's threads (issueorder): line -> earlier lines it waits for;
        # the lines some line waits for, and a signal for each one a thread is blocked on.
        self.gates = _gates(oplog)
        self.awaited = {p for deps in self.gates.values() for p in deps}
        self.taken: set[int] = set()
        self.taking: dict[int, Signal] = {}
        self.by_lineno: dict[int, Line] | None = None

    # -- the origin of a line's ops (streamsim.sim.origins) ------------------------------------------
    def origin(self, line: Line) -> Origin:
        """The label of the ops of ``line``: its number, name, location, the attrs it gives them
        (its ``site``, a wait's ``inferred``, an irecv's ``any_source``; the host action also its
        ``t`` and a query's observed result, which the writer writes back), and, for a blocking
        line another thread waits for, that it takes effect as it starts (:meth:`take`)."""
        attrs = host_attrs = _NO_ATTRS
        if line.site is not None or line.inferred is not None or line.any_source or \
                line.t is not None or line.result is not None:
            host_attrs = {}
            if line.site is not None:
                host_attrs["site"] = line.site
            attrs = dict(host_attrs)
            if line.t is not None:
                host_attrs["t"] = line.t
            if line.result is not None:
                host_attrs["observed"] = True  # (the query's result is the program's)
            if line.inferred is not None:  # (provenance: the writer keeps it)
                host_attrs["inferred"] = attrs["inferred"] = line.inferred
            elif line.any_source:
                host_attrs["any_source"] = attrs["any_source"] = True
        on_start = None
        if line.op in _TAKEN_AS_THEY_START and line.lineno in self.awaited:
            on_start = functools.partial(self.take_once, line.lineno)
        return Origin(line.lineno, line.name, line.location, attrs, host_attrs, on_start)

    # -- the host program --------------------------------------------------------------------------
    def program(self, host: Host, lines: list[Line]) -> None:
        run, origin = _runs(), self.origin
        batches = group_batches(lines)
        for i, line in enumerate(lines):
            host.origin = origin(line)
            host.step = line.step  # (each line names its own step, or none)
            if line.t is not None:
                host.idle_until(line.t)  # (the program's own time before it: host time unseen)
            batch = batches.get(i)
            if batch == ():
                continue  # (issued with the first line of its batch)
            if self.awaited or self.gates:
                self.in_line_order(host, batch or (line,))
            try:
                if batch:
                    self.batch(host, batch)
                else:
                    run[line.op](self, host, line)
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
        host.settle()  # (so that what this line does is at this host's time, not before it)
        for ln in lines:
            for p in self.gates.get(ln.lineno, ()):
                if p not in self.taken:
                    sig = self.taking.get(p)
                    if sig is None:
                        sig = self.taking[p] = host.signal()
                    other = self.oplog_line(p)
                    host.wait_signal(sig, f"{ln.op} at line {ln.lineno} waits for line {p} of "
                                     f"thread {other.host!r} to be issued (lines take effect in "
                                     "line order)", (Agent(other.rank, "host", other.host),))

    def take(self, lineno: int) -> None:
        """Line ``lineno`` has taken effect: the lines that wait for it may go on. A line is
        taken once its call returns (its effect, and the syncs a fix put before it, are then
        done), except a blocking line whose effect is at its start, taken as it starts
        (:meth:`origin`): a gloo send or receive (another thread's use of the group must not wait
        for the message to arrive) and a host sync (it captures the positions it drains as it
        begins: another thread's later kernel on a drained stream is not held until it returns,
        nor drained by it)."""
        self.taken.add(lineno)
        sig = self.taking.pop(lineno, None)
        if sig is not None:
            sig.set()

    def take_once(self, lineno: int) -> None:
        if lineno not in self.taken:
            self.take(lineno)

    def oplog_line(self, lineno: int) -> Line:
        if self.by_lineno is None:
            self.by_lineno = {ln.lineno: ln for ln in self.oplog.lines}
        return self.by_lineno[lineno]

    # -- a line's call (its kind's declaration) ----------------------------------------------------
    # -- per-rank names ------------------------------------------------------------------------------
    def event(self, host: Host, name: str) -> Event:
        key = (host.rank, name)
        ev = self.events.get(key)
        if ev is None:
            ev = self.events[key] = host.event(name)
        return ev

    def issued(self, line: Line, work: Work) -> None:
        self.works[line.lineno] = work
        sig = self.pending.pop(line.lineno, None)
        if sig is not None:
            sig.set()

    def work(self, host: Host, line: Line) -> Work:
        """The Work of the line ``line`` names; another thread may not have issued it yet: wait."""
        w = self.works.get(line.target)
        if w is None:
            sig = self.pending.get(line.target)
            if sig is None:
                sig = self.pending[line.target] = host.signal()
            issuer = self.lines[line.target]
            host.wait_signal(sig, f"{line.op} on handle {line.handle!r} waits for line "
                             f"{line.target} to be issued",
                             (Agent(issuer.rank, "host", issuer.host),))
            w = self.works[line.target]
        return w

    def batch(self, host: Host, lines: list[Line]) -> None:
        """The lines of one batch_isend_irecv, issued by one call; each op its own line's origin
        (``P2POp.origin``: its name, handle and location)."""
        first = lines[0]
        ops = [P2POp(ln.op, list(ln.reads if ln.op == "isend" else ln.writes), ln.peer,
                     nbytes=ln.nbytes, dur=ln.dur if ln.op == "isend" else None, name=ln.name,
                     handle=ln.handle, origin=self.origin(ln)) for ln in lines]
        with host.use_stream(first.stream):
            works = host.group(first.group).batch_isend_irecv(ops)
        for ln, w in zip(lines, works):
            self.issued(ln, w)

_RUNS: dict[str, Callable[[Any, Host, Line], None]] = {}  # op kind -> its replay function


def _runs() -> dict[str, Callable[[Any, Host, Line], None]]:
    """:data:`_RUNS`, made at the first replay of this reference (a function compiled for each
    kind, ~3 ms: not in the start-up of a check the compiled replay runs). A kind already there
    is kept (a test puts a failing one in)."""
    if len(_RUNS) != len(OP_KINDS):
        for name, k in OP_KINDS.items():
            if name not in _RUNS:
                _RUNS[name] = replay_call(k)
    return _RUNS
