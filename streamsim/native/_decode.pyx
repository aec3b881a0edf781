# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The op-log reader's per-line hot path, compiled: :func:`first_pass`, :func:`fast_spec` and
:func:`build`.

The reference is streamsim/oplog/read.py's ``_Parser`` (pass 1, its loop over ``take``; pass 2,
``build`` and ``resolve``: each spec's names interned, its buffer refs resolved to interned views,
its Line made) and streamsim/oplog/fastpath.py (``fast_spec``: a common line decoded and
type-checked by msgspec, then turned into the checker's spec, with the checker's effects on the
parser's state). This file follows them statement for statement, with C types on the locals, and
takes the same decisions: a line the reference's fast path hands to the checker (None) is handed
over here too, so every error message stays the checker's, and a spec built here is the Line the
checker builds, field for field. Two things differ in form only: a buffer ref by name is kept
between the passes as a plain tuple (rank, buffer) instead of a ``_RawRef`` (which :func:`build`
resolves as the reference resolves a ``_RawRef`` of offset 0, no explicit size, window (0, 1), no
pattern), and the Line of a spec that holds only the common fields is made by a positional call.
Tests: tests/native/test_decode.py (the checker's OpLogs and errors, on both fast paths).
"""
from msgspec import UNSET, DecodeError, ValidationError

from streamsim.trace import View

# The reader's own objects, handed over by :func:`bind` (the compiled core sits below the reader
# and imports nothing of it): its Line and Ref classes, DEFAULT_SIZE, the fast path's msgspec
# decoder, the ops whose ``event`` or ``buffer`` it reads, a wait's ``inferred`` values and name,
# each comm op's default group, the collectives it reads, a ref object as the checker's dict,
# the fields whose strings pass 2 interns.
cdef object Line = None
cdef object Ref = None
cdef object DEFAULT_SIZE = None
cdef object _decode = None
cdef object _EVENT_OPS = None
cdef object _BUFFER_OPS = None
cdef object _INFERRED_BY = None
cdef object _INFERRED_NAME = None
cdef object _DEFAULT_GROUP = None
cdef object _COLLECTIVE_OPS = None
cdef object _REF_OBJECT = None
cdef tuple _NAME_FIELDS = ()


def bind(line, ref, default_size, decoder, event_ops, buffer_ops, inferred_by, inferred_name,
         default_group, collective_ops, ref_object, name_fields):
    """Take the reader's objects (streamsim/oplog/read.py calls this once, at import)."""
    global Line, Ref, DEFAULT_SIZE, _decode, _EVENT_OPS, _BUFFER_OPS, _INFERRED_BY, _INFERRED_NAME
    global _DEFAULT_GROUP, _COLLECTIVE_OPS, _REF_OBJECT, _NAME_FIELDS
    Line, Ref, DEFAULT_SIZE, _decode = line, ref, default_size, decoder.decode
    _EVENT_OPS, _BUFFER_OPS, _INFERRED_BY, _INFERRED_NAME = (event_ops, buffer_ops, inferred_by,
                                                             inferred_name)
    _DEFAULT_GROUP, _COLLECTIVE_OPS, _REF_OBJECT = default_group, collective_ops, ref_object
    _NAME_FIELDS = name_fields


cdef tuple _FULL = (0.0, 1.0)
# the keys of a fast path's spec: a spec with no other key makes its Line by a positional call
cdef frozenset _FAST_KEYS = frozenset({"op", "rank", "host", "stream", "name", "dur", "step",
                                       "event", "reads", "writes", "site", "t"})


def first_pass(parser, list chunks, list raw):
    """The reader's pass 1 (streamsim.oplog.read._Parser.parse, its loop over
    ``parser.take``): each line a common one, decoded and taken by :func:`fast_spec` here;
    blank lines skipped; any other line (not UTF-8, a BOM, a comment, a line :func:`fast_spec`
    hands over) taken by ``parser.take``, the reference, which also words every error."""
    cdef Py_ssize_t i, n = len(chunks)
    cdef str text, s
    batches = parser.batches
    cdef dict open_ = batches.open
    take = parser.take
    for i in range(n):
        chunk = chunks[i]
        if type(chunk) is bytes:
            try:
                text = (<bytes>chunk).decode("utf-8")
            except UnicodeDecodeError:
                take(i + 1, chunk, raw)
                continue
        else:
            text = chunk
        s = text.strip()
        if not s:
            continue  # (a blank line)
        if s[0] == "#" or (i == 0 and text.startswith("\ufeff")):
            take(i + 1, chunk, raw)
            continue
        parser.lineno = i + 1  # (a t names its line: the next t of its thread is checked by it)
        spec = fast_spec(parser, s)
        if spec is None:
            take(i + 1, chunk, raw, False)  # (its fast path would refuse it again)
            continue
        if spec.get("batch") is not None:  # (batches.check: fast_spec made sure it passes)
            batches.check(spec, i + 1, AssertionError)
        elif open_:  # (batches.check of a line with no batch: it ends its thread's open batch)
            thread = (spec["rank"], spec["host"])
            batch = open_.get(thread)
            if batch is not None:
                batches.closed.add((*thread, batch[0]))
                open_[thread] = None
        raw.append((i + 1, spec))
    if n:
        parser.lineno = n


def fast_spec(parser, str s):
    """streamsim.oplog.fastpath.fast_spec: the checker's spec of line ``s`` (stripped), or None
    when the checker must read it. String refs are recorded as the reference's ``parser.ref``
    records them (the thread, the buffer's implicit extent) and kept as (rank, buffer) tuples."""
    cdef int quotes
    cdef long rank
    if "\\" in s:
        return None
    try:
        obj = _decode(s)
    except (ValidationError, DecodeError, UnicodeError):  # (lone surrogates)
        return None
    op = obj.__struct_config__.tag
    quotes = 4  # "op": "<op>"
    r, host, stream, name = obj.rank, obj.host, obj.stream, obj.name
    dur, step = obj.dur, obj.step
    if r is UNSET:
        r = 0
    else:
        quotes += 2
    rank = r
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
    spec = {"op": op, "rank": r, "host": host, "stream": stream, "name": name, "dur": dur,
            "step": step}
    if op in _EVENT_OPS:
        if not obj.event:  # missing (or empty: the checker words either)
            return None
        quotes += 4
        spec["event"] = obj.event
    reads = writes = None
    buffer = target = None
    if op in _BUFFER_OPS:
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
    elif op == "wait":
        handle = obj.handle
        if not handle:
            return None
        target = parser.handles.get((r, handle))
        if target is None:  # (the checker words it)
            return None
        quotes += 4
        spec["handle"] = handle
        spec["target"] = target
        blocking = obj.blocking
        if blocking is UNSET:
            blocking = False
        else:
            quotes += 2
        spec["blocking"] = blocking
        inferred = obj.inferred
        if inferred is not UNSET:
            if inferred not in _INFERRED_BY:
                return None
            quotes += 4
            spec["inferred"] = inferred
            if obj.name is UNSET:
                spec["name"] = _INFERRED_NAME
    elif op == "isend" or op == "irecv":  # (without p2p_streams or any_source)
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
        if batch is UNSET:
            batch = None
        else:
            quotes += 2
            if g is not None and "cost" in g and g["backend"] == "gloo":
                return None  # (a batch on a group declared gloo: the checker words it)
            if parser.batches.refuses((r, host), batch, group, stream):
                return None  # (the batch rule: the checker words it)
        if op == "isend":
            reads, writes = tensors, None
        else:
            reads, writes = None, tensors
    elif op in _COLLECTIVE_OPS:
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
    for items in ((reads, writes) if reads is not writes else (reads,)):
        if items:
            q = _ref_quotes(parser, items, r)
            if q < 0:
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
        last = parser.last_t.get((r, host))
        if last is not None and t < last[0]:
            return None
        parser.last_t[(r, host)] = (t, parser.lineno)
        spec["t"] = t
    parser.ops_seen = True  # (a config declaration after this line is an error)
    parser.threads.setdefault((r, host), None)
    if buffer is not None:  # (the checker's check_fields: the buffer's life at this line)
        key = (r, buffer)
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
    if op == "isend" or op == "irecv" or op in _COLLECTIVE_OPS:  # (the checker's check_comm)
        if g is None:
            g = parser.groups[group] = {"backend": "nccl", "line": parser.lineno, "ranks": set(),
                                        "lists": []}
        ranks = g["ranks"]
        ranks.add(r)
        spec["group"] = group
        spec["nbytes"] = None if obj.nbytes is UNSET else obj.nbytes
        if "cost" in g and obj.dur is UNSET:  # a declared group: its cost model times the op
            spec["dur"] = None
        if op in _COLLECTIVE_OPS:
            if reads is writes:  # (in place)
                spec["reads"] = spec["writes"] = _refs(parser, reads, r, rank) if reads else []
            else:
                spec["reads"] = _refs(parser, reads, r, rank) if reads else []
                spec["writes"] = _refs(parser, writes, r, rank) if writes else []
        else:
            spec["peer"] = peer
            ranks.add(peer)
            if reads is not None:
                spec["reads"] = _refs(parser, reads, r, rank) if reads else []
            else:
                spec["writes"] = _refs(parser, writes, r, rank) if writes else []
            spec["batch"] = batch
        handle = None if obj.handle is UNSET else obj.handle
        spec["handle"] = handle
        if handle is not None:
            parser.handles[(r, handle)] = parser.lineno
    elif reads is not None:
        spec["reads"] = _refs(parser, reads, r, rank) if reads else []
        spec["writes"] = _refs(parser, writes, r, rank) if writes else []
    return spec


cdef tuple _comm(parser, obj, op):
    """fastpath._comm: a comm op's group, its entry in the parser's groups (or None) and the
    quotes of its group, handle and nbytes fields; None when the group is one of gloo ops."""
    cdef long q = 0
    group = obj.group
    if group is UNSET:
        group = _DEFAULT_GROUP[op]
    else:
        q += 4
    g = parser.groups.get(group)
    if g is not None and g["backend"] != "nccl" and "cost" not in g:
        return None
    if obj.handle is not UNSET:
        q += 4
    if obj.nbytes is not UNSET:
        q += 2
    return group, g, q


cdef long _ref_quotes(parser, list items, r):
    """fastpath._ref_quotes: the quotes of a list of refs, or -1 when a ref object would be
    refused by the checker's ``ref`` (which then words it)."""
    cdef long q = 0
    for x in items:
        if type(x) is str:
            q += 2
            continue
        buf = x.buffer
        if buf is UNSET:
            return -1
        q += 4
        offset, nbytes = x.offset, x.nbytes
        if offset is UNSET:
            offset = 0
        else:
            q += 2
        if nbytes is UNSET:
            nbytes = None
        else:
            q += 2
        if x.window is not UNSET:
            q += 2
            w0, w1 = x.window
            if not 0.0 <= w0 <= w1 <= 1.0:
                return -1
        life = parser.lives.get((r, buf))
        size = life[0] if life else None
        if size is not None and ((offset + nbytes > size) if nbytes is not None else
                                 (offset > size or offset == size > 0)):
            return -1
    return q


cdef list _refs(parser, names, r, long rank):
    """``[parser.ref(x, key, rank) for x in names]``: string refs (offset 0, no size: never an
    error) as (rank, buffer) tuples: a buffer of the current life with a size keeps it (resolved
    in pass 2), one without raises its implicit extent to at least 1; a ref object (checked by
    :func:`_ref_quotes`) by the reference's ``ref``, a ``_RawRef``."""
    cdef dict lives = parser.lives
    cdef dict implicit = parser.implicit
    cdef list out = []
    for buf in names:
        if type(buf) is not str:
            out.append(parser.ref(_REF_OBJECT(buf), "", rank))
            continue
        k = (r, buf)
        life = lives.get(k)
        if life is None or life[0] is None:
            if implicit.get(k, 0) < 1:
                implicit[k] = 1
            out.append(k)
        else:  # (an explicit life: the reference's _RawRef, with its size)
            out.append(parser.ref(buf, "", rank))
    return out


def build(parser, long lineno, dict spec):
    """streamsim.oplog.read._Parser.build: the Line of pass 1's ``spec``."""
    cdef dict strings = parser.strings
    for k in _NAME_FIELDS:
        v = spec.get(k)
        if type(v) is str:
            spec[k] = strings.setdefault(v, v)
    reads = spec.get("reads")
    if reads is not None:
        spec["reads"] = _resolve(parser, reads)
    writes = spec.get("writes")
    if writes is not None:
        spec["writes"] = _resolve(parser, writes)
    op = spec["op"]
    if op in _BUFFER_OPS and spec["nbytes"] is None:
        spec["nbytes"] = max(parser.implicit.get((spec["rank"], spec["buffer"]), 0), DEFAULT_SIZE)
    location = f"{parser.path}:{lineno}"
    if spec.keys() <= _FAST_KEYS:
        return Line(lineno, op, location, spec["rank"], spec["host"], spec["stream"],
                    spec["name"], spec["dur"], spec["step"], spec.get("reads", ()),
                    spec.get("writes", ()), spec.get("event"), site=spec.get("site"),
                    t=spec.get("t"))
    return Line(lineno=lineno, location=location, **spec)


cdef tuple _resolve(parser, list refs):
    """_Parser.resolve: each ref as an interned Ref (equal refs: one object)."""
    cdef dict interned = parser.interned
    cdef dict implicit = parser.implicit
    cdef list out = []
    cdef object size, n
    for r in refs:
        if type(r) is tuple:  # a string ref of an implicit life (see fast_spec)
            rank, buf = r
            size = implicit.get(r, 0)
            if size < DEFAULT_SIZE:
                size = DEFAULT_SIZE
            key = (rank, buf, 0, size, _FULL, None)
            ref = interned.get(key)
            if ref is None:
                ref = interned[key] = Ref(View(rank, buf, 0, size, None), _FULL)
            out.append(ref)
            continue
        if r.life is not None:
            size = r.life
        else:
            size = implicit.get((r.rank, r.buffer), 0)
            if size < DEFAULT_SIZE:
                size = DEFAULT_SIZE
        n = size - r.offset if r.nbytes is None else r.nbytes
        if n < 0:
            n = 0
        key = (r.rank, r.buffer, r.offset, n, r.window, r.pattern)
        ref = interned.get(key)
        if ref is None:
            ref = interned[key] = Ref(View(r.rank, r.buffer, r.offset, n, r.pattern), r.window)
        out.append(ref)
    return tuple(out)
