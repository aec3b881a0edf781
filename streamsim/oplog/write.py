"""Write any trace as an op log: the host-side program of each (rank, host thread), one line an action.

A host action that enqueued a stream op becomes a line of the stream op's kind with what is needed
to re-simulate it (stream, buffer refs, exact duration, peer, group, handle, ...). Lines follow
the trace's issue order (``trace.issue_keys``: a model's threads round-robin by program position),
so the file is deterministic, each thread keeps its program order, and the log's line order, which
is the issue order the analysis of a log follows, is the one the trace was analysed in. Re-simulating
the log reproduces the trace's ops, timings and hence findings (tests/oplog/test_oplog.py checks
it on models and on random logs; test_dump_roundtrip.py on every repo model, metrics and root
causes included; test_dump_recorded.py a recorded log). Where the format is narrower than the
API, the writer says the same thing another way:

* a model's ``host.buffer`` is an ``alloc`` line on its thread, before the next action the thread
  issued (its size, allocation stream, ``label`` and ``site``: the model line that made it), and
  every line of a model carries the ``site`` of the model line that issued it, so that a replay's
  buffer lives, memory and root causes (grouped by sites) are the model's; a log's own lines are
  written with the ``site``, ``t``, ``alloc`` fields and a ``query``'s observed ``result`` they gave;
  a trace built by hand gets an ``alloc`` line for each life of a freed buffer (sized by its ops);
* a gloo ``wait`` is written without ``blocking`` (gloo blocks the host whatever it says);
* a handle name the log's newest-wins rule would bind to the wrong op becomes ``name~k``;
* a wait on an Event the model never recorded gets a fresh event name (events are per rank in a log,
  per host thread in the API), so that it stays a no-op;
* ``event.query()`` becomes ``sync_event`` when it returned True (same edge, no wait) and a
  zero-length ``host`` action when it returned False (no edge).

A ``per_pair`` group's isend/irecv lines say so (``"p2p_streams": "per_pair"``, see
:mod:`.schema`); the ops of a ``batch_isend_irecv`` carry its ``batch`` id (the engine issues a
batch's sends first, and so does the log). The cost model the run used (the launch overhead, each
group's backend, ranks, latency, bandwidth, eager threshold and blocking wait) is written first,
as version-2 declarations. What cannot be written at all is a ``#`` comment: a host
action whose stream op never started (the run stalled first) left no stream op to describe.

One module because every line is written from shared state (handle names, buffer lives, event
names) that the passes over the entries build for one another.
"""
from __future__ import annotations

import io
import json
import math
import os
from bisect import bisect_left
from math import gcd
from typing import Any, TextIO

from ..kinds import COMM_KINDS, ENQUEUED_KINDS, OP_KINDS, TIMED_KINDS
from ..strided import Strided
from ..trace import HOST, READ, Access, Agent, Alloc, Op, Trace, View, issue_keys, waited_on
from .schema import DEFAULT_SIZE

_SUB_ALLOC_BEFORE, _SUB_LINE, _SUB_ALLOC_AFTER = -1, 0, 1
_LINE_STREAM = {k.name: k.line_stream for k in OP_KINDS.values()}  # what a line's stream names


def dump_oplog(trace: Trace, out: str | os.PathLike | TextIO) -> int:
    """Write ``trace`` as an op log to a path or text file; return the number of op lines."""
    text, count = _Writer(trace).render()
    if isinstance(out, (str, os.PathLike)):
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        out.write(text)
    return count


def oplog_text(trace: Trace) -> str:
    """The op log of ``trace`` as a string."""
    buf = io.StringIO()
    dump_oplog(trace, buf)
    return buf.getvalue()


def _exact_dur(start: float, end: float) -> float:
    """A duration ``d`` with ``start + d == end`` in floating point, so a replay ends where this did."""
    d = end - start
    for _ in range(8):
        t = start + d
        if t == end:
            return d
        d = math.nextafter(d, math.inf if t < end else -math.inf)
    return end - start


class _ThreadOf:
    """Stands for the host action an entry belongs to, for an allocation of a thread that issued
    nothing else (entries are ``(sort key, host op, line)``: only its ``agent`` is read)."""

    __slots__ = ("agent",)
    line = None

    def __init__(self, a: Alloc):
        self.agent = Agent(a.rank, HOST, a.host)


