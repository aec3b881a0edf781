"""The reader's fast path: the common lines of a large op log decoded and type-checked in C.

Kernels, host work, event records and waits and syncs, with buffers named by string, the
allocations and frees of buffers, point-to-point sends and receives, the collectives (rooted or
not) and barriers, handle waits and queries (each with the ``site`` and ``t`` a recorder gives
every line) are most of a recorded log. msgspec decodes such a line straight into a typed record
(``Struct``), checking field names, types and ranges as :class:`~streamsim.oplog.read._Parser`
does, in one C call, where the checker builds a dict through a Python hook and tests each field
in Python. A line it accepts
gives the checker's spec, with the same effects on the parser's state (its host thread, its buffer
refs through the checker's own ``ref``, strided ones too). Anything else (another op, an escape,
a field of the wrong type or out of range, a key given twice, bad JSON, a ref object the
checker's ``ref`` would refuse) returns None and the checker reads the line: so every error
message is the checker's, byte for byte.

A key given twice is the one thing msgspec lets through (it keeps the last). It is caught by
counting quotes: without escapes, a line's quotes are two per key and two per string value, so a
line with a repeated key has more quotes than its decoded record accounts for.

One module because its typed records and the checks that turn each into the checker's spec are
one contract with the checker (``read._Parser``), field for field, which the compiled reader
(streamsim/native/_decode.pyx) follows function by function: split, each half would name every
field of the other.
"""
# (No ``from __future__ import annotations`` here: msgspec reads each Struct field's annotation
# when the decoder is made, and given as strings each was evaluated anew, 270 compiles: ~8 ms of
# every check of a log long enough to read through this module.)
from functools import lru_cache
from typing import Annotated, Any, Union

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..strided import extent
from .schema import (ANY_SOURCE_NAME, BUFFER_OPS, COLLECTIVE_OPS, DEFAULT_GROUP, EVENT_OPS,
                     INFERRED_BY, INFERRED_NAME, LIMITS, MAX_BYTES, MAX_DIMS, MAX_DUR, ROOTED_OPS)

_Rank = Union[Annotated[int, Meta(ge=0, le=LIMITS["rank"])], UnsetType]
_Step = Union[Annotated[int, Meta(ge=0, le=LIMITS["step"])], UnsetType]
_Name = Union[Annotated[str, Meta(min_length=1)], UnsetType]
_Dur = Union[Annotated[float, Meta(ge=0, le=MAX_DUR)], UnsetType]


_Extents = Union[Annotated[list[Annotated[int, Meta(ge=0, le=MAX_BYTES)]],
                           Meta(max_length=MAX_DIMS)], UnsetType]


