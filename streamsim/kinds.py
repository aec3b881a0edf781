"""The vocabulary: every op kind, edge kind, fix kind and stream role, declared once.

Pure data, importing nothing of streamsim's: the stages (the engine, the op-log reader, writer and
replay, the HB graph, the timeline, the fixes) derive their tables from these, so that a new op
kind is declared here with everything a stage needs to know about it, and
``tests/test_kinds.py`` fails until every stage (and docs/oplog.md's op table) handles it.

An :class:`OpKind` says:

* ``runs``: where the op runs. ``"host"``: a host action only (host work, a sync, a query, a
  blocking gloo send or receive, ``alloc``, ``record_stream``); ``"stream"``: a host action
  enqueues it on a stream (a kernel, an event record or wait, a ``free`` on the allocation
  stream); ``"comm"``: a host action enqueues it on a process group's comm stream or channel;
  ``"host or stream"``: ``wait``, on the current stream for a non-blocking NCCL wait, else on the
  host;
* ``fields`` and ``required``: its op-log fields beyond the ones every line may give
  (:data:`COMMON_FIELDS`), and those of them a line must give (docs/oplog.md, "Ops");
* ``wait_edge``: the kind of the HB edges it waits on (``Op.after``; :data:`BY_AGENT`:
  ``host_sync`` on a host thread, ``event`` on a stream) and ``join_edge``: the kind of its
  ``Op.joins`` edges (messages and collectives);
* ``category``: its colour in a timeline (:data:`BY_AGENT`: ``host`` on a host thread, ``compute``
  on a stream, as a kernel's host action and the kernel are drawn);
* ``comm``: its class of communication (``"p2p"``, ``"collective"``, or None), ``backend``
  (``"nccl"``, ``"gloo"``, None) and ``direction`` (``"send"``, ``"recv"``, None);
* ``root``: a rooted collective's data flow: ``"to_root"`` (``reduce``, ``gather``: every rank
  reads its input, only the root writes; the root's completion follows every rank's start),
  ``"from_root"`` (``scatter``: only the root reads, every rank writes; each rank's completion
  follows the root's start), None (every rank's completion follows every rank's start);
* ``line_stream``: what the ``stream`` field of its op-log line names: ``"own"`` the stream the
  op runs on, ``"current"`` the stream current when it was issued (NCCL ops, and ``wait``: a
  non-blocking NCCL wait runs there), ``"synced"`` the stream a ``sync_stream`` drains,
  ``"named"`` a stream the op names (``record_stream``, ``alloc``), ``"allocation"`` the buffer's
  allocation stream (``free``), None nothing. A ``"current"`` line is replayed with its stream
  current (``with torch.cuda.stream(s):``);
* ``replay``: the modelling-API call that replays its op-log line, in the API's words:
  ``host.launch(name, reads=reads, writes=writes, dur=dur, stream=stream)`` calls
  ``Host.launch`` with the line's fields (``oplog/replay.py`` reads it). The receiver is ``host``
  (the line's host thread), ``group`` (its process group) or ``work`` (the Work of the handle the
  line names); an argument is a field of the line (``event``: the rank's Event of that name),
  or ``life``: the life of the buffer the line names (a ``Buffer`` of its size). The Work a kind of :data:`HANDLE_KINDS`
  returns is the line's handle, for the waits and queries that name it. A call that passes
  ``dur`` says that the line's duration is used (:data:`TIMED_KINDS`: the op-log writer writes
  it);
* ``touches``: the shared state of its rank a line reads or changes, each a (:data:`STATES` name,
  :data:`READS` or :data:`WRITES`) pair, in order: the issue order between host threads of one
  rank (``oplog/issueorder.py``) follows it.
"""
from __future__ import annotations

from dataclasses import dataclass

# -- stream roles ---------------------------------------------------------------------------------
HOST_ROLE = "host"  # a host thread
STREAM_ROLE = "stream"  # a CUDA stream of the model's (compute, copy, ...)
NCCL_ROLE = "nccl"  # a process group's NCCL comm stream: nccl:<group>, nccl:<group>:<lo>-<hi>
GLOO_ROLE = "gloo"  # a gloo group's channel: gloo:<group>
ROLE_PREFIXES = {NCCL_ROLE: "nccl:", GLOO_ROLE: "gloo:"}  # a stream's role from its name
COMM_ROLES = frozenset(ROLE_PREFIXES)


def stream_role(name: str) -> str:
    """The role of the stream named ``name``: :data:`NCCL_ROLE`, :data:`GLOO_ROLE` or
    :data:`STREAM_ROLE` (the one place a role is read from a name)."""
    if name.startswith("nccl:"):
        return NCCL_ROLE
    if name.startswith("gloo:"):
        return GLOO_ROLE
    return STREAM_ROLE


