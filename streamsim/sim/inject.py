"""Apply proposed fixes to a re-run: insert the named syncs at the program actions they name.

A fix (:class:`streamsim.analysis.findings.Fix`) names host actions of the run it was found in by op
id. :func:`key_fixes` turns it into the same record naming those actions by injection key, (host
thread, kind, model line, n-th action from that line), instead: the same action in a re-run of the
same program, even when a fix changes how often a timing-dependent polling loop runs. Keyed fixes
from several runs can be pooled and injected together; injecting them needs no trace.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from .errors import ModelError
from .handles import Event
from .memory import Buffer
from ..kinds import FIX_KINDS  # (inject_fixes applies each of them)
from ..trace import HOST, Blocked, Trace

if TYPE_CHECKING:  # (annotations only: simpy and the engine are imported where an Engine is
    import simpy   # made; the compiled replay keys its fixes here without one)

    from .engine import Engine

Key = tuple  # (Agent, kind, location, n)
# key_fixes keys only the actions its fixes name when the trace has this many ops a fix or more;
# below, finding the places named costs more than keying every action. Measured (Keying, best of
# 3): vllm_pp's 13,458 fixes in 269,072 ops (20 a fix) 0.21 s restricted against 0.25 s whole; the
# random program's 59,911 fixes in 400,000 ops (6.7 a fix) 0.78 s restricted against 0.68 s.
_FEW_PLACES = 12


def is_keyed(fix) -> bool:
    """Whether ``fix`` names its places by injection key (else by op ids of the run it was found
    in)."""
    return isinstance(fix.before, tuple)


def injection_keys(trace: Trace, only: set[int] | None = None) -> dict[int, Key]:
    """Host op id -> its injection key (the program's own actions: a fix's are not keyed), for
    every host op, or for the ids in ``only`` (the others are then counted only where they share
    a wanted op's kind and location: an op's n counts the actions of its thread, kind and
    location before it, so the rest need not be looked at)."""
    keys, seen = {}, {}
    thread: dict[int, int] = {}  # id(agent) -> its number (equal agents: one number)
    numbers: dict = {}
    if only is not None:
        wanted = [trace.op(i) for i in only]
        lines = {op.location for op in wanted}
        kinds = {op.kind for op in wanted}
    for op in trace.ops:
        if only is not None and (op.location not in lines or op.kind not in kinds):
            continue  # (one string lookup for every other op: no site can count it)
        ag = op.agent
        if ag.kind == HOST and not op.attrs.get("injected"):
            t = thread.get(id(ag))
            if t is None:  # (hashing the Agent dataclass per op was most of the scan)
                t = thread[id(ag)] = numbers.setdefault(ag, len(numbers))
            site = (t, op.kind, op.location)
            n = seen.get(site, 0)
            seen[site] = n + 1
            if only is None or op.id in only:
                keys[op.id] = (ag, op.kind, op.location, n)
    return keys


def key_fixes(trace: Trace, fixes: Iterable, dedupe: bool = True) -> list:
    """The fixes found in ``trace`` keyed for injection (each the same record, its places injection
    keys; a fix already keyed is kept as it is); order kept, duplicates dropped (with ``dedupe``;
    else one keyed fix per fix given). One scan of ``trace``."""
    fixes = list(fixes)

    def host_op(op_id: int) -> int | None:  # the host action that issued op ``op_id`` (or it)
        op = trace.op(op_id)
        return op.id if op.agent.kind == HOST else op.issuer

    # Fixes that name few of the trace's actions: only those actions are keyed; fixes that name
    # a large part of them: every action, which costs less than finding the ones named
    # (_FEW_PLACES). (The errors are raised in the loop below, in order.)
    if _FEW_PLACES * len(fixes) < len(trace.ops):
        named = {host_op(i) for f in fixes if not is_keyed(f)
                 for i in (f.before, f.handle_op, f.record_after) if i is not None}
        keys = injection_keys(trace, named - {None})
    else:
        keys = injection_keys(trace)

    def key(op_id: int | None) -> Key | None:
        if op_id is None:
            return None
        issued_by = host_op(op_id)
        if issued_by is None:
            raise ModelError(f"fix names {trace.op(op_id).describe()}, which no host action "
                             "issued")
        return keys[issued_by]

    out: list = []
    seen: set[tuple] = set()
    freed_by: dict[int | None, object] | None = None  # issuing host op id -> the free it issued
    for fix in fixes:
        if fix.kind not in FIX_KINDS:
            raise ModelError(f"cannot apply a fix of kind {fix.kind!r}")
        if is_keyed(fix):
            kf = fix
        else:
            buffer = None
            if fix.kind == "record_stream":
                if freed_by is None:  # (once: a scan per fix would be quadratic)
                    freed_by = {op.issuer: op for op in trace.ops if op.kind == "free"}
                free = freed_by.get(fix.before)
                if free is None:
                    raise ModelError(f"record_stream fix names {trace.op(fix.before).describe()}, "
                                     "which freed nothing")
                buffer = str(free.attrs.get("buffer"))
            kf = type(fix)(fix.kind, fix.text, key(fix.before), key(fix.handle_op),
                           key(fix.record_after), fix.event_stream, fix.wait_stream, buffer)
        if not dedupe:  # (the record made directly: dataclasses.replace costs 6x as much)
            out.append(kf)
        elif kf.identity not in seen:  # (a set: a list's `in` is quadratic in a long run's fixes)
            seen.add(kf.identity)
            out.append(kf)
    return out


def inject_fixes(engine: Engine, trace: Trace | None, fixes: Sequence) -> None:
    """Register each keyed fix's syncs with ``engine`` before its run starts. A fix that still
    names op ids is keyed first against ``trace``, the run it was found in (the public
    ``simulate(fixes=, base=)``); keyed fixes (fix costing's re-runs) need no trace, and no scan
    of one."""
    if not all(map(is_keyed, fixes)):
        if trace is None:
            raise ModelError("fixes need the trace they were found in (base=...)")
        fixes = key_fixes(trace, fixes)
    engine.keyed = True
    for i, fix in enumerate(fixes):
        pre = engine.injections.setdefault(fix.before, [])
        wait_stream = fix.wait_stream.name if fix.wait_stream is not None else None
        if fix.kind == "wait_handle":
            pre.append(_wait_handle(engine, fix.handle_op, wait_stream,
                                    fix.handle_op[0] != fix.before[0]))
        elif fix.kind in ("event", "event_sync"):
            name = f"fix{i}"
            engine.post_injections.setdefault(fix.record_after, []).append(
                _record(engine, name, fix.event_stream.name))
            pre.append(_wait_event(engine, name, wait_stream if fix.kind == "event" else None,
                                   fix.record_after[0] != fix.before[0]))
        elif fix.kind == "handoff":  # a channel of the fix's own: one put, one get
            channel = f"streamsim fix {i}"
            engine.post_injections.setdefault(fix.record_after, []).append(
                _handoff(engine, "put", channel))
            pre.append(_handoff(engine, "get", channel))
        else:  # record_stream
            pre.append(_record_stream(engine, fix.buffer, fix.event_stream.name))


def _wait_handle(engine: Engine, issue_key: Key, stream: str | None, other_thread: bool):
    """The fix's wait on a handle. When another thread issues the handle, in a replayed op log
    (where every line runs) the wait follows that issue as the log's lines do: it waits, in
    simulated time, until the handle exists. In a model, an action that has not happened may
    never happen (control flow can depend on timing): then there is nothing to wait."""
    def run():
        h = engine.current
        work = _work_of(engine, issue_key)
        if work is None and other_thread and engine.replaying_log:
            ev = engine.work_waiters.setdefault(issue_key, engine.env.event())
            engine.block(h, ev, Blocked(h.agent, None, "the fix's wait waits for its handle to "
                                        "be issued by another thread"))
            work = _work_of(engine, issue_key)
        if work is None:
            return  # that action did not happen in this run: nothing to wait
        prev = h.current_stream
        if stream is not None:
            h.current_stream = stream
        try:  # no stream: the host itself must not go on before the op ends (a host access)
            work.wait(blocking=True if stream is None else None)
        finally:
            h.current_stream = prev
    return run


def _work_of(engine: Engine, issue_key: Key):
    issued = engine.issued_by_key.get(issue_key)
    return engine.works.get(issued[0].id) if issued else None


def _fix_event(engine: Engine, name: str) -> tuple[Event, simpy.Event]:
    """A fix's event, one per rank (its record and its wait may run on two host threads of the
    rank), with the simpy event that fires when it is first recorded."""
    h = engine.current
    key = (h.agent.rank, name)
    got = engine.fix_events.get(key)
    if got is None:
        got = engine.fix_events[key] = (Event(h.api, name), engine.env.event())
    return got


def _record(engine: Engine, name: str, stream: str):
    def run():
        host = engine.current.api
        ev, recorded = _fix_event(engine, name)
        ev.record(host.stream(stream))
        if not recorded.triggered:
            recorded.succeed()
    return run


def _wait_event(engine: Engine, name: str, stream: str | None, other_thread: bool):
    """The fix's wait. When its record is another thread's (issued earlier in the program's
    order, as every reported pair's first access is), the wait follows that record, as the
    program's lines do (docs/semantics.md, issue order): it waits, in simulated time, until the
    record has been issued."""
    def run():
        h = engine.current
        host = h.api
        ev, recorded = _fix_event(engine, name)
        if other_thread and not recorded.triggered:
            engine.block(h, recorded, Blocked(h.agent, None, f"the fix's wait on event {name!r} "
                                              "waits for its record on another thread"))
        if stream is None:
            ev.synchronize()
        else:
            host.stream(stream).wait_event(ev)
    return run


def _handoff(engine: Engine, side: str, channel: str):
    """The fix's put (after the first access, on its thread) or get (before the second, on the
    other thread): the get blocks until the put, as the program's own hand-offs do."""
    def run():
        host = engine.current.api
        if side == "put":
            host.put(channel, name=f"put({channel})")
        else:
            host.get(channel, name=f"get({channel})")
    return run


def _record_stream(engine: Engine, buffer: str, stream: str):
    def run():
        host = engine.current.api
        buf = host._buffers.get(buffer)  # (a model's Buffer; an op log's is known by name alone)
        host.record_stream(buf if buf is not None else Buffer(host.rank, buffer, 0), stream)
    return run
