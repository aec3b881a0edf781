"""Line order is issue order between the host threads of one rank (docs/semantics.md, "Issue order").

A recorded log is what happened: when line 5 of thread ``t2`` waits on event ``E`` and line 3 of
thread ``t1`` recorded it, the wait saw that record, however much host time the two threads spent
before them in a replay. So a line takes effect no earlier than every earlier line of its rank,
on another thread, that touches the same piece of shared state. The state a line touches is named
by keys: each op kind declares the state its line touches (``OpKind.touches``, the names of
``streamsim.kinds.STATES``), and :func:`touches` turns each name into the keys it stands for:

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

from typing import Callable, Iterable, Iterator, Sequence

from ..kinds import OP_KINDS, READS, WRITES
from .read import Line

Key = tuple  # (rank, kind letter, name)

# STATES name -> the keys of a line's rank it stands for: f(line, r, gloo_handle, drained,
# recorded), where the arguments are those of touches()
_KEYS: dict[str, Callable[..., Iterable[Key]]] = {
    "queued stream": lambda ln, r, g, d, rec: () if ln.blocking or g else ((r, "s", ln.stream),),
    "streams": lambda ln, r, g, d, rec: ((r, "n", ""),),
    "drained": lambda ln, r, g, d, rec: d,
    "issued handle": lambda ln, r, g, d, rec: ((r, "h", ln.lineno),),
    "handle": lambda ln, r, g, d, rec: ((r, "h", ln.target),),
    "refs": lambda ln, r, g, d, rec: [(r, "b", ref.view.buffer) for ref in (*ln.reads, *ln.writes)],
    "new life": lambda ln, r, g, d, rec: (),  # (its effect: issue_gates forgets `recorded`)
    "recorded": lambda ln, r, g, d, rec: [(r, "s", s) for s in rec],  # (read by a free)
}
# the states named by one field of the line: STATES name -> its key letter; "NAME:FIELD" is the
# state of that kind another field of the line names (kinds.STATES)
NAMED_BY_FIELD = {"stream": "s", "event": "e", "group": "g", "buffer": "b", "channel": "c"}


def key_maker(state: str) -> Callable[..., Iterable[Key]]:
    """The keys a STATES name (or ``NAME:FIELD``) stands for; KeyError for an unknown one."""
    if state in _KEYS:
        return _KEYS[state]
    name, _, field = state.partition(":")
    letter, field = NAMED_BY_FIELD[name], field or name
    return lambda ln, r, g, d, rec: ((r, letter, getattr(ln, field)),)


# op kind -> its (key maker, writes) pairs, and what the kind does to the rank's set of streams and
# to a buffer's recorded streams (issue_gates)
_RULES = {k.name: tuple((key_maker(state), mode == WRITES) for state, mode in k.touches)
          for k in OP_KINDS.values()}
_OPENS = frozenset(k.name for k in OP_KINDS.values()  # its stream (an NCCL op: its group) may
                   if {"stream", "queued stream"} & {s for s, _ in k.touches})  # be a new one
_NAMES_STREAM = _OPENS | {k.name for k in OP_KINDS.values()  # adds its stream to the rank's set
                          if ("streams", WRITES) in k.touches}  # (a device sync opens none)
_OPENS_GROUP = frozenset(k for k in _OPENS if ("group", WRITES) in OP_KINDS[k].touches)
_DRAINS = frozenset(k.name for k in OP_KINDS.values() if ("drained", READS) in k.touches)
_RECORDS = frozenset(k.name for k in OP_KINDS.values() if ("recorded", WRITES) in k.touches)
_ENDS_RECORDS = frozenset(k.name for k in OP_KINDS.values()
                          if ("recorded", READS) in k.touches or ("new life", WRITES) in k.touches)


def touches(ln: Line, gloo_handle: bool, drained: Iterable[Key],
            recorded: Iterable[str], new_stream: bool = False) -> Iterator[tuple[Key, bool]]:
    """(key, writes) for each piece of shared state line ``ln`` touches (its kind's
    ``OpKind.touches``). ``gloo_handle``: the handle a ``wait`` names is a gloo Work (its wait
    enqueues nothing); ``drained``: the keys of the streams and NCCL groups of the rank that
    earlier lines named (what ``sync_device`` drains); ``recorded``: the streams
    ``record_stream`` named for the buffer a ``free`` frees, since its life began;
    ``new_stream``: ``ln`` is the first line of the rank to name its stream or NCCL group."""
    r = ln.rank
    if new_stream:  # (roles swapped, see above: first uses need no order among themselves)
        yield (r, "n", ""), False
    for keys, writes in _RULES[ln.op]:
        for key in keys(ln, r, gloo_handle, drained, recorded):
            yield key, writes


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
        op = ln.op
        if op in _NAMES_STREAM:
            for key in ((ln.rank, "s", ln.stream),) + \
                    (((ln.rank, "g", ln.group),) if op in _OPENS_GROUP else ()):
                if key not in seen:
                    new = new or op in _OPENS
                    seen[key] = None
        bkey = (ln.rank, ln.buffer)
        target = by_line.get(ln.target) if ln.target is not None else None
        rec = recorded.pop(bkey, ()) if op in _ENDS_RECORDS else ()
        if op in _RECORDS:
            recorded.setdefault(bkey, []).append(ln.stream)
        deps: dict[str, int] = {}
        for key, writes in touches(ln, target is not None and target.group in gloo,
                                   tuple(seen) if op in _DRAINS else (), rec, new):
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
