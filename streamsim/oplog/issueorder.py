"""Line order is issue order between the host threads of one rank (docs/semantics.md, "Issue order").

A recorded log is what happened: when line 5 of thread ``t2`` waits on event ``E`` and line 3 of
thread ``t1`` recorded it, the wait saw that record, however much host time the two threads spent
before them in a replay. So a line takes effect no earlier than every earlier line of its rank,
on another thread, that touches the same piece of shared state. The state a line touches is named
by keys (this module's one table, :func:`touches`):

- a stream (``"s"``): what is enqueued on it and in what order (kernels, event records and waits,
  a non-blocking NCCL ``wait``, a ``free`` on its allocation stream), and what reads its position
  (``sync_stream``, ``sync_device``, an NCCL op's enqueue edge from the current stream, a ``free``
  after ``record_stream``);
- an event (``"e"``): its records, and the waits and syncs that read them;
- a process group (``"g"``): its p2p matching counters and comm-stream order;
- a handle (``"h"``, by issuing line): its issue, and the waits and queries that read it;
- a buffer's life (``"b"``): ``alloc``, ``free`` and ``record_stream`` change it, every use reads it;
- a hand-off channel (``"c"``): its puts and gets (the k-th get takes the k-th put, in line
  order);
- the rank's set of streams (``"n"``): the first line that names a stream or an NCCL group (its
  comm streams) adds to it, ``sync_device`` reads it (it drains the streams earlier lines used,
  not one that a later line of another thread opens while it waits). Here the rule's roles are
  swapped, the first uses being its "readers": a first use follows the last device sync, a
  device sync every first use since, and first uses are not ordered among themselves.

Each key is a readers/writer rule in line order: a reading line follows the key's last writing
line; a writing line follows that and every reading line since. Only lines of *other* threads
gate a line (a thread's own lines are in program order anyway), and of each thread only its
latest such line (the earlier ones came before it). A rank with one host thread has no gates, so
single-threaded logs replay exactly as they always did.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from .read import Line
from .schema import GLOO_OPS, NCCL_OPS

Key = tuple  # (rank, kind letter, name)


def touches(ln: Line, gloo_handle: bool, drained: Iterable[Key],
            recorded: Iterable[str], new_stream: bool = False) -> Iterator[tuple[Key, bool]]:
    """(key, writes) for each piece of shared state line ``ln`` touches. ``gloo_handle``: the
    handle a ``wait`` names is a gloo Work (its wait enqueues nothing); ``drained``: the keys of
    the streams and NCCL groups of the rank that earlier lines named (what ``sync_device``
    drains); ``recorded``: the streams ``record_stream`` named for the buffer a ``free`` frees,
    since its life began; ``new_stream``: ``ln`` is the first line of the rank to name its stream
    or NCCL group."""
    r, op = ln.rank, ln.op
    if new_stream:  # (roles swapped, see below: first uses need no order among themselves)
        yield (r, "n", ""), False
    if op in ("launch", "host"):
        if op == "launch":
            yield (r, "s", ln.stream), True
        for ref in (*ln.reads, *ln.writes):
            yield (r, "b", ref.view.buffer), False
    elif op in ("record", "wait_event", "sync_event"):
        yield (r, "e", ln.event), op == "record"
        if op != "sync_event":
            yield (r, "s", ln.stream), True
    elif op == "sync_stream":
        yield (r, "s", ln.stream), False
    elif op == "sync_device":
        yield (r, "n", ""), True
        for key in drained:
            yield key, False
    elif op in NCCL_OPS or op in GLOO_OPS:
        yield (r, "g", ln.group), True
        yield (r, "h", ln.lineno), True
        if op in NCCL_OPS:
            yield (r, "s", ln.stream), False  # the enqueue edge from the current stream
            for ref in (*ln.reads, *ln.writes):
                yield (r, "b", ref.view.buffer), False
    elif op in ("wait", "query"):
        yield (r, "h", ln.target), False
        if op == "wait" and not ln.blocking and not gloo_handle:
            yield (r, "s", ln.stream), True  # the current stream waits: an op enqueued on it
    elif op == "alloc":
        yield (r, "b", ln.buffer), True
    elif op == "free":
        yield (r, "b", ln.buffer), True
        yield (r, "s", ln.stream), True  # a write on the allocation stream
        for s in recorded:
            yield (r, "s", s), False  # the allocator's event captures that stream's position
    elif op == "record_stream":
        yield (r, "b", ln.buffer), True
    elif op in ("put", "get"):
        yield (r, "c", ln.channel), True
    else:
        raise AssertionError(f"op {op!r} has no issue-order rule")  # (schema.FIELDS lists it)


def issue_gates(lines: Sequence[Line], threads: Iterable[tuple[int, str]],
                gloo_groups: Iterable[str]) -> dict[int, tuple[int, ...]]:
    """Line number -> the lines of other threads of its rank that must take effect first (only
    for lines that have any). Linear in the lines (a key keeps one reader per thread)."""
    per_rank: dict[int, int] = {}
    for rank, _ in threads:
        per_rank[rank] = per_rank.get(rank, 0) + 1
    gloo = frozenset(gloo_groups)
    by_line = {ln.lineno: ln for ln in lines if ln.handle is not None}
    last_writer: dict[Key, tuple[str, int]] = {}
    readers: dict[Key, dict[str, int]] = {}
    streams: dict[int, dict[Key, None]] = {}  # rank -> the streams, NCCL groups earlier lines named
    recorded: dict[tuple[int, str], list[str]] = {}  # (rank, buffer) -> record_stream streams
    gates: dict[int, tuple[int, ...]] = {}
    for ln in lines:
        if per_rank.get(ln.rank, 1) < 2:
            continue
        seen = streams.setdefault(ln.rank, {})
        new = False
        if ln.op not in ("host", "sync_event", "query", "alloc", "record_stream", "put", "get") \
                and ln.op not in GLOO_OPS:
            for key in ((ln.rank, "s", ln.stream),) + \
                    (((ln.rank, "g", ln.group),) if ln.op in NCCL_OPS else ()):
                if key not in seen:
                    new = new or ln.op != "sync_device"  # (a device sync opens no stream)
                    seen[key] = None
        bkey = (ln.rank, ln.buffer)
        target = by_line.get(ln.target) if ln.target is not None else None
        rec = recorded.pop(bkey, ()) if ln.op in ("free", "alloc") else ()
        if ln.op == "record_stream":
            recorded.setdefault(bkey, []).append(ln.stream)
        deps: dict[str, int] = {}
        for key, writes in touches(ln, target is not None and target.group in gloo,
                                   tuple(seen) if ln.op == "sync_device" else (), rec, new):
            w = last_writer.get(key)
            if w is not None and w[0] != ln.host:
                deps[w[0]] = max(deps.get(w[0], 0), w[1])
            if writes:
                for host, lineno in readers.pop(key, {}).items():
                    if host != ln.host:
                        deps[host] = max(deps.get(host, 0), lineno)
                last_writer[key] = (ln.host, ln.lineno)
            else:
                readers.setdefault(key, {})[ln.host] = ln.lineno
        if deps:
            gates[ln.lineno] = tuple(sorted(deps.values()))
    return gates
