"""An op log with the proposed fixes written in: the lines to add, so that a user can diff them.

Each fix (``analysis.findings.Fix``, found in the trace the log was replayed into) becomes lines of
the log's own format, inserted where the engine would inject it (``sim.inject``): a ``wait`` on the
first access's handle, an event ``record`` after the line that issued the first access with a
``wait_event`` or ``sync_event`` before the second, a ``record_stream`` before a free, or a
``put`` after the first access's line with a ``get`` before the second's (a hand-off); each
carries the ``step`` of the line it goes before (after, for a ``record``), when that line has one.
A comment line says what each group fixes. Every other line is kept byte for byte, except that a line whose
handle a ``wait`` must name but which has none gets one (``"handle": "fix-L<line>"``), and that a
later ``wait`` of a gloo send's handle that a fix now waits becomes a comment (``# streamsim fix
N: moved before line L: ...``): a second ``wait()`` on a gloo ``isend``'s handle hangs, so the fix
moves the program's wait rather than adding one.
"""
from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import Any, Sequence

from ..kinds import OP_KINDS
from ..trace import Trace

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def fixed_oplog_text(text: str, trace: Trace, fixes: Sequence) -> str:
    """``text``, the op log ``trace`` was replayed from, with a group of lines for each fix."""
    lines = _LINE.findall(text)  # the reader's lines (only \n, \r\n, \r end one), with their ends
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    parsed: dict[int, dict] = {}  # 1-based line -> its JSON object (op lines only)
    events: set[tuple[int, str]] = set()
    binds: dict[tuple[int, str], list[int]] = {}  # (rank, handle) -> lines that bind the name
    for i, raw in enumerate(lines, 1):
        s = raw.lstrip("\ufeff").strip() if i == 1 else raw.strip()  # (a BOM, as the reader)
        if s and not s.startswith("#"):
            obj = json.loads(s)
            parsed[i] = obj
            if "event" in obj:
                events.add((obj.get("rank", 0), obj["event"]))
            if "channel" in obj:
                events.add((obj.get("rank", 0), obj["channel"]))  # (fresh names avoid both)
            if "handle" in obj and obj["op"] not in ("wait", "query"):
                binds.setdefault((obj.get("rank", 0), obj["handle"]), []).append(i)
    before: dict[int, list[str]] = {}  # line -> lines to insert before it
    after: dict[int, list[str]] = {}  # line -> lines to insert after it
    renamed: dict[int, str] = {}  # line -> the handle given to it
    moved: dict[int, str] = {}  # line -> the comment it becomes (a gloo send's wait moved earlier)
    n_event = 0

    def fresh_event(rank: int) -> str:
        nonlocal n_event
        while True:
            n_event += 1
            name = f"fix{n_event}"
            if (rank, name) not in events:
                events.add((rank, name))
                return name

    def where(op_id: int) -> dict[str, Any]:
        """Rank, host thread and step of the line a new line goes beside (a sync belongs to the
        step of the line it guards or follows)."""
        op = trace.op(op_id)
        d: dict[str, Any] = {"rank": op.agent.rank}
        if op.agent.name != "main":
            d["host"] = op.agent.name
        if op.step is not None:
            d["step"] = op.step
        return d

    for n, fix in enumerate(fixes, 1):
        b = trace.op(fix.before)
        if b.line is None:
            raise ValueError(f"fix {n} names {b.describe()}, which no line of the log issued")
        head = f"# streamsim fix {n}: {fix.text}\n"
        at = where(fix.before)
        if fix.kind == "wait_handle":
            x = trace.op(fix.handle_op)
            handle = _handle_of(parsed, binds, renamed, x.line, b.line, x.agent.rank)
            if handle is not None:
                d = {"op": "wait", **at}
                if fix.wait_stream is not None:
                    d["stream"] = fix.wait_stream.name
                elif not x.agent.is_gloo:
                    d["blocking"] = True
                d["handle"] = handle
                before.setdefault(b.line, []).extend([head, _dump(d)])
                if x.agent.is_gloo and OP_KINDS[x.kind].direction == "send":
                    for w in _later_waits(parsed, binds, handle, x.line, b.line, x.agent.rank):
                        moved.setdefault(w, f"# streamsim fix {n}: moved before line {b.line}: "
                                            f"{lines[w - 1].strip()}\n")
                continue
            # the handle's name is rebound before the wait: an event on its stream says the same
            ev = fresh_event(at["rank"])
            after.setdefault(x.line, []).extend([head, _dump({"op": "record", **where(x.issuer),
                                                              "stream": x.agent.name,
                                                              "event": ev})])
            waiter = ({"op": "wait_event", **at, "stream": fix.wait_stream.name, "event": ev}
                      if fix.wait_stream is not None else {"op": "sync_event", **at, "event": ev})
            before.setdefault(b.line, []).append(_dump(waiter))
        elif fix.kind in ("event", "event_sync"):
            r = trace.op(fix.record_after)
            ev = fresh_event(at["rank"])
            after.setdefault(r.line, []).extend([head, _dump({"op": "record", **where(r.id),
                                                              "stream": fix.event_stream.name,
                                                              "event": ev})])
            waiter = ({"op": "wait_event", **at, "stream": fix.wait_stream.name, "event": ev}
                      if fix.kind == "event" else {"op": "sync_event", **at, "event": ev})
            before.setdefault(b.line, []).append(_dump(waiter))
        elif fix.kind == "handoff":
            r = trace.op(fix.record_after)
            channel = fresh_event(at["rank"])
            after.setdefault(r.line, []).extend([head, _dump({"op": "put", **where(r.id),
                                                              "channel": channel})])
            before.setdefault(b.line, []).append(_dump({"op": "get", **at, "channel": channel}))
        elif fix.kind == "record_stream":
            buffer = parsed[b.line].get("buffer")
            before.setdefault(b.line, []).extend(
                [head, _dump({"op": "record_stream", **at, "stream": fix.event_stream.name,
                              "buffer": buffer})])
        else:
            raise ValueError(f"cannot write a fix of kind {fix.kind!r} as op-log lines")
    out = []
    for i, raw in enumerate(lines, 1):
        out += before.get(i, ())
        out.append(moved[i] if i in moved else
                   _dump({**parsed[i], "handle": renamed[i]}) if i in renamed else raw)
        out += after.get(i, ())
    return "".join(out)