# -- edge kinds -----------------------------------------------------------------------------------
# kind -> what it means in a report's explanation ("why" chains); the first ten are the trace's
# happens-before edges (docs/semantics.md, "What orders what"), the last two are drawn only.
EDGE_TEXT: dict[str, str] = {
    "program": "program order",
    "enqueue": "enqueue: the host issued it",
    "event": "event wait",
    "message": "message: send → matching receive",
    "handle": "handle wait",
    "host_sync": "host sync",
    "nccl_enqueue": "NCCL enqueue: the comm stream waits on the current stream",
    "collective": "collective",
    "query": "is_completed() observed True",
    "record_stream": "record_stream",
    "handoff": "hand-off: a put before its get (a queue, a thread join)",
    "waits_for": "waits for",
    "missing": "missing",
}
EDGE_KINDS = ("program", "enqueue", "event", "message", "handle", "host_sync", "nccl_enqueue",
              "collective", "query", "record_stream")  # the HB graph's edges
EDGE_KINDS += ("handoff",)  # (issue 25: a put before its get, between host threads)
DRAWN_EDGE_KINDS = ("waits_for", "missing")  # a deadlock's wait-for edge; a fix's missing edge
# Every HB edge kind in a few words, in EDGE_KINDS' order: what a report says nothing else orders
# ("no chain of happens-before edges (program order, enqueue, ...) joins the two").
HB_EDGE_WORDS = tuple(EDGE_TEXT[k].split(":")[0] for k in EDGE_KINDS)

# -- fix kinds (docs/semantics.md, "Fixes") -------------------------------------------------------
FIX_KINDS: dict[str, str] = {
    "wait_handle": "work.wait() on the first op's handle before the second is issued",
    "event": "an event recorded after the first, waited on by the second's stream",
    "event_sync": "an event recorded after the first, synchronized by the host before the second",
    "record_stream": "record_stream(the user's stream) before the free",
    "handoff": "a put after the first, on its thread, and a get of it before the second, on the "
               "other thread of the rank (a queue hand-off)",
}

# (exploration strategies are behaviour, not data: an interface with a module each and their
# registry, in streamsim/pipeline/strategies/; the CLI's --strategy choices derive from it)

# -- shared state (oplog/issueorder: line order between the host threads of a rank) -------------
READS, WRITES = "reads", "writes"
# What a line may touch, each per rank (docs/semantics.md, "Line order"). A state named by a
# field of the line (stream, event, group, buffer, channel) may be named by another field:
# "stream:FIELD" is the stream the line's FIELD names.
STATES: dict[str, str] = {
    "stream": "the line's stream: what is enqueued on it, in order, and its position",
    "queued stream": "the line's stream, when the op is enqueued there (a non-blocking NCCL wait)",
    "streams": "the rank's set of streams (sync_device drains those earlier lines named)",
    "drained": "each stream and NCCL group that earlier lines of the rank named",
    "event": "the event the line names: its records",
    "group": "the line's process group: its matching counters and comm-stream order",
    "issued handle": "the handle the line issues",
    "handle": "the handle the line names (waits and queries read it)",
    "refs": "the life of each buffer the line's refs name",
    "buffer": "the life of the buffer the line names",
    "new life": "the buffer's new life: forgets the streams recorded in its old one",
    "recorded": "the streams record_stream named for the buffer since its life began (written: "
                "the line's stream joins them; read: a free waits for their work, and ends them)",
    "channel": "the hand-off channel the line names",
}

# -- op kinds -------------------------------------------------------------------------------------
BY_AGENT = "agent"  # a wait_edge or category that depends on where the op runs (see the docstring)


@dataclass(frozen=True)
class OpKind:
    """One op kind and what every stage needs to know of it (see the module docstring). The
    fields a stage must not forget have no default: a new kind says each of them."""

    name: str
    runs: str
    fields: tuple[str, ...]
    required: tuple[str, ...]
    wait_edge: str  # an EDGE_KINDS name, or BY_AGENT: host_sync on a host thread, event on a stream
    category: str  # a CATEGORIES name, or BY_AGENT: host on a host thread, compute on a stream
    replay: str  # the modelling-API call that replays its line (see the module docstring)
    touches: tuple[tuple[str, str], ...]  # (STATES name, READS or WRITES), in order
    join_edge: str | None = None
    comm: str | None = None
    backend: str | None = None
    direction: str | None = None
    line_stream: str | None = None
    root: str | None = None  # "to_root", "from_root" or None (see the module docstring)