class _Writer:
    def __init__(self, trace: Trace):
        self.trace = trace
        self.enqueued: dict[int, Op] = {op.issuer: op for op in trace.ops if op.issuer is not None}
        self.size: dict[tuple[int, str], int] = {}
        for op in trace.ops:
            for a in op.accesses:
                k = (a.view.rank, a.view.buffer)
                if a.view.end > self.size.get(k, 0):
                    self.size[k] = a.view.end
        self.handle_name: dict[int, str] = {}  # op id -> handle name in the log
        self.alloc_size: dict[tuple[int, str], int] = {}  # buffers in an alloc'd life -> size
        self.sized: set[tuple[int, str]] = set()  # implicit buffers whose size a ref has stated
        self.batch_ids: dict[Any, int] = {}  # a batch_isend_irecv's id in the trace -> in the log
        self.by_handle: dict[tuple[int, str], list[tuple[tuple[float, int], Op]]] | None = None

    # -- building entries -------------------------------------------------------------------------
    def render(self) -> tuple[str, int]:
        entries = []  # (sort key, host op, dict or comment string)
        keys = issue_keys(self.trace)
        for h in self.trace.ops:
            if h.agent.kind == HOST:
                entries.append(((keys[h.id], h.id, _SUB_LINE), h, self.line(h)))
        if not self.trace.allocations and not any(h.line is not None for _, h, _ in entries):
            entries += self.synthetic_allocs(entries)  # (a trace built by hand)
        entries += self.model_allocs(entries, keys)
        entries.sort(key=lambda e: e[0])
        self.name_handles(entries)
        self.name_events(entries)
        out = [f"# streamsim op log (version 2) of {self.trace.source or 'a simulated trace'}"]
        out += self.declarations()
        lives = self.ref_lives(entries)
        count = 0
        alloced: set[tuple[int, str]] = set()  # buffers an alloc line was written for
        for _, h, d in entries:
            if isinstance(d, str):
                out.append(f"# {h.agent}: {d}")
                continue
            if not d:  # an alloc replaced by a synthetic one
                continue
            out.append(json.dumps(self.finish(d, lives), separators=(",", ":"), ensure_ascii=False))
            count += 1
            if d["op"] in ("alloc", "free"):
                k = (h.agent.rank, d["buffer"])
                if d["op"] == "alloc":
                    alloced.add(k)
                elif k not in alloced:
                    lost = self.unstated_free(h, k, lives)
                    if lost:
                        out.append(f"# {h.agent}: {lost}")
        return "\n".join(out) + "\n", count

    def unstated_free(self, h: Op, k: tuple[int, str], lives: dict[tuple[int, str], int]) -> str:
        """Why the free issued by ``h`` of buffer ``k``, alive from the start, frees other bytes
        when the log is read again (else ""). A free line says no size: the reader frees the
        largest extent the log's refs name. A run that stalled before some of its lines were
        issued (or whose ops never ran) named extents the dump cannot write: the trace has no
        op of those lines. The dump says so in a comment, as for what else it cannot write."""
        op = self.enqueued.get(h.id)
        if op is None or not op.accesses:
            return ""
        freed = op.accesses[0].view.end
        read = max(lives.get(k, 0), DEFAULT_SIZE)
        if freed == read:
            return ""
        return (f"this free of {k[1]!r} freed {freed} bytes in the run, which no line written "
                f"here states (named by a line the run did not get to): read again, it frees "
                f"{read}")

    def declarations(self) -> list[str]:
        """The cost model the run used (the trace's ``cost_model``), as op log v2 declarations:
        the launch overhead, and each group's backend, ranks and settings, so that a replay of
        the log times every op as the run did (a trace built without an engine has none)."""
        cost = self.trace.meta.get("cost_model")
        if not cost:
            return []
        out = []
        if cost["launch_overhead"]:
            out.append({"op": "config", "launch_overhead": cost["launch_overhead"]})
        for g in cost["groups"]:
            d = {"op": "group", "group": g["name"], "backend": g["backend"], "ranks": g["ranks"],
                 "latency": g["latency"], "bandwidth": g["bandwidth"],
                 "eager_bytes": g["eager_bytes"], "blocking_wait": g["blocking_wait"]}
            if g["backend"] == "nccl":
                d["p2p_streams"] = g["p2p_streams"]
            out.append(d)
        return [json.dumps(d, separators=(",", ":")) for d in out]

    def line(self, h: Op) -> dict[str, Any] | str:
        """The line of host action ``h`` (with raw Accesses in ref fields), or a comment. Its
        fields are its kind's (``OpKind.fields``, ``dur`` for a kind of ``kinds.TIMED_KINDS``),
        each written by its rule (:data:`_FIELD_RULES`), in the rules' order; a field no rule
        writes, as the op's ``attrs`` state it."""
        s = self.enqueued.get(h.id)
        kind = s.kind if s is not None else h.kind
        op = s or h  # the op that carries the details
        if s is None and (kind in ENQUEUED_KINDS or kind == "wait" and "handle" not in h.attrs):
            return f"{kind} {h.name!r} issued here never reached its stream (the run stalled)"
        d: dict[str, Any] = {"op": kind}
        if h.agent.rank:
            d["rank"] = h.agent.rank
        if h.agent.name != "main":
            d["host"] = h.agent.name
        on = _LINE_STREAM.get(kind)
        if on == "own" and s is not None:  # (a wait on the host: no stream op, no stream)
            d["stream"] = s.agent.name
        elif on == "current" and s is not None:  # (a wait on the host: no stream op, no stream)
            d["stream"] = s.attrs.get("current_stream", "compute")
        elif on == "synced":
            d["stream"] = self.synced_stream(h)
        elif on == "named":
            d["stream"] = h.attrs.get("stream", "compute")
        d["name"] = h.name
        if h.step is not None:
            d["step"] = h.step
        rules = _RULES_OF.get(kind)
        if rules is None:
            return f"{kind} {h.name!r}: not an op-log op, left out"
        target = None
        if kind in _NAMES_HANDLE:
            target = self.waited_handle(kind, h, op, d)
            if not isinstance(target, Op):
                return target  # (a comment, or the line an event query becomes)
        for rule in rules:
            rule(self, kind, h, op, d, target)
        return self.origin(h, op, d)

    # -- the field rules: (kind, host action, the op with the details, the line, the op whose
    # handle a wait or query names) -> the field(s) of the line, when the op says them
    def accesses(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        reads = [a for a in op.accesses if a.mode == READ]
        writes = [a for a in op.accesses if a.mode != READ]
        if reads:
            d["reads"] = reads
        if writes:
            d["writes"] = writes

    def event(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        d["event"] = op.attrs["event"]
        if OP_KINDS[kind].category == "wait" and not waited_on(op):
            d["_unrecorded"] = True  # the model's Event was never recorded (name_events)

    def tensor_lists(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        """``tensors``, or ``inputs`` and ``outputs``, as the kind takes them."""
        k = OP_KINDS[kind]
        ins = [a for a in op.accesses if a.mode == READ]
        outs = [a for a in op.accesses if a.mode != READ]
        if "inputs" not in k.fields:  # a send's, a receive's, a reduce's (the root's writes are
            d["tensors"] = ins or outs  # its tensors: the reader derives them)
        elif "tensors" not in k.fields:  # (a rooted list: on the root's line only)
            is_root = op.agent.rank == op.attrs["root"]
            if k.root != "from_root" or is_root:
                d["inputs"] = ins
            if k.root != "to_root" or is_root:
                d["outputs"] = outs
        elif [(a.view, a.window) for a in ins] == [(a.view, a.window) for a in outs]:
            d["tensors"] = outs
        else:
            d["inputs"], d["outputs"] = ins, outs

    def ranks(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if "ranks" in op.attrs:
            d["ranks"] = list(op.attrs["ranks"])

    def group(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        d["group"] = op.attrs["group"]

    def p2p_streams(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if op.agent.name.startswith("nccl:") and op.agent.name != f"nccl:{op.attrs['group']}":
            d["p2p_streams"] = "per_pair"  # (the group's own stream is per_group: the default;
            # a gloo group's tensor ops run on its channels and take no p2p_streams)

    def any_source(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if op.attrs.get("any_source"):
            d["any_source"] = True

    def buffer(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        d["buffer"] = op.attrs.get("buffer") or op.accesses[0].view.buffer

    def handle(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if target is not None:  # a wait's or query's: the op it names
            d["handle"] = target
        elif op.handle is not None:
            d["handle"] = op  # named once every line is known (name_handles)

    def blocking(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if op.attrs.get("blocking") and not target.agent.is_gloo:
            d["blocking"] = True  # (a gloo wait blocks the host whatever it says)

    def inferred(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if "inferred" in h.attrs:
            d["inferred"] = h.attrs["inferred"]

    def result(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if h.attrs.get("observed"):
            d["result"] = bool(h.attrs["result"])  # (what the recorded program saw)

    def nbytes(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if "nbytes" in op.attrs:
            d["nbytes"] = op.attrs["nbytes"]
        elif "buffer" in d:  # (a life whose size the run did not say: the size its refs reach)
            d["nbytes"] = self.size.get((h.agent.rank, d["buffer"]), 1)

    def label(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if op.attrs.get("label"):
            d["label"] = op.attrs["label"]

    def channel(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        d["channel"] = h.attrs["channel"]

    def dur(self, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if kind in COMM_KINDS:  # (a comm op's own duration: its end waits on other ranks too)
            d["dur"] = op.attrs.get("dur", op.end - op.start)
        else:
            d["dur"] = _exact_dur(op.start, op.end)

    @staticmethod
    def origin(h: Op, op: Op, d: dict[str, Any]) -> dict[str, Any]:
        """``d`` with where line ``h`` comes from: its ``site`` (a model's op: the model's
        ``file:line``, by which a model's root causes group; a log's line: the ``site`` it gave)
        and the ``t`` a log's line gave (a model has no recorded clock: its durations say it)."""
        if h.line is None:
            if op.location:
                d["site"] = op.location
            return d
        if "site" in h.attrs:
            d["site"] = h.attrs["site"]
        if "t" in h.attrs:
            d["t"] = h.attrs["t"]
        return d

    def model_allocs(self, entries: list, keys: list[int]) -> list:
        """An ``alloc`` line for each of a model's ``host.buffer`` calls (``Trace.allocations``):
        on its host thread, right before the first host action that thread issued after it (after
        its last, if none), on its allocation stream, with its size, label and the model line
        that made it, so that the log's buffer lives, memory figures and root causes (grouped by
        allocation site) are the model's."""
        if not self.trace.allocations:
            return []
        threads: dict[tuple[int, str], list[Op]] = {}
        for _, h, _ in entries:  # (in id order: each thread's program order)
            threads.setdefault((h.agent.rank, h.agent.name), []).append(h)
        ids = {t: [h.id for h in hs] for t, hs in threads.items()}
        out = []
        for j, a in enumerate(self.trace.allocations):
            hs = threads.get((a.rank, a.host))
            if not hs:  # (a thread that only allocates: its lines first)
                key: tuple = (-1, a.rank, j)
                anchor = None
            else:
                at = bisect_left(ids[(a.rank, a.host)], a.issued)
                if at < len(hs):
                    anchor = hs[at]
                    key = (keys[anchor.id], anchor.id, _SUB_ALLOC_BEFORE, j)
                else:
                    anchor = hs[-1]
                    key = (keys[anchor.id], anchor.id, _SUB_ALLOC_AFTER, j)
            d: dict[str, Any] = {"op": "alloc"}
            if a.rank:
                d["rank"] = a.rank
            if a.host != "main":
                d["host"] = a.host
            d.update(stream=a.stream, buffer=a.buffer, nbytes=a.nbytes, label=a.label or a.buffer)
            if a.site:
                d["site"] = a.site
            out.append((key, anchor or _ThreadOf(a), d))
        return out

    def waited_handle(self, kind: str, h: Op, op: Op, d: dict[str, Any]) -> Op | dict | str:
        """The op whose handle a ``wait`` or ``query`` line names, or what the line is instead: an
        event query becomes ``sync_event`` (True) or ``host``, a handle out of reach a comment."""
        if kind == "query" and "handle" not in h.attrs:  # event.query(): not in the format
            recorded = [self.trace.op(r) for r in waited_on(h)]
            if recorded and "event" in recorded[0].attrs:
                return self.origin(h, op, {**d, "op": "sync_event",
                                           "event": recorded[0].attrs["event"]})
            return self.origin(h, op, {**d, "op": "host", "dur": 0.0})
        target = self.target(h, op)
        if target is None:
            return f"{kind} {h.name!r}: the op of its handle is not in the trace (the run stalled)"
        if target.agent.rank != h.agent.rank:
            return f"{kind} {h.name!r} waits a handle of rank {target.agent.rank}: not expressible"
        return target

    def target(self, h: Op, op: Op) -> Op | None:
        """The op whose handle a wait/query names: its ``after`` edge, the op a query that returned
        False asked about, or (a trace built by hand) the newest op of that name issued before."""
        waited = waited_on(op)
        if waited:
            return self.trace.op(waited[0])
        if "queried" in h.attrs:
            return self.trace.op(h.attrs["queried"])
        if self.by_handle is None:
            self.by_handle = {}
            for o in self.trace.ops:
                if o.handle is not None and o.issuer is not None:
                    issue = self.trace.op(o.issuer)
                    self.by_handle.setdefault((o.agent.rank, o.handle), []).append(
                        ((issue.start, issue.id), o))
        best = None  # the newest op of the rank with that handle issued before h
        for key, o in self.by_handle.get((h.agent.rank, h.attrs.get("handle")), ()):
            if key < (h.start, h.id) and (best is None or key > best[0]):
                best = (key, o)
        return best[1] if best else None

    def synced_stream(self, h: Op) -> str:
        if "stream" in h.attrs:
            return h.attrs["stream"]
        waited = waited_on(h)
        if waited:
            return self.trace.op(waited[0]).agent.name
        suffix = ".synchronize()"
        return h.name[:-len(suffix)] if h.name.endswith(suffix) else "compute"

    def after_free(self, entry: tuple, key: tuple[int, str]) -> bool:
        """The entry's op used (or freed) buffer ``key`` after its free with no new life between
        (the engine marks such ops: ``attrs["after_free"]``)."""
        op = self.enqueued.get(entry[1].id, entry[1])
        return key[1] in op.attrs.get("after_free", ())

    def synthetic_allocs(self, entries: list) -> list:
        """Make every life of a freed buffer explicit, so the replay frees exactly these bytes on
        exactly this stream: an ``alloc`` before the buffer's first use and after each free that is
        followed by more use in a new life, sized to cover its segment (the frees included), on the
        stream of the segment's free. A use or free after a free with no new life (a lifetime bug
        the engine noted) gets no alloc, so that the replay notes it too. The trace's own allocs of
        such buffers are replaced (set to None)."""
        segments: dict[tuple[int, str], list[list]] = {}
        for e in sorted(entries, key=lambda e: e[0]):
            d = e[2]
            if not isinstance(d, dict):
                continue
            rank = e[1].agent.rank
            bufs = {(a.view.rank, a.view.buffer) for a in self.accesses_of(d)}
            if "buffer" in d:
                bufs.add((rank, d["buffer"]))
            for k in bufs:
                segs = segments.setdefault(k, [[]])
                if not segs[-1] and len(segs) > 1 and self.after_free(e, k):
                    segs.pop()  # used (or freed) again with no new life: the freed life goes on
                segs[-1].append(e)
                if d["op"] == "free" and k == (rank, d["buffer"]):
                    segs.append([])
        out = []
        for (rank, buf), segs in segments.items():
            if len(segs) == 1:  # never freed: implicit sizing by refs is exact
                continue
            stream = "compute"
            for seg in segs:
                live = [e for e in seg if e[2]["op"] != "alloc"]
                for e in seg:
                    if e[2]["op"] == "alloc":
                        e[2].clear()  # replaced by the synthetic alloc of its segment
                if not live:
                    continue
                size = max((a.view.end for e in live for a in self.accesses_of(e[2])
                            if (a.view.rank, a.view.buffer) == (rank, buf)), default=0)
                frees = [self.enqueued[e[1].id] for e in live
                         if e[2]["op"] == "free" and e[2]["buffer"] == buf]
                if frees:
                    stream = frees[-1].agent.name
                    size = max([size] + [f.accesses[0].view.end for f in frees if f.accesses])
                first = live[0]
                d = {"op": "alloc"}
                if rank:
                    d["rank"] = rank
                if first[1].agent.name != "main":
                    d["host"] = first[1].agent.name
                d.update(stream=stream, buffer=buf, nbytes=size)
                out.append((first[0][:2] + (_SUB_ALLOC_BEFORE,), first[1], d))
        return out

    def name_handles(self, entries: list) -> None:
        """Handle names per rank: the original name, unless the log's newest-wins rule would bind
        some wait/query to another op of the same name; then a unique ``name~k``."""
        latest: dict[tuple[int, str], int] = {}
        clash: set[int] = set()
        used: dict[int, set[str]] = {}
        for _, h, d in entries:
            if not isinstance(d, dict) or "handle" not in d:
                continue
            op: Op = d["handle"]
            key = (h.agent.rank, op.handle)
            if d["op"] in ("wait", "query"):
                if latest.get(key) != op.id:
                    clash.add(op.id)
            else:
                latest[key] = op.id
                used.setdefault(h.agent.rank, set()).add(op.handle)
        for _, h, d in entries:
            if isinstance(d, dict) and "handle" in d and d["op"] not in ("wait", "query"):
                op = d["handle"]
                name = op.handle
                if op.id in clash:
                    names = used[h.agent.rank]
                    k = 2
                    while f"{name}~{k}" in names:
                        k += 1
                    name = f"{name}~{k}"
                    names.add(name)
                self.handle_name[op.id] = name

    @staticmethod
    def name_events(entries: list) -> None:
        """A wait on an Event the run never recorded must stay a no-op in the replay, where events
        are named per rank: it takes a fresh name if a record of its name on its rank is at an
        earlier line (which the replay's wait would see) or was issued before it in the run
        (which the line order between threads would otherwise hold back behind it: a model's
        other Event of that name). Else it keeps its name, and with it that line order
        (oplog/issueorder.py, keyed by the event's name): a record of another thread that the
        run held until the wait was done (an op log's line order) is held so again, where a
        fresh name would have let it run before the wait."""
        records: dict[tuple[int, str], list[tuple[int, int]]] = {}  # -> (entry, issue) each
        names: dict[int, set[str]] = {}
        for i, (_, h, d) in enumerate(entries):
            if isinstance(d, dict) and "event" in d:
                names.setdefault(h.agent.rank, set()).add(d["event"])
                if d["op"] == "record":
                    records.setdefault((h.agent.rank, d["event"]), []).append(
                        (i, _issued(h)))
        for i, (_, h, d) in enumerate(entries):
            if not isinstance(d, dict) or "event" not in d:
                continue
            key = (h.agent.rank, d["event"])
            if d.pop("_unrecorded", False) and any(
                    j < i or seq < _issued(h) for j, seq in records.get(key, ())):
                taken, k = names[h.agent.rank], 1
                while f"{d['event']}~unrecorded{k}" in taken:
                    k += 1
                d["event"] = f"{d['event']}~unrecorded{k}"
                taken.add(d["event"])

    # -- buffer refs ----------------------------------------------------------------------------------
    def ref_lives(self, entries: list) -> dict[tuple[int, str], int]:
        """Size a plain buffer name stands for in the replay, for buffers alive from the start."""
        implicit: dict[tuple[int, str], int] = {}
        explicit: set[tuple[int, str]] = set()
        for _, h, d in entries:
            if not isinstance(d, dict) or not d:
                continue
            if d["op"] == "alloc":
                explicit.add((h.agent.rank, d["buffer"]))
            for a in self.accesses_of(d):
                k = (a.view.rank, a.view.buffer)
                if k not in explicit and a.view.end > implicit.get(k, 0):
                    implicit[k] = a.view.end
        return implicit

    @staticmethod
    def accesses_of(d: dict[str, Any]) -> list[Access]:
        return [a for k in ("reads", "writes", "tensors", "inputs", "outputs") for a in d.get(k, ())]

    def finish(self, d: dict[str, Any], implicit: dict[tuple[int, str], int]) -> dict[str, Any]:
        """Turn Views into refs (a plain name when the replay reads it as the same bytes)."""
        out = {}
        for k, v in d.items():
            if k == "stream" and v == "compute" or k == "name" and v == d["op"] or k[0] == "_":
                continue  # the defaults, and the writer's own marks
            if k == "handle":
                out[k] = self.handle_name[v.id]
            elif k == "batch":  # (numbered in line order: the engine's ids are op ids, which
                # the alloc lines a replay adds would shift; a fixed point must not move them)
                out[k] = self.batch_ids.setdefault(v, len(self.batch_ids))
            elif k in ("reads", "writes", "tensors", "inputs", "outputs"):
                out[k] = [self.ref(a, implicit) for a in v]
            else:
                out[k] = v
        if d["op"] == "alloc":
            self.alloc_size[(d.get("rank", 0), d["buffer"])] = d["nbytes"]
        return out

    def ref(self, a: Access, implicit: dict[tuple[int, str], int]) -> str | dict[str, Any]:
        """A plain name when the replay reads the name as exactly these bytes: the buffer's alloc'd
        size, or its implicit size once an explicit ref has stated it (the first whole ref does)."""
        v: View = a.view
        k = (v.rank, v.buffer)
        size = self.alloc_size.get(k)
        stated = size is not None or k in self.sized
        if size is None:
            size = implicit.get(k)
        if v.offset == 0 and v.nbytes == size and size and v.pattern is None:
            if stated and a.window == (0.0, 1.0):
                return v.buffer
            self.sized.add(k)
        r: dict[str, Any] = {"buffer": v.buffer}
        if v.offset:
            r["offset"] = v.offset
        if v.pattern is not None:
            r.update(strided_fields(v.pattern))
        else:
            r["nbytes"] = v.nbytes
        if a.window != (0.0, 1.0):
            r["window"] = [a.window[0], a.window[1]]
        return r


def _given(field: str):
    """The rule of a field the op states in its ``attrs`` when it has one (a ``root``, ...)."""
    def rule(self: _Writer, kind: str, h: Op, op: Op, d: dict, target: Op | None) -> None:
        if field in op.attrs:
            d[field] = op.attrs[field]
    return rule


# (fields a rule writes, the rule), in the order a line gives its fields
_FIELD_RULES: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("reads", "writes"), _Writer.accesses), (("event",), _Writer.event),
    (("tensors", "inputs", "outputs"), _Writer.tensor_lists), (("root",), _given("root")),
    (("ranks",), _Writer.ranks), (("peer",), _given("peer")), (("group",), _Writer.group),
    (("p2p_streams",), _Writer.p2p_streams), (("batch",), _given("batch")),
    (("any_source",), _Writer.any_source), (("buffer",), _Writer.buffer),
    (("handle",), _Writer.handle), (("blocking",), _Writer.blocking),
    (("inferred",), _Writer.inferred), (("result",), _Writer.result), (("nbytes",), _Writer.nbytes),
    (("label",), _Writer.label), (("channel",), _Writer.channel), (("dur",), _Writer.dur),
)
WRITTEN_FIELDS = frozenset(f for fields, _ in _FIELD_RULES for f in fields)


def _rules(k) -> tuple:
    """The rules of kind ``k``'s fields (its OpKind.fields, and dur when the line's dur is used),
    in order; a field no rule writes is written as the op's ``attrs`` state it (before dur)."""
    fields = {*k.fields, *(("dur",) if k.name in TIMED_KINDS else ())}
    rules = [rule for names, rule in _FIELD_RULES[:-1] if set(names) & fields]
    rules += [_given(f) for f in k.fields if f not in WRITTEN_FIELDS]
    return (*rules, *((_Writer.dur,) if "dur" in fields else ()))


_RULES_OF = {k.name: _rules(k) for k in OP_KINDS.values()}  # op kind -> its field rules
_NAMES_HANDLE = frozenset(k.name for k in OP_KINDS.values() if "handle" in k.required)

def strided_fields(pat: Strided) -> dict[str, Any]:
    """A strided ref's ``sizes``, ``strides`` and ``itemsize`` for ``pat``: its blocks as items of
    ``run`` bytes when every stride is a multiple of it, else as ``run / g`` items of the greatest
    common divisor ``g`` of the run and the strides (the reader folds them back into one block)."""
    g = gcd(pat.run, *(s for _, s in pat.dims))
    sizes = [n for n, _ in pat.dims]
    strides = [s // g for _, s in pat.dims]
    if g == pat.run:
        return {"sizes": sizes, "strides": strides, "itemsize": g}
    return {"sizes": sizes + [pat.run // g], "strides": strides + [1], "itemsize": g}


def _issued(h: Op) -> float:
    """Where host action ``h`` started in the run's sequence; infinity where it never did (a
    stalled run's)."""
    return float("inf") if h.start_seq is None else h.start_seq