def _handle_of(parsed: dict[int, dict], binds: dict[tuple[int, str], list[int]],
               renamed: dict[int, str], line: int, wait_line: int, rank: int) -> str | None:
    """The handle name a ``wait`` before ``wait_line`` can use for the op of ``line``: its own (given
    one if it has none), or None when another line of the rank binds that name in between."""
    name = parsed[line].get("handle") or renamed.get(line)
    if name is None:
        name = f"fix-L{line}"
        while (rank, name) in binds:
            name += "'"
        renamed[line] = name
        binds[(rank, name)] = [line]
        return name
    at = binds.get((rank, name), [line])
    nxt = bisect_right(at, line)
    return name if nxt == len(at) or at[nxt] >= wait_line else None


def _later_waits(parsed: dict[int, dict], binds: dict[tuple[int, str], list[int]], name: str,
                 line: int, after: int, rank: int) -> list[int]:
    """The ``wait`` lines of ``rank`` after line ``after`` that wait the op of ``line`` by its
    handle ``name`` (before another line binds that name again)."""
    at = binds.get((rank, name), [line])
    nxt = bisect_right(at, line)
    end = at[nxt] if nxt < len(at) else float("inf")
    return [i for i, obj in parsed.items() if after < i < end and obj["op"] == "wait"
            and obj.get("rank", 0) == rank and obj.get("handle") == name]


def _dump(d: dict) -> str:
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False) + "\n"