COMMON_FIELDS = ("op", "rank", "host", "stream", "name", "dur", "step", "site", "t")
_P2P_FIELDS = ("tensors", "peer", "group", "handle", "nbytes", "p2p_streams", "batch")
_COLLECTIVE_FIELDS = ("tensors", "inputs", "outputs", "group", "ranks", "handle", "nbytes")
_EVENT, _BUFFER, _HANDLE = ("event",), ("buffer",), ("handle",)
_CHANNEL = ("channel",)


_NCCL_TOUCHES = (("group", WRITES), ("issued handle", WRITES),
                 ("stream", READS),  # (the enqueue edge from the current stream)
                 ("refs", READS))
_GLOO_TOUCHES = (("group", WRITES), ("issued handle", WRITES))
_COLLECTIVE_CALL = ("group.collective(op, reads, writes, nbytes=nbytes, dur=dur, name=name, "
                    "handle=handle, root=root)")


def _collective(name: str, fields: tuple[str, ...] = _COLLECTIVE_FIELDS,
                required: tuple[str, ...] = (), root: str | None = None) -> OpKind:
    return OpKind(name, "comm", fields, required, "nccl_enqueue", "collective",
                  replay=_COLLECTIVE_CALL, touches=_NCCL_TOUCHES, join_edge="collective",
                  comm="collective", backend="nccl", line_stream="current", root=root)


_ROOTED = ("root", "group", "ranks", "handle", "nbytes")


def _p2p(name: str, fields: tuple[str, ...], runs: str, comm: str | None, backend: str,
         direction: str, replay: str, line_stream: str | None = None) -> OpKind:
    return OpKind(name, runs, fields, ("tensors", "peer") if "tensors" in fields else ("peer",),
                  "nccl_enqueue", "p2p", replay=replay,
                  touches=_NCCL_TOUCHES if backend == "nccl" else _GLOO_TOUCHES,
                  join_edge="message", comm=comm, backend=backend, direction=direction,
                  line_stream=line_stream)


_OBJECT_FIELDS = ("peer", "group", "nbytes")

# In the op log's order (its "unknown op" message lists them so).
OP_KINDS: dict[str, OpKind] = {k.name: k for k in (
    OpKind("launch", "stream", ("reads", "writes"), (), BY_AGENT, BY_AGENT,
           replay="host.launch(name, reads=reads, writes=writes, dur=dur, stream=stream)",
           touches=(("stream", WRITES), ("refs", READS)), line_stream="own"),
    OpKind("host", "host", ("reads", "writes"), (), BY_AGENT, BY_AGENT,
           replay="host.host_work(name, reads=reads, writes=writes, dur=dur)",
           touches=(("refs", READS),)),
    OpKind("record", "stream", _EVENT, _EVENT, BY_AGENT, "event", replay="host.record(event, stream)",
           touches=(("event", WRITES), ("stream", WRITES)), line_stream="own"),
    OpKind("wait_event", "stream", _EVENT, _EVENT, "event", "wait",
           replay="host.wait_event(event, stream)",
           touches=(("event", READS), ("stream", WRITES)), line_stream="own"),
    OpKind("sync_event", "host", _EVENT, _EVENT, "host_sync", "wait",
           replay="host.sync_event(event)", touches=(("event", READS),)),
    OpKind("sync_stream", "host", (), (), "host_sync", "wait", replay="host.sync_stream(stream)",
           touches=(("stream", READS),), line_stream="synced"),
    OpKind("sync_device", "host", (), (), "host_sync", "wait", replay="host.synchronize()",
           touches=(("streams", WRITES), ("drained", READS))),
    _p2p("isend", _P2P_FIELDS, "comm", "p2p", "nccl", "send",
         "group.isend(reads, peer, nbytes=nbytes, dur=dur, name=name, handle=handle)", "current"),
    _p2p("irecv", (*_P2P_FIELDS, "any_source"), "comm", "p2p", "nccl", "recv",
         "group.irecv(writes, peer, nbytes=nbytes, name=name, handle=handle)", "current"),
    *(_collective(k) for k in ("all_gather", "all_reduce", "all_to_all", "broadcast",
                                "reduce_scatter")),
    _collective("barrier", ("group", "ranks", "handle")),  # no tensor: it orders the ranks
    _collective("reduce", ("tensors", *_ROOTED), ("tensors", "root"), "to_root"),
    _collective("gather", ("inputs", "outputs", *_ROOTED), ("inputs", "root"), "to_root"),
    _collective("scatter", ("inputs", "outputs", *_ROOTED), ("outputs", "root"), "from_root"),
    _p2p("send_object", _OBJECT_FIELDS, "host", None, "gloo", "send",  # blocking: no comm stream
         "group.send_object(nbytes, peer, name=name, dur=dur)"),
    _p2p("recv_object", _OBJECT_FIELDS, "host", None, "gloo", "recv",
         "group.recv_object(peer, name=name)"),
    _p2p("isend_object", ("peer", "group", "handle", "nbytes"), "comm", "p2p", "gloo", "send",
         "group.isend_object(nbytes, peer, name=name, handle=handle, dur=dur)"),
    OpKind("wait", "host or stream", ("handle", "blocking", "inferred"), _HANDLE, "handle", "wait",
           replay="work.wait(blocking=blocking)",
           touches=(("handle", READS), ("queued stream", WRITES)), line_stream="current"),
    OpKind("query", "host", ("handle", "result"), _HANDLE, "query", "wait",
           replay="work.is_completed(observed=result)", touches=(("handle", READS),)),
    OpKind("alloc", "host", ("buffer", "nbytes", "label"), _BUFFER, BY_AGENT, "memory",
           replay="host.alloc(buffer, nbytes, stream=stream, label=label, name=name)",
           touches=(("buffer", WRITES), ("new life", WRITES)), line_stream="named"),
    OpKind("free", "stream", _BUFFER, _BUFFER, "record_stream", "memory",
           replay="host.free(life)",
           touches=(("buffer", WRITES),
                    ("stream", WRITES),  # a write on the allocation stream
                    ("recorded", READS)),  # the allocator's event captures their positions
           line_stream="allocation"),
    OpKind("record_stream", "host", _BUFFER, _BUFFER, "record_stream", "memory",
           replay="host.record_stream(life, stream)",
           touches=(("buffer", WRITES), ("recorded", WRITES)), line_stream="named"),
    # a hand-off between host threads of one rank (queue.put / queue.get, a thread's end and its
    # join): the k-th get of a channel waits for its k-th put
    OpKind("put", "host", _CHANNEL, _CHANNEL, BY_AGENT, BY_AGENT,
           replay="host.put(channel, name=name)", touches=(("channel", WRITES),)),
    OpKind("get", "host", _CHANNEL, _CHANNEL, "handoff", "wait",
           replay="host.get(channel, name=name)", touches=(("channel", WRITES),)),
)}