class RefObj(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A ref object, strided or not (``sizes``, ``strides``: the checker's limits on each; the
    rest of a strided ref's checks in :func:`_ref_quotes`); also native/_lex.pxi's."""
    buffer: _Name = UNSET  # required: checked below
    offset: Union[Annotated[int, Meta(ge=0, le=LIMITS["offset"])], UnsetType] = UNSET
    nbytes: Union[Annotated[int, Meta(ge=0, le=LIMITS["nbytes"])], UnsetType] = UNSET
    window: Union[tuple[float, float], UnsetType] = UNSET
    sizes: _Extents = UNSET
    strides: _Extents = UNSET
    itemsize: Union[Annotated[int, Meta(ge=1, le=MAX_BYTES)], UnsetType] = UNSET


_Refs = Union[list[Union[Annotated[str, Meta(min_length=1)], RefObj]], UnsetType]


# gc=False (and on RefObj; inherited): a decoded line lives until its Line is made and holds
# no cycle, so the collector need not track it (200,000 lines decoded, freed: 0.157 -> 0.148 s)
class _Sync(msgspec.Struct, tag_field="op", tag="sync_stream", forbid_unknown_fields=True, gc=False):
    rank: _Rank = UNSET
    host: _Name = UNSET
    stream: _Name = UNSET
    name: Union[str, UnsetType] = UNSET
    dur: _Dur = UNSET
    step: _Step = UNSET
    site: _Name = UNSET  # a recorder's: every recorded line has a site and a t
    t: _Dur = UNSET


class _SyncDevice(_Sync, tag="sync_device"):
    pass


class _Kernel(_Sync, tag="launch"):
    reads: _Refs = UNSET
    writes: _Refs = UNSET


class _HostWork(_Kernel, tag="host"):
    pass


class _Record(_Sync, tag="record"):
    event: Annotated[str, Meta(min_length=1)] = ""  # required: checked below (UNSET-free)


class _WaitEvent(_Record, tag="wait_event"):
    pass


class _SyncEvent(_Record, tag="sync_event"):
    pass


class _Free(_Sync, tag="free"):
    buffer: Annotated[str, Meta(min_length=1)] = ""  # required: checked below


class _RecordStream(_Free, tag="record_stream"):
    pass


class _Alloc(_Free, tag="alloc"):
    nbytes: Union[Annotated[int, Meta(ge=0, le=LIMITS["nbytes"])], UnsetType] = UNSET
    label: _Name = UNSET


class _Wait(_Sync, tag="wait"):
    handle: Annotated[str, Meta(min_length=1)] = ""  # required: checked below
    blocking: Union[bool, UnsetType] = UNSET
    inferred: Union[str, UnsetType] = UNSET  # one of INFERRED_BY: checked below


class _Query(_Sync, tag="query"):
    handle: Annotated[str, Meta(min_length=1)] = ""  # required: checked below
    result: Union[bool, UnsetType] = UNSET


class _Isend(_Sync, tag="isend"):
    tensors: _Refs = UNSET  # required, as peer: checked below
    peer: Union[Annotated[int, Meta(ge=0, le=LIMITS["peer"])], UnsetType] = UNSET
    group: _Name = UNSET
    handle: _Name = UNSET
    nbytes: Union[Annotated[int, Meta(ge=0, le=LIMITS["nbytes"])], UnsetType] = UNSET
    batch: Union[Annotated[int, Meta(ge=0, le=LIMITS["batch"])], UnsetType] = UNSET


class _Irecv(_Isend, tag="irecv"):
    any_source: Union[bool, UnsetType] = UNSET  # a receive whose peer is the source observed


class _AllReduce(_Sync, tag="all_reduce"):  # (and the other collectives without a root)
    tensors: _Refs = UNSET  # in place, or inputs and outputs: checked below
    inputs: _Refs = UNSET
    outputs: _Refs = UNSET
    group: _Name = UNSET
    handle: _Name = UNSET
    nbytes: Union[Annotated[int, Meta(ge=0, le=LIMITS["nbytes"])], UnsetType] = UNSET


class _AllGather(_AllReduce, tag="all_gather"):
    pass


class _ReduceScatter(_AllReduce, tag="reduce_scatter"):
    pass


class _AllToAll(_AllReduce, tag="all_to_all"):
    pass


class _Broadcast(_AllReduce, tag="broadcast"):
    pass


class _Barrier(_Sync, tag="barrier"):  # (no tensor, no root: it orders the ranks)
    group: _Name = UNSET
    handle: _Name = UNSET


_Root = Union[Annotated[int, Meta(ge=0, le=LIMITS["root"])], UnsetType]


class _Reduce(_Sync, tag="reduce"):
    tensors: _Refs = UNSET  # required, as root: checked below
    root: _Root = UNSET
    group: _Name = UNSET
    handle: _Name = UNSET
    nbytes: Union[Annotated[int, Meta(ge=0, le=LIMITS["nbytes"])], UnsetType] = UNSET


class _Gather(_Sync, tag="gather"):
    inputs: _Refs = UNSET  # required, as root; outputs on the root alone: checked below
    outputs: _Refs = UNSET
    root: _Root = UNSET
    group: _Name = UNSET
    handle: _Name = UNSET
    nbytes: Union[Annotated[int, Meta(ge=0, le=LIMITS["nbytes"])], UnsetType] = UNSET


class _Scatter(_Gather, tag="scatter"):  # (outputs required, inputs on the root alone)
    pass


FAST_DECODER = msgspec.json.Decoder(Union[_Sync, _SyncDevice, _Kernel, _HostWork, _Record,
                                          _WaitEvent, _SyncEvent, _Free, _RecordStream, _Alloc,
                                          _Wait, _Isend, _Irecv, _AllReduce, _AllGather,
                                          _ReduceScatter, _AllToAll, _Broadcast, _Query,
                                          _Barrier, _Reduce, _Gather, _Scatter])
__all__ = ["BUFFER_OPS", "COLLECTIVE_OPS", "EVENT_OPS", "FAST_DECODER", "ROOTED_OPS", "RefObj",
           "fast_spec", "ref_object"]


def fast_spec(parser: Any, s: str) -> dict[str, Any] | None:
    """The checker's spec of line ``s`` (stripped), or None when the checker must read it."""
    if "\\" in s:
        return None
    try:
        obj = FAST_DECODER.decode(s)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeError):  # (lone surrogates)
        return None
    op = obj.__struct_config__.tag
    quotes = 4  # "op": "<op>"
    rank, host, stream, name = obj.rank, obj.host, obj.stream, obj.name
    dur, step = obj.dur, obj.step
    if rank is UNSET:
        rank = 0
    else:
        quotes += 2
    if host is UNSET:
        host = "main"
    else:
        quotes += 4
    if stream is UNSET:
        stream = "compute"
    else:
        quotes += 4
    if name is UNSET:
        name = op
    else:
        quotes += 4
    if dur is UNSET:
        dur = 1.0
    else:
        quotes += 2
    if step is UNSET:
        step = None
    else:
        quotes += 2
    spec: dict[str, Any] = {"op": op, "rank": rank, "host": host, "stream": stream, "name": name,
                            "dur": dur, "step": step}
    if op in EVENT_OPS:
        if not obj.event:  # missing (or empty: the checker words either)
            return None
        quotes += 4
        spec["event"] = obj.event
    reads = writes = None
    buffer = target = None
    if op in BUFFER_OPS:
        buffer = obj.buffer
        if not buffer:  # missing (or empty)
            return None
        quotes += 4
        if op == "alloc":
            if obj.nbytes is not UNSET:
                quotes += 2
            if obj.label is not UNSET:
                quotes += 4
                spec["label"] = obj.label
    elif op == "wait" or op == "query":  # (the checker's check_fields: its handle's line)
        handle = obj.handle
        if not handle:
            return None
        target = parser.handles.get((rank, handle))
        if target is None:  # (the checker words it)
            return None
        quotes += 4
        spec["handle"], spec["target"] = handle, target
        if op == "query":  # (what the program observed, when it says)
            if obj.result is not UNSET:
                quotes += 2
                spec["result"] = obj.result
        else:
            blocking = obj.blocking
            if blocking is UNSET:
                blocking = False
            else:
                quotes += 2
            spec["blocking"] = blocking
            inferred = obj.inferred
            if inferred is not UNSET:
                if inferred not in INFERRED_BY:
                    return None
                quotes += 4
                spec["inferred"] = inferred
                if obj.name is UNSET:
                    spec["name"] = INFERRED_NAME
    elif op == "isend" or op == "irecv":  # (without p2p_streams)
        tensors, peer = obj.tensors, obj.peer
        if tensors is UNSET or peer is UNSET:  # (the checker words what is missing)
            return None
        quotes += 4  # ("tensors", "peer": the refs are counted below)
        comm = _comm(parser, obj, op)
        if comm is None:
            return None  # (a group of gloo ops, used by an NCCL op: the checker words it)
        group, g, q = comm
        quotes += q
        batch = obj.batch
        any_source = UNSET if op == "isend" else obj.any_source
        if any_source is not UNSET:  # (a recorder's dist.recv without a source: the peer seen)
            quotes += 2
            if any_source and batch is not UNSET:
                return None  # (a batch names its peers: the checker words it)
            spec["any_source"] = any_source
            if any_source and obj.name is UNSET:
                spec["name"] = ANY_SOURCE_NAME
        if batch is UNSET:
            batch = None
        else:
            quotes += 2
            if g is not None and "cost" in g and g["backend"] == "gloo":
                return None  # (a batch on a group declared gloo: the checker words it)
            if parser.batches.refuses((rank, host), batch, group, stream):
                return None  # (the batch rule: the checker words it)
        if op == "isend":
            reads, writes = tensors, None
        else:
            reads, writes = None, tensors
    elif op in COLLECTIVE_OPS or op in ROOTED_OPS:
        if op in COLLECTIVE_OPS:
            tensors, inputs, outputs = obj.tensors, obj.inputs, obj.outputs
            if tensors is not UNSET:
                if inputs is not UNSET or outputs is not UNSET:
                    return None  # (both ways: the checker words it)
                quotes += 2
                reads = writes = tensors
            elif inputs is not UNSET and outputs is not UNSET:
                quotes += 4
                reads, writes = inputs, outputs
            else:
                return None  # (neither: the checker words it)
        elif op != "barrier":  # (the checker's check_rooted, without a ranks list)
            root = obj.root
            if root is UNSET:
                return None  # (the checker words what is missing)
            quotes += 2
            if op == "reduce":
                if obj.tensors is UNSET:
                    return None
                quotes += 2
                reads = obj.tensors
                writes = reads if rank == root else []
            else:
                inputs, outputs = obj.inputs, obj.outputs
                listed, needed = (outputs, inputs) if op == "gather" else (inputs, outputs)
                if needed is UNSET or (listed is UNSET) == (rank == root):
                    return None  # (missing, or the root's list on another rank: the checker's)
                quotes += 2 * ((inputs is not UNSET) + (outputs is not UNSET))
                reads = [] if inputs is UNSET else inputs
                writes = [] if outputs is UNSET else outputs
        comm = _comm(parser, obj, op)
        if comm is None:
            return None  # (a group of gloo ops, used by an NCCL op: the checker words it)
        group, g, q = comm
        quotes += q
    elif op == "launch" or op == "host":
        reads, writes = obj.reads, obj.writes
        if reads is UNSET:
            reads = ()
        else:
            quotes += 2
        if writes is UNSET:
            writes = ()
        else:
            quotes += 2
    for items in (reads, writes) if reads is not writes else (reads,):
        if items:
            q = _ref_quotes(parser, items, rank)
            if q is None:
                return None
            quotes += q
    site, t = obj.site, obj.t
    if site is not UNSET:
        quotes += 4
        spec["site"] = site
    if t is not UNSET:
        quotes += 2
    if s.count('"') != quotes:  # a key given twice
        return None
    if t is not UNSET:  # (each thread's t in time order: else the checker words it)
        last = parser.last_t.get((rank, host))
        if last is not None and t < last[0]:
            return None
        parser.last_t[(rank, host)] = (t, parser.lineno)
        spec["t"] = t
    parser.ops_seen = True  # (a config declaration after this line is an error)
    parser.threads.setdefault((rank, host), None)
    if buffer is not None:  # (the checker's check_fields: the buffer's life at this line)
        key = (rank, buffer)
        spec["buffer"] = buffer
        if op == "alloc":
            size = None if obj.nbytes is UNSET else obj.nbytes
            spec["nbytes"] = size
            parser.lives[key] = (size, parser.lineno, stream)
            if size is None:
                parser.implicit.setdefault(key, 0)
        else:
            life = parser.lives.get(key)
            if life is None:  # alive from the start
                parser.implicit.setdefault(key, 0)
                size, stream_of = None, "compute"
            else:
                size, _, stream_of = life
            spec["nbytes"] = size  # None: the implicit size, known after pass 1
            if op == "free":
                spec["stream"] = stream_of  # a free goes to the allocation stream
    if op == "isend" or op == "irecv" or op in COLLECTIVE_OPS or op in ROOTED_OPS:  # (the
        # checker's check_comm)
        if g is None:
            g = parser.groups[group] = {"backend": "nccl", "line": parser.lineno, "ranks": set(),
                                        "lists": []}
        g["ranks"].add(rank)
        spec["group"] = group
        nbytes = getattr(obj, "nbytes", UNSET)  # (a barrier has none)
        spec["nbytes"] = None if nbytes is UNSET else nbytes
        if "cost" in g and obj.dur is UNSET:  # a declared group: its cost model times the op
            spec["dur"] = None
        ref = parser.ref
        if op in COLLECTIVE_OPS:
            if reads is writes:  # (in place)
                spec["reads"] = spec["writes"] = [ref(_item(x), "tensors", rank) for x in reads]
            else:
                spec["reads"] = [ref(_item(x), "inputs", rank) for x in reads]
                spec["writes"] = [ref(_item(x), "outputs", rank) for x in writes]
        elif op in ROOTED_OPS:
            if op != "barrier":
                spec["root"] = root
                g["ranks"].add(root)
                if op == "reduce":  # (its tensors read on every rank, written on the root)
                    refs = [ref(_item(x), "tensors", rank) for x in reads]
                    spec["reads"], spec["writes"] = refs, refs if rank == root else []
                else:
                    spec["reads"] = [ref(_item(x), "inputs", rank) for x in reads]
                    spec["writes"] = [ref(_item(x), "outputs", rank) for x in writes]
        else:
            spec["peer"] = peer
            g["ranks"].add(peer)
            if reads is not None:
                spec["reads"] = [ref(_item(x), "tensors", rank) for x in reads]
            else:
                spec["writes"] = [ref(_item(x), "tensors", rank) for x in writes]
            spec["batch"] = batch
        handle = None if obj.handle is UNSET else obj.handle
        spec["handle"] = handle
        if handle is not None:
            parser.handles[(rank, handle)] = parser.lineno
    elif reads is not None:
        ref = parser.ref
        spec["reads"] = [ref(_item(x), "reads", rank) for x in reads]
        spec["writes"] = [ref(_item(x), "writes", rank) for x in writes]
    return spec


def _comm(parser: Any, obj: Any, op: str) -> tuple[str, dict | None, int] | None:
    """A comm op's group (its name, and its entry in the parser's groups if it has one yet) and
    the quotes of its ``group``, ``handle`` and ``nbytes`` fields; None when the group is one of
    gloo ops (not declared gloo, whose tensor ops take gloo's semantics): the checker words it."""
    group, q = obj.group, 0
    if group is UNSET:
        group = DEFAULT_GROUP[op]
    else:
        q += 4
    g = parser.groups.get(group)
    if g is not None and g["backend"] != "nccl" and "cost" not in g:
        return None
    if obj.handle is not UNSET:
        q += 4
    if getattr(obj, "nbytes", UNSET) is not UNSET:  # (a barrier has none)
        q += 2
    return group, g, q


def ref_object(x: RefObj) -> dict[str, Any]:
    """A ref object as the checker's ``ref`` reads it (its JSON object)."""
    d: dict[str, Any] = {"buffer": x.buffer}
    if x.offset is not UNSET:
        d["offset"] = x.offset
    if x.nbytes is not UNSET:
        d["nbytes"] = x.nbytes
    if x.window is not UNSET:
        d["window"] = list(x.window)
    if x.sizes is not UNSET:
        d["sizes"] = x.sizes
    if x.strides is not UNSET:
        d["strides"] = x.strides
    if x.itemsize is not UNSET:
        d["itemsize"] = x.itemsize
    return d


def strided_hull(x: RefObj, offset: int) -> tuple[int, int] | None:
    """``(offset, nbytes)`` of the hull of ref object ``x`` where it is strided and the
    checker's ``strided`` takes it (no ``nbytes``, as many sizes as strides, its last byte below
    2^63; each size and stride and the item size in range: msgspec checked those), else None;
    ``x`` not strided: ``(offset, nbytes)`` as given (``nbytes`` None when not)."""
    if x.sizes is UNSET and x.strides is UNSET and x.itemsize is UNSET:
        return offset, (None if x.nbytes is UNSET else x.nbytes)
    sizes, strides = x.sizes, x.strides
    if x.nbytes is not UNSET or sizes is UNSET or strides is UNSET or len(sizes) != len(strides):
        return None
    reach, nbytes = _shape(tuple(sizes), tuple(strides), 1 if x.itemsize is UNSET else x.itemsize)
    return None if offset + reach > MAX_BYTES else (offset, nbytes)


@lru_cache(maxsize=4096)
def _shape(sizes: tuple[int, ...], strides: tuple[int, ...], item: int) -> tuple[int, int]:
    """A strided shape's reach past its offset (what the checker's ``strided`` bounds: its
    last element's end, a dim of size 0 skipped) and its hull's length (:func:`extent`),
    remembered: a log's strided refs repeat a few shapes."""
    return (item + sum((n - 1) * s * item for n, s in zip(sizes, strides) if n),
            extent(sizes, strides, item)[0])


def _item(x: Any) -> Any:
    return x if x.__class__ is str else ref_object(x)


def _ref_quotes(parser: Any, items: list, rank: int) -> int | None:
    """The quotes of a list of refs (a name: 2; an object: its keys' and name's), or None when a
    ref object would be refused by the checker's ``ref`` (no buffer, a strided ref its
    ``strided`` refuses, a window outside 0 <= start <= end <= 1, a view, a strided ref's hull,
    outside its buffer's stated size): the checker words it."""
    q = 0
    for x in items:
        if x.__class__ is str:
            q += 2
            continue
        buf = x.buffer
        if buf is UNSET:
            return None
        q += 4
        offset = x.offset
        if offset is UNSET:
            offset = 0
        else:
            q += 2
        q += 2 * ((x.nbytes is not UNSET) + (x.sizes is not UNSET) + (x.strides is not UNSET) +
                  (x.itemsize is not UNSET))
        hull = strided_hull(x, offset)
        if hull is None:  # (a strided ref the checker refuses: it words why)
            return None
        offset, nbytes = hull
        if x.window is not UNSET:
            q += 2
            w0, w1 = x.window
            if not 0.0 <= w0 <= w1 <= 1.0:
                return None
        life = parser.lives.get((rank, buf))
        size = life[0] if life else None
        if size is not None and ((offset + nbytes > size) if nbytes is not None else
                                 (offset > size or offset == size > 0)):
            return None
    return q
