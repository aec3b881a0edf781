"""Apply proposed fixes to a re-run: insert the named syncs at the program actions they name.

A fix names host actions of the run it was found in by op id; the engine keys injections by
(host thread, n-th program action), which is the same action in a re-run of the same program.
"""
from __future__ import annotations

from typing import Sequence

from .engine import Engine, ModelError
from .trace import Trace


def _key(trace: Trace, op_id: int):
    op = trace.op(op_id)
    if op.agent.kind != "host":
        if op.issuer is None:
            raise ModelError(f"fix names {op.describe()}, which no host action issued")
        op = trace.op(op.issuer)
    return (op.agent, op.index)


def inject_fixes(engine: Engine, trace: Trace, fixes: Sequence) -> None:
    """Register each fix's syncs with ``engine`` (before its run starts)."""
    if trace is None:
        raise ModelError("fixes need the trace they were found in (base=...)")
    engine.keyed = True
    for i, fix in enumerate(fixes):
        before = _key(trace, fix.before)
        pre = engine.injections.setdefault(before, [])
        if fix.kind == "wait_handle":
            issue = _key(trace, fix.handle_op)
            pre.append(_wait_handle(engine, issue, fix.wait_stream.name if fix.wait_stream else None))
        elif fix.kind in ("event", "event_sync"):
            after = _key(trace, fix.record_after)
            name = f"fix{i}"
            engine.post_injections.setdefault(after, []).append(
                _record(engine, name, fix.event_stream.name))
            pre.append(_wait_event(engine, name, fix.wait_stream.name if fix.kind == "event"
                                   else None))
        elif fix.kind == "record_stream":
            buffer = trace.op(fix.second_op if hasattr(fix, "second_op") else fix.before)
            pre.append(_record_stream(engine, buffer.attrs.get("buffer"), fix.event_stream.name))
        else:
            raise ModelError(f"cannot apply a fix of kind {fix.kind!r}")


def _wait_handle(engine: Engine, issue_key, stream: str | None):
    def run():
        h = engine.current
        rec = engine.issued_by_key[issue_key][0]
        work = engine.works[rec.id]
        prev = h.current_stream
        if stream is not None:
            h.current_stream = stream
        try:
            work.wait()
        finally:
            h.current_stream = prev
    return run


def _record(engine: Engine, name: str, stream: str):
    def run():
        host = engine.current.api
        host.event(name).record(host.stream(stream))
    return run


def _wait_event(engine: Engine, name: str, stream: str | None):
    def run():
        host = engine.current.api
        ev = host.event(name)
        if stream is None:
            ev.synchronize()
        else:
            host.stream(stream).wait_event(ev)
    return run


def _record_stream(engine: Engine, buffer: str, stream: str):
    def run():
        host = engine.current.api
        host.record_stream(host._buffers[buffer], stream)
    return run