def kinds_where(**attrs: object) -> frozenset[str]:
    """The names of the op kinds whose attributes equal ``attrs`` (``kinds_where(comm="p2p")``)."""
    return frozenset(k.name for k in OP_KINDS.values()
                     if all(getattr(k, a) == v for a, v in attrs.items()))


COLLECTIVE_KINDS = kinds_where(comm="collective")
NCCL_KINDS = kinds_where(backend="nccl")  # issued through an NCCL group
GLOO_KINDS = kinds_where(backend="gloo")
COMM_KINDS = NCCL_KINDS | GLOO_KINDS  # every communication op
ENQUEUED_KINDS = kinds_where(runs="stream") | kinds_where(runs="comm")  # a host action enqueues it
ROOTED_KINDS = frozenset(k.name for k in OP_KINDS.values() if k.root is not None)
HANDLE_KINDS = frozenset(k.name for k in OP_KINDS.values() if "handle" in k.fields
                         and k.backend is not None)  # may return a Work handle
TIMED_KINDS = frozenset(k.name for k in OP_KINDS.values()  # a line's dur is their duration
                        if "dur=dur" in k.replay)

# timeline category -> (colour, legend text)
CATEGORIES: dict[str, tuple[str, str]] = {
    "compute": ("#4c8fd6", "kernel (forward, copy, …)"),
    "p2p": ("#9b59b6", "send / recv"),
    "collective": ("#d35fa0", "collective"),
    "wait": ("#f0b429", "wait / sync / query"),
    "host": ("#9e9e9e", "host action"),
    "memory": ("#6b8e23", "alloc / free / record_stream"),
    "event": ("#6fc2b4", "event record"),
}


# -- the kind of an HB edge into an op (the trace's after/joins edges carry none of their own) --
_WAIT_EDGE = {k.name: k.wait_edge for k in OP_KINDS.values() if k.wait_edge != BY_AGENT}
_JOIN_EDGE = {k.name: k.join_edge for k in OP_KINDS.values()}


def after_kind(target_kind: str, target_on_host: bool) -> str:
    """The kind of an ``after`` edge, named from the op that waits (its kind's ``wait_edge``; one
    that depends on where it runs, or a hand-built trace's own kind: a host sync on a host
    thread, an event wait on a stream). The HB graph, the reports' "why" chains and the
    Perfetto flows name edges by it."""
    return _WAIT_EDGE.get(target_kind) or ("host_sync" if target_on_host else "event")


def join_kind(target_kind: str) -> str:
    """The kind of a ``joins`` edge into an op of ``target_kind``: ``collective`` or ``message``."""
    return _JOIN_EDGE.get(target_kind) or "message"
