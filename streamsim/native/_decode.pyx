# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The op-log reader's per-line hot path, compiled: :func:`first_pass` and :func:`second_pass`
(and :func:`fast_spec`, for the lines the reference's own pass 1 hands it).

The reference is streamsim/oplog/read.py's ``_Parser`` (pass 1, its loop over ``take``; pass 2,
``build`` and ``resolve``: each spec's names interned, its buffer refs resolved to interned views,
its Line made) and streamsim/oplog/fastpath.py (``fast_spec``: a common line decoded and
type-checked by msgspec, then turned into the checker's spec, with the checker's effects on the
parser's state). This file follows them statement for statement, with C types on the locals, and
takes the same decisions: a line the reference's fast path hands to the checker (None) is handed
over here too, so every error message stays the checker's. What differs is when a line is made,
and what it is made as: a row (``_lines.pxd``), not a ``Line``; the log's lines are returned as
``_lines.Rows``, which make a ``Line`` only when Python reads one:

- The reference keeps a spec (a dict) of every line until pass 2, because a buffer alive from the
  start has the size of the largest extent the whole log names. Here a common line's row is
  filled in pass 1, with the values its Line would hold (:func:`_line`); a line left for pass 2
  has a row reserved, so that the rows are in line order. Its refs are resolved at once: where
  its size is known (an allocation's, or an explicit ``nbytes``), to the interned Ref; where it
  runs to the end of an implicit life, to a pending Ref, one per (rank, buffer, offset, window).
  At the end of pass 1, :func:`_settle` keeps each pending Ref that has the size the reference
  resolves and interns it; any other is replaced in pass 2 by the interned Ref of the right size
  (``Rows.replace_refs``: in each ref tuple that holds it). So every row has the reference's
  field values, and equal refs stay one object.
- A line whose spec pass 2 must still read stays a spec, built as the reference builds it: a
  batch's send or receive (the batch rule reads the spec), a buffer op of an implicit life (its
  ``nbytes`` is that life's size). A buffer ref by name is kept in it as a plain tuple
  (rank, buffer) instead of a ``_RawRef``, resolved in pass 2 as the reference resolves a
  ``_RawRef`` of offset 0, no explicit size, window (0, 1), no pattern.

On the 200,000-line random program (``benchmarks/check.py --stages``) this made the parse 0.91 s
-> 0.53 s CPU and its peak RSS 266 -> 164 MB: no dict per line, no second copy of its fields.

A common line is first lexed from its bytes (``_lex.pxi``, included here), which gives the fields
msgspec's decode gives it without a ``str`` of the line or of each value; a line the lexer does
not take is decoded by msgspec as before. Both fill one :class:`_Fields`, which :func:`_take`
reads. A buffer name's Ref is remembered between lines the lexer takes (``_State.memo``: by rank
and the name's one object, instead of three dict lookups keyed by new tuples a ref). 200,000
lines: the parse 0.49 -> 0.29 s CPU.
Tests: tests/native/test_decode.py (the checker's OpLogs and errors, on both fast paths).
"""

from streamsim.native._slots cimport (L_LINENO, L_OP, L_PATH, L_RANK, L_HOST, L_STREAM,
    L_NAME, L_DUR, L_STEP, L_READS, L_WRITES, L_EVENT, L_PEER, L_GROUP, L_HANDLE, L_NBYTES,
    L_BUFFER, L_TARGET, L_SITE, L_T, L_RESULT, L_RARE, N_LINE, line_offsets, put_slot, new_record,
    check_generic_alloc, class_offsets, view_offsets, view_record, N_VIEW_FIELDS)

from streamsim.trace import View
from streamsim.native._lines cimport Rows
from streamsim.native._row cimport LRow, RO_RANK, RO_HOST, NO_DUR, NO_T
from streamsim.native import _lines

include "_lex.pxi"

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.string cimport memchr

# The reader's own objects, handed over by :func:`bind` (the compiled core sits below the reader
# and imports nothing of it): its Line and Ref classes, DEFAULT_SIZE, the ops whose ``event`` or
# ``buffer`` it reads, a wait's ``inferred`` values and name, each comm op's default group, the
# collectives it reads, the fields whose strings pass 2 interns.
cdef object Line = None
cdef object Ref = None
cdef object DEFAULT_SIZE = None
cdef object _EVENT_OPS = None
cdef object _BUFFER_OPS = None
cdef object _INFERRED_BY = None
cdef object _INFERRED_NAME = None
cdef object _ANY_SOURCE_NAME = None
cdef object _DEFAULT_GROUP = None
cdef object _COLLECTIVE_OPS = None
cdef object _ROOTED_OPS = None
cdef object _extent = None
# The fast path's msgspec objects, taken on first need (:func:`_fast_loaded`): msgspec's decoder
# of the lines the lexer hands over, its UNSET and errors, the ref object Struct the lexer makes,
# a ref object as the checker's dict, a strided ref's hull. A log whose every line the lexer
# takes, with no ref object, never imports msgspec (~15 ms of a process). Until then UNSET is a
# sentinel of this module's, which no line has: it is read only of the line being read, so the
# switch to msgspec's (between two lines, or inside the lexing of one) is never seen half done.
cdef object _load_fast = None  # () -> those objects (streamsim.oplog.read)
cdef object UNSET = object()
cdef object DecodeError = None
cdef object ValidationError = None
cdef object _decode = None
cdef object _REF_STRUCT = None
cdef object _REF_OBJECT = None
cdef object _strided_hull = None
cdef tuple _NAME_FIELDS = ()


def bind(line, ref, default_size, load_fast, event_ops, buffer_ops, inferred_by, inferred_name,
         any_source_name, default_group, collective_ops, rooted_ops, extent, name_fields, limits,
         max_dur, max_dims):
    """Take the reader's objects (streamsim/oplog/read.py calls this once, on its first large
    log). ``load_fast()``: the fast path's msgspec objects, asked for on first need
    (:func:`_fast_loaded`)."""
    global Line, Ref, DEFAULT_SIZE, _load_fast, _EVENT_OPS, _BUFFER_OPS, _INFERRED_BY
    global _INFERRED_NAME, _DEFAULT_GROUP, _COLLECTIVE_OPS, _NAME_FIELDS, _extent, _ROOTED_OPS
    global _ANY_SOURCE_NAME
    Line, Ref, DEFAULT_SIZE, _load_fast = line, ref, default_size, load_fast
    _EVENT_OPS, _BUFFER_OPS, _INFERRED_BY, _INFERRED_NAME = (event_ops, buffer_ops, inferred_by,
                                                             inferred_name)
    _DEFAULT_GROUP, _COLLECTIVE_OPS, _extent = default_group, collective_ops, extent
    _ROOTED_OPS, _ANY_SOURCE_NAME = rooted_ops, any_source_name
    lex_limits(limits, max_dur, max_dims)
    _NAME_FIELDS = name_fields
    check_generic_alloc(Line)
    _lines.bind(Line)
    view_offsets(View, _view_offset)
    class_offsets(Ref, ("view", "window"), _ref_offset)
    check_generic_alloc(View)
    check_generic_alloc(Ref)


cdef int _fast_loaded() except -1:
    """msgspec's objects taken from the fast path (imported now, once): its UNSET, its errors,
    the decoder of the lines the lexer hands over, the ref object Struct the lexer makes and
    the fast path's functions of one."""
    global UNSET, DecodeError, ValidationError, _decode, _REF_STRUCT, _REF_OBJECT, _strided_hull
    if _decode is not None:
        return 0
    got = _load_fast()
    UNSET, DecodeError = got["unset"], got["decode_error"]
    ValidationError, _REF_STRUCT = got["validation_error"], got["ref_struct"]
    _REF_OBJECT, _strided_hull = got["ref_object"], got["strided_hull"]
    _decode = got["decoder"].decode
    return 0


def _ref_struct(**fields):
    """A ref object the lexer read, as the fast path's Struct: what the lexer is handed until
    msgspec is loaded (the first loads it); then the Struct itself."""
    if _REF_STRUCT is None:
        _fast_loaded()
    return _REF_STRUCT(**fields)


cdef tuple _FULL = (0.0, 1.0)
# the keys of a fast path's spec: a spec with no other key makes its Line by a positional call
cdef frozenset _FAST_KEYS = frozenset({"op", "rank", "host", "stream", "name", "dur", "step",
                                       "event", "reads", "writes", "site", "t"})

cdef dict _TAG_OF = {}  # a fast-path Struct class -> its op (the tag msgspec decoded it by)


cdef Py_ssize_t _view_offset[<int>N_VIEW_FIELDS]  # View's slots (_slots.view_offsets)
cdef Py_ssize_t _ref_offset[2]  # Ref's (view, window)


cdef object _ref_of(object rank, object buffer, object offset, object nbytes, object pattern,
                    object window):
    """``Ref(View(rank, buffer, offset, nbytes, pattern), window)``, both made by their slots
    (no dataclass ``__init__`` call: a recorded log makes a pair at every alloc)."""
    v = view_record(View, _view_offset, rank, buffer, offset, nbytes, pattern)
    r = new_record(Ref)
    put_slot(r, _ref_offset[0], v)
    put_slot(r, _ref_offset[1], window)
    return r


cdef struct RefMemo:
    # open addressing over (rank, name address) -> the 1-tuple of its Ref, ``(ref,)``, which
    # every line that names only that buffer holds as its reads or writes (48 bytes a line
    # less than a tuple each) (owned; NULL: forgotten, the key kept so
    # that probing goes on past it), each of the generation it was put in: a Ref of an earlier
    # generation is forgotten too (memo_clear starts a new generation, in constant time: it
    # follows every line the lexer did not take). Grown at half full
    long *ranks
    PyObject **names
    PyObject **refs
    unsigned long *gens
    unsigned long gen
    Py_ssize_t cap
    Py_ssize_t n


cdef int memo_init(RefMemo *m) except -1:
    cdef Py_ssize_t i
    m.cap, m.n, m.gen = 1024, 0, 0
    m.ranks = <long *>PyMem_Malloc(m.cap * sizeof(long))
    m.names = <PyObject **>PyMem_Malloc(m.cap * sizeof(PyObject *))
    m.refs = <PyObject **>PyMem_Malloc(m.cap * sizeof(PyObject *))
    m.gens = <unsigned long *>PyMem_Malloc(m.cap * sizeof(unsigned long))
    if m.ranks == NULL or m.names == NULL or m.refs == NULL or m.gens == NULL:
        memo_free(m)
        raise MemoryError()
    for i in range(m.cap):
        m.names[i] = NULL
        m.refs[i] = NULL
    return 0


cdef inline void memo_clear(RefMemo *m) noexcept:
    m.gen += 1


cdef void memo_free(RefMemo *m) noexcept:
    cdef Py_ssize_t i
    if m.refs != NULL:
        for i in range(m.cap):
            Py_XDECREF(m.refs[i])
    PyMem_Free(m.ranks)
    PyMem_Free(m.names)
    PyMem_Free(m.refs)
    PyMem_Free(m.gens)
    m.ranks, m.names, m.refs, m.gens = NULL, NULL, NULL, NULL
    m.cap = m.n = 0


cdef inline PyObject *memo_get(RefMemo *m, Py_ssize_t slot) noexcept:
    """The ``(ref,)`` in ``slot`` (:func:`memo_slot`), or NULL: none, or forgotten."""
    return m.refs[slot] if m.gens[slot] == m.gen else NULL


cdef inline Py_ssize_t memo_slot(RefMemo *m, long rank, PyObject *name) noexcept:
    """The slot of (rank, name): where it is, or the empty slot where it would go."""
    cdef uint64_t h = ((<uint64_t>name >> 4) ^ (<uint64_t>rank * 0x9E3779B97F4A7C15ULL)) * \
        0xBF58476D1CE4E5B9ULL
    cdef Py_ssize_t i = <Py_ssize_t>((h >> 20) & <uint64_t>(m.cap - 1))
    while m.names[i] != NULL and (m.names[i] != name or m.ranks[i] != rank):
        i = (i + 1) & (m.cap - 1)
    return i


cdef int memo_put(RefMemo *m, long rank, PyObject *name, object ref) except -1:
    cdef Py_ssize_t i, j, old
    cdef long *ranks
    cdef PyObject **names
    cdef PyObject **refs
    cdef unsigned long *gens
    if m.cap == 0:
        memo_init(m)
    if (m.n + 1) * 2 > m.cap:
        ranks, names, refs, gens, old = m.ranks, m.names, m.refs, m.gens, m.cap
        m.cap = old * 2
        m.n = 0
        m.ranks = <long *>PyMem_Malloc(m.cap * sizeof(long))
        m.names = <PyObject **>PyMem_Malloc(m.cap * sizeof(PyObject *))
        m.refs = <PyObject **>PyMem_Malloc(m.cap * sizeof(PyObject *))
        m.gens = <unsigned long *>PyMem_Malloc(m.cap * sizeof(unsigned long))
        if m.ranks == NULL or m.names == NULL or m.refs == NULL or m.gens == NULL:
            PyMem_Free(m.ranks)
            PyMem_Free(m.names)
            PyMem_Free(m.refs)
            PyMem_Free(m.gens)
            m.ranks, m.names, m.refs, m.gens, m.cap = ranks, names, refs, gens, old
            raise MemoryError()
        for i in range(m.cap):
            m.names[i] = NULL
            m.refs[i] = NULL
        for i in range(old):  # (the forgotten ones dropped)
            if refs[i] != NULL and gens[i] == m.gen:
                j = memo_slot(m, ranks[i], names[i])
                m.ranks[j], m.names[j], m.refs[j], m.gens[j] = ranks[i], names[i], refs[i], m.gen
                m.n += 1
            else:
                Py_XDECREF(refs[i])
        PyMem_Free(ranks)
        PyMem_Free(names)
        PyMem_Free(refs)
        PyMem_Free(gens)
    i = memo_slot(m, rank, name)
    if m.names[i] == NULL:
        m.n += 1
    Py_INCREF(ref)
    Py_XDECREF(m.refs[i])
    m.ranks[i], m.names[i], m.refs[i], m.gens[i] = rank, name, <PyObject *>ref, m.gen
    return 0


cdef inline void memo_forget(RefMemo *m, long rank, PyObject *name) noexcept:
    if m.cap == 0:
        return
    cdef Py_ssize_t i = memo_slot(m, rank, name)
    if m.names[i] != NULL:
        m.gens[i] = m.gen - 1  # (forgotten: an earlier generation)


cdef class _State:
    """What pass 1 reads of the reader (``read._Parser``) on every line, in typed fields: its
    dicts themselves (the reference, to which unusual lines go, changes the same ones, and never
    rebinds them), its path, and the two fields it does rebind: ``lineno`` (set by the caller;
    :meth:`flush` writes it to the parser before the parser reads it) and ``ops_seen`` (written
    through to the parser by ``_scan`` the once it becomes True). An attribute of the parser
    object cost a dict lookup each, ten a line."""
    cdef object parser
    cdef dict lives, implicit, interned, strings, threads, handles, groups, last_t, rares
    cdef object path, lineno, batches, ref
    cdef bint ops_seen
    # For the lines the lexer took (whose strings are its one object per distinct string, alive
    # for the whole pass): each buffer name's Ref (offset 0, whole window) by (rank, the name's
    # address), what :func:`_resolved` would resolve it to again, until the buffer's life
    # changes (an alloc: forgotten; any line the lexer did not take: all forgotten); and the last
    # thread (rank, host's address) a line named, already in ``threads``; and the last t of
    # the thread of the last lexed line with a t, (t, line) not yet written to ``last_t`` under
    # ``t_key`` (None: nothing pending; :meth:`flush_t` writes it).
    cdef RefMemo memo
    cdef long last_rank, t_rank
    cdef PyObject *last_host
    cdef PyObject *t_host
    cdef object t_key, t_val, t_line
    # pass 1's rows (:func:`_line` fills one a line it makes; a line left for pass 2, a row
    # reserved for it, its place in ``spec_rows`` its spec's in ``raw``)
    cdef Rows rows
    cdef list spec_rows

    def __dealloc__(self):
        memo_free(&self.memo)

    cdef void flush(self) except *:
        """Hand ``lineno`` back to the parser (before it reads it)."""
        self.parser.lineno = self.lineno

    cdef void forget(self) except *:
        """A line the lexer did not take: it may change any buffer's life, its strings are not
        the lexer's, and the checker reads ``last_t``."""
        memo_clear(&self.memo)
        self.last_host = NULL
        self.flush_t()

    cdef void flush_t(self) except *:
        """Write the pending last t of a thread to ``last_t``."""
        if self.t_key is not None:
            self.last_t[self.t_key] = (self.t_val, self.t_line)
            self.t_key = None


cdef _State _state(parser):
    cdef _State st = _State.__new__(_State)
    st.memo.cap = 0  # (made on first use: a _State is made for each line fast_spec reads)
    st.last_host = st.t_host = NULL
    st.t_key = None
    st.parser = parser
    st.lives, st.implicit, st.interned = parser.lives, parser.implicit, parser.interned
    st.strings, st.threads, st.handles = parser.strings, parser.threads, parser.handles
    st.rares = parser.rares
    st.groups, st.last_t = parser.groups, parser.last_t
    st.path, st.lineno, st.batches, st.ref = parser.path, parser.lineno, parser.batches, parser.ref
    st.ops_seen = parser.ops_seen
    return st


cdef object _line(_State parser, op, r, host, stream, name, double dur, bint no_dur, step,
                  tuple reads, tuple writes, event, peer, group, handle, nbytes, blocking, buffer,
                  target, batch, site, t, label, inferred, result, root, bint any_source=False):
    """The row of the Line the reference's ``build`` makes of this line's spec (its names
    interned), filled with the values that Line would hold (no Line made): returns its place
    in ``parser.rows``. Its duration as a C value (``no_dur``: None), never made a float."""
    cdef Rows rows = parser.rows
    cdef unsigned char flags = NO_DUR if no_dur else 0
    cdef Py_ssize_t k = rows.reserve()
    if not blocking and batch is None and label is None and root is None and \
            not any_source and inferred is None:  # (as Line() keeps it: RARE_FIELDS all equal to
        rare = None  # their defaults; ranks and channel are never this reader's)
    else:
        rare = (None, blocking, batch, label, None, root, any_source, inferred)
        rare = parser.rares.setdefault(rare, rare)
    # (its names as they are: the rows keep one object of equal strings, as ``strings`` would)
    if t is None:
        flags |= NO_T
    rows.put_values(k, parser.lineno, op, parser.path, r, host, stream, name, dur, step, reads,
                    writes, event, peer, group, handle, nbytes, buffer, target, site,
                    0.0 if t is None else <double>t, result, rare, flags)
    return k


cdef tuple _resolved(_State parser, list items, r, long rank, dict pending, bint lexed):
    """The Refs of a line's refs, as the reference's ``ref`` records them in pass 1 and its
    ``resolve`` makes them in pass 2, made in pass 1: a ref of an explicit life, or with an
    explicit size, to its interned Ref; a ref whose size is its implicit life's (known only at
    the end of the log) to a pending Ref (:func:`_pending`). ``lexed``: the line's strings are
    the lexer's, and a name's Ref is remembered (``_State.memo``)."""
    cdef dict lives = parser.lives
    cdef dict implicit = parser.implicit
    cdef dict interned = parser.interned
    cdef Py_ssize_t slot, n = len(items), at = 0
    cdef bint single = n == 1
    cdef PyObject *got
    cdef tuple out = None if single else PyTuple_New(n)  # (filled in place: no list made)
    for x in items:
        if type(x) is str:  # (offset 0, no size: never an error)
            if lexed and parser.memo.cap:
                slot = memo_slot(&parser.memo, rank, <PyObject *>x)
                got = memo_get(&parser.memo, slot)
                if got != NULL:
                    if single:  # (the one tuple of this Ref alone: lines share it)
                        return <tuple>got
                    _put(out, at, (<tuple>got)[0])
                    at += 1
                    continue
            k = (r, x)
            life = lives.get(k)
            if life is None or life[0] is None:
                if implicit.get(k, 0) < 1:
                    implicit[k] = 1
                ref = _pending(pending, implicit, r, x, 0, _FULL)
            else:
                ref = _interned(interned, r, x, 0, life[0], _FULL)
            if lexed:
                alone = (ref,)
                memo_put(&parser.memo, rank, <PyObject *>x, alone)
                if single:
                    return alone
            if single:
                return (ref,)
            _put(out, at, ref)
            at += 1
            continue
        # (a ref object _ref_quotes checked: what the reference's ``ref`` records of it, and
        # the Ref its ``resolve`` makes of what it returns, without its dict or _RawRef)
        buf = x.buffer
        offset = 0 if x.offset is UNSET else x.offset
        pattern = None
        if x.sizes is UNSET and x.strides is UNSET and x.itemsize is UNSET:
            nbytes = None if x.nbytes is UNSET else x.nbytes
        else:  # (strided: its hull, and its bytes in it; strided.extent, by shape)
            nbytes, pattern = _extent(tuple(x.sizes), tuple(x.strides),
                                      1 if x.itemsize is UNSET else x.itemsize)
        window = _FULL if x.window is UNSET else x.window
        k = (r, buf)
        life = lives.get(k)
        size = life[0] if life else None
        if size is None:  # (an implicit life: the largest extent named so far)
            extent = offset + nbytes if nbytes is not None else offset + 1
            if extent > implicit.get(k, 0):
                implicit[k] = extent
        if nbytes is not None:  # (a strided ref's too: its hull's)
            ref = _interned(interned, r, buf, offset, nbytes, window, pattern)
        elif size is not None:
            left = size - offset
            ref = _interned(interned, r, buf, offset, left if left > 0 else 0, window)
        else:
            ref = _pending(pending, implicit, r, buf, offset, window)
        if single:
            return (ref,)
        _put(out, at, ref)
        at += 1
    return out


cdef inline void _put(tuple t, Py_ssize_t i, object v) noexcept:
    """Item ``i`` of the new tuple ``t`` (being filled) set to ``v``."""
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)


cdef object _interned(dict interned, rank, buffer, offset, nbytes, window, pattern=None):
    """The reference's ``resolve`` of one ref of known size: the interned Ref of its key
    (``pattern``: a strided ref's, ``strided.Strided``)."""
    key = (rank, buffer, offset, nbytes, window, pattern)
    ref = interned.get(key)
    if ref is None:
        ref = interned[key] = _ref_of(rank, buffer, offset, nbytes, pattern, window)
    return ref


cdef object _pending(dict pending, dict implicit, rank, buffer, offset, window):
    """The Ref of a ref that runs to the end of an implicit life (its size: the largest extent
    the whole log names): one per (rank, buffer, offset, window), sized by the extent named so
    far, until :func:`_settle` knows the size."""
    key = (rank, buffer, offset, window)
    ref = pending.get(key)
    if ref is None:
        size = implicit.get((rank, buffer), 0)
        if size < DEFAULT_SIZE:
            size = DEFAULT_SIZE
        n = size - offset
        ref = pending[key] = _ref_of(rank, buffer, offset, n if n > 0 else 0, None, window)
    return ref


cdef dict _settle(parser, dict pending):
    """At the end of pass 1, each pending Ref (:func:`_pending`) meets the Ref the reference
    resolves it to: kept, and interned, where it is sized right and no equal Ref is interned;
    else replaced (the returned map, by id: :func:`second_pass` puts the replacement in) by the
    interned one, or a new one of the right size. So equal refs stay one object."""
    cdef dict implicit = parser.implicit
    cdef dict interned = parser.interned
    cdef dict replace = {}
    for (rank, buffer, offset, window), ref in pending.items():
        size = implicit.get((rank, buffer), 0)
        if size < DEFAULT_SIZE:
            size = DEFAULT_SIZE
        n = size - offset
        if n < 0:
            n = 0
        key = (rank, buffer, offset, n, window, None)
        have = interned.get(key)
        if have is None:
            if ref.view.nbytes == n:
                interned[key] = ref
                continue
            have = interned[key] = _ref_of(rank, buffer, offset, n, None, window)
        if have is not ref:
            replace[id(ref)] = have
    return replace


def first_pass(parser, object lines, list raw):
    """The reader's pass 1 (streamsim.oplog.read._Parser.parse, its loop over
    ``parser.take``): each line a common one, lexed from its bytes (``_lex.pxi``) or else
    decoded (:func:`_scan`), and taken here (:func:`_take`): its row (``parser.rows``,
    ``_lines.Rows``) filled at once where nothing in it waits for the end of the log, else its
    spec for pass 2 (:func:`second_pass`) and a row reserved for it; blank lines skipped; any other line (not UTF-8, a BOM, a comment, a
    line :func:`_scan` hands over) taken by ``parser.take``, the reference, which also words
    every error. Then the Refs of implicit lives are settled (:func:`_settle`).

    ``lines``: the log's lines as ``source.split_lines`` splits them (a list), or the log's
    whole bytes where ``\\n`` alone ends its lines (no ``\\r``): then each line is lexed where
    it lies in them, and only a line handed to ``parser.take`` is made a bytes object of its
    own (a list of a bytes object a line was 136 bytes a line beside the lines made from it)."""
    cdef dict pending = {}
    cdef _State st = _state(parser)
    cdef Lex lx
    cdef _Fields f = _Fields.__new__(_Fields)
    cdef Py_ssize_t n
    if type(lines) is not bytes and type(lines) is not list:
        raise TypeError("first_pass: lines must be a list of lines or the log's bytes")
    if type(lines) is bytes and memchr(PyBytes_AS_STRING(lines), 13, PyBytes_GET_SIZE(lines)):
        raise ValueError("first_pass: the log's bytes hold a \\r: split them first")
    st.rows = Rows()
    st.spec_rows = []
    lex_init(&lx)
    try:
        n = _first_pass(st, lines, raw, pending, &lx, f)
        st.flush_t()
    finally:
        lex_free(&lx)
    if n:
        st.lineno = n
    st.flush()
    parser.settled = (pending, _settle(parser, pending), st.rows, st.spec_rows)


cdef Py_ssize_t _lexed_lines = 0  # of the last first_pass: the lines the lexer took


def lexed_lines() -> int:
    """How many lines of the last :func:`first_pass` the lexer took (``_lex.pxi``; the others
    were decoded by msgspec or read by the reference): what a benchmark and a test read."""
    return _lexed_lines


cdef Py_ssize_t _first_pass(_State st, object lines, list raw, dict pending, Lex *lx,
                            _Fields f) except -1:
    """:func:`first_pass`'s loop: each line lexed from its bytes where the lexer takes it (the
    common lines: ``_lex.pxi``), else decoded and read as before (:func:`_scan`). Returns how
    many lines ``lines`` holds (as ``split_lines`` counts them: one more than its line ends)."""
    global _lexed_lines
    _lexed_lines = 0
    cdef bint whole = type(lines) is bytes
    cdef list chunks = None if whole else <list>lines
    cdef const char *base = PyBytes_AS_STRING(lines) if whole else NULL
    cdef const char *end
    cdef Py_ssize_t size = PyBytes_GET_SIZE(lines) if whole else 0
    cdef Py_ssize_t at = 0, start = 0, length = 0, i = -1, n = 0 if whole else len(chunks)
    cdef bint lexed
    cdef str text, s
    parser = st.parser
    batches = parser.batches
    cdef dict open_ = batches.open
    take = parser.take
    while True:
        i += 1
        if whole:  # (the line from ``at`` to the next \n or the end; a last \n ends an empty one)
            if at > size:
                break
            start = at
            end = <const char *>memchr(base + start, 10, size - start)
            length = (end - (base + start)) if end != NULL else size - start
            chunk = None  # (made only for a line handed to the reference)
            lexed = lex_line(lx, base + start, length,
                             _ref_struct if _REF_STRUCT is None else _REF_STRUCT)
            at = start + length + 1
            n = i + 1
        else:
            if i >= n:
                break
            chunk = chunks[i]
            lexed = lex_chunk(lx, chunk, _ref_struct if _REF_STRUCT is None else _REF_STRUCT)
        if lexed:
            st.lineno = i + 1
            _lexed_lines += 1
            _lexed(lx, f)
            spec = _take(st, f, <str>OP_NAMES[lx.op], None, pending)
            if spec is None:
                st.forget()
                st.flush()
                if chunk is None:
                    chunk = PyBytes_FromStringAndSize(base + start, length)
                take(i + 1, chunk, raw, False)  # (msgspec would decode it as the lexer did)
                _reserve_specs(st, raw)
                continue
        else:
            if chunk is None:
                chunk = PyBytes_FromStringAndSize(base + start, length)
            if type(chunk) is bytes:
                try:
                    text = (<bytes>chunk).decode("utf-8")
                except UnicodeDecodeError:
                    st.forget()
                    st.flush()
                    take(i + 1, chunk, raw)
                    _reserve_specs(st, raw)
                    continue
            else:
                text = chunk
            s = text.strip()
            if not s:
                continue  # (a blank line)
            st.forget()
            if s[0] == "#" or (i == 0 and text.startswith("\ufeff")):
                st.flush()
                take(i + 1, chunk, raw)
                _reserve_specs(st, raw)
                continue
            st.lineno = i + 1  # (a t names its line: the next t of its thread is checked by it)
            # (msgspec refuses an op none of its Structs has: the lexer saw one, so msgspec
            # is neither asked nor imported for a declaration)
            spec = None if lx.foreign_op else _scan(st, s, pending)
        if spec is None:
            st.flush()
            take(i + 1, chunk, raw, False)  # (its fast path would refuse it again)
            _reserve_specs(st, raw)
            continue
        made = type(spec) is not dict  # (a row: its line has no batch)
        if not made and spec.get("batch") is not None:  # (batches.check: _scan made sure it
            batches.check(spec, i + 1, AssertionError)  # passes)
        elif open_:  # (batches.check of a line with no batch: it ends its thread's open batch)
            thread = _row_thread(st.rows, <Py_ssize_t>spec) if made else \
                (spec["rank"], spec["host"])
            batch = open_.get(thread)
            if batch is not None:
                batches.closed.add((*thread, batch[0]))
                open_[thread] = None
        if not made:
            raw.append((i + 1, spec))
            st.spec_rows.append(st.rows.reserve())
    return n


cdef inline void _reserve_specs(_State st, list raw) except *:
    """A row reserved for each spec the reference's ``take`` appended to ``raw`` (pass 2 fills
    it), so that the rows stay in line order."""
    while len(st.spec_rows) < len(raw):
        st.spec_rows.append(st.rows.reserve())


cdef tuple _row_thread(Rows rows, Py_ssize_t k):
    """(rank, host) of row ``k``, not frozen yet."""
    cdef LRow *row = rows.rows + k
    return (rows.vals[row.o[RO_RANK]], rows.vals[row.o[RO_HOST]])


def fast_spec(parser, str s):
    """streamsim.oplog.fastpath.fast_spec: the checker's spec of line ``s`` (stripped), or None
    when the checker must read it. String refs are recorded as the reference's ``parser.ref``
    records them (the thread, the buffer's implicit extent) and kept as (rank, buffer) tuples."""
    cdef _State st = _state(parser)
    return _scan(st, s, None)


cdef class _Fields:
    """A line's fields, as the fast path's Struct of its op holds them (``UNSET`` where the line
    has no such key): what :func:`_take` reads, from the lexer (:func:`_lexed`) or from msgspec
    (:func:`_decoded`). One object, refilled for each line (nothing keeps it)."""
    cdef object rank, host, stream, name, dur, step, site, t, reads, writes, event, buffer
    cdef object nbytes, label, handle, blocking, inferred, tensors, peer, group, batch, inputs
    cdef object outputs, result, root, any_source
    cdef double dur_c  # the lexer's duration, where ``dur`` is _C_DUR

    cdef void clear(self) noexcept:
        self.rank = self.host = self.stream = self.name = self.dur = self.step = UNSET
        self.site = self.t = self.reads = self.writes = self.event = self.buffer = UNSET
        self.nbytes = self.label = self.handle = self.blocking = self.inferred = UNSET
        self.tensors = self.peer = self.group = self.batch = self.inputs = self.outputs = UNSET
        self.result = self.root = self.any_source = UNSET


cdef object _C_DUR = object()  # a _Fields' dur: the lexer's, a C double in its dur_c


cdef inline object _lex_value(Lex *lx, int k):
    """Key ``k``'s value in the line ``lx`` holds, as msgspec gives it; UNSET where it has none."""
    cdef int t
    if not lx.seen & (1u << k):
        return UNSET
    t = TYPE_OF[k]
    if t == T_INT:
        return PyLong_FromLongLong(lx.num[k])
    if t == T_FLOAT:
        return PyFloat_FromDouble(lx.real[k])
    if t == T_BOOL:
        return lx.num[k] != 0
    return <object>lx.obj[k]


cdef void _lexed(Lex *lx, _Fields f) except *:
    """Fill ``f`` with the line the lexer took."""
    f.rank, f.host = _lex_value(lx, K_RANK), _lex_value(lx, K_HOST)
    f.stream = _lex_value(lx, K_STREAM)
    f.name, f.step = _lex_value(lx, K_NAME), _lex_value(lx, K_STEP)
    if lx.seen & (1u << K_DUR):  # (kept a C double: a row holds it so, and most lines are rows)
        f.dur, f.dur_c = _C_DUR, lx.real[K_DUR]
    else:
        f.dur = UNSET
    f.site, f.t = _lex_value(lx, K_SITE), _lex_value(lx, K_T)
    f.reads, f.writes = _lex_value(lx, K_READS), _lex_value(lx, K_WRITES)
    f.event, f.buffer = _lex_value(lx, K_EVENT), _lex_value(lx, K_BUFFER)
    f.nbytes, f.label = _lex_value(lx, K_NBYTES), _lex_value(lx, K_LABEL)
    f.handle, f.blocking = _lex_value(lx, K_HANDLE), _lex_value(lx, K_BLOCKING)
    f.inferred, f.tensors = _lex_value(lx, K_INFERRED), _lex_value(lx, K_TENSORS)
    f.peer, f.group = _lex_value(lx, K_PEER), _lex_value(lx, K_GROUP)
    f.batch = _lex_value(lx, K_BATCH)
    f.inputs, f.outputs = _lex_value(lx, K_INPUTS), _lex_value(lx, K_OUTPUTS)
    f.result, f.root = _lex_value(lx, K_RESULT), _lex_value(lx, K_ROOT)
    f.any_source = _lex_value(lx, K_ANY_SOURCE)


cdef _Fields _SCANNED = _Fields.__new__(_Fields)  # (_scan's, refilled for each line it reads)
cdef dict _FIELD_OF = {}  # a Struct class -> its fields, as (name, K_ key: _lex.pxi)


cdef void _decoded(obj, _Fields f) except *:
    """Fill ``f`` with the Struct msgspec decoded (its fields: the others stay UNSET)."""
    cdef int k
    cls = type(obj)
    fields = _FIELD_OF.get(cls)
    if fields is None:
        for name in cls.__struct_fields__:
            if name not in KEY_NAMES:
                raise AssertionError(f"a fast-path Struct field the reader does not know: {name}")
        fields = _FIELD_OF[cls] = tuple((name, KEY_NAMES.index(name))
                                        for name in cls.__struct_fields__)
    f.clear()
    for name, place in <tuple>fields:
        v = getattr(obj, name)
        k = place
        if k <= K_T:
            if k == K_RANK: f.rank = v
            elif k == K_HOST: f.host = v
            elif k == K_STREAM: f.stream = v
            elif k == K_NAME: f.name = v
            elif k == K_DUR: f.dur = v
            elif k == K_STEP: f.step = v
            elif k == K_SITE: f.site = v
            else: f.t = v
        elif k <= K_BLOCKING:
            if k == K_READS: f.reads = v
            elif k == K_WRITES: f.writes = v
            elif k == K_EVENT: f.event = v
            elif k == K_BUFFER: f.buffer = v
            elif k == K_NBYTES: f.nbytes = v
            elif k == K_LABEL: f.label = v
            elif k == K_HANDLE: f.handle = v
            else: f.blocking = v
        elif k == K_INFERRED: f.inferred = v
        elif k == K_TENSORS: f.tensors = v
        elif k == K_PEER: f.peer = v
        elif k == K_GROUP: f.group = v
        elif k == K_BATCH: f.batch = v
        elif k == K_INPUTS: f.inputs = v
        elif k == K_OUTPUTS: f.outputs = v
        elif k == K_RESULT: f.result = v
        elif k == K_ROOT: f.root = v
        else: f.any_source = v


cdef tuple _values(str op, _Fields f):
    return (op, f.rank, f.host, f.stream, f.name,
            PyFloat_FromDouble(f.dur_c) if f.dur is _C_DUR else f.dur, f.step, f.site, f.t,
            f.reads, f.writes, f.event, f.buffer, f.nbytes, f.label, f.handle, f.blocking, f.inferred, f.tensors,
            f.peer, f.group, f.batch, f.inputs, f.outputs, f.result, f.root, f.any_source)


def lex_fields(line):
    """The lexer's reading of ``line``: (op, each field's value or UNSET, in _Fields' order), or
    None where it refuses the line (tests/native/test_lex.py holds it to :func:`msgspec_fields`)."""
    cdef Lex lx
    cdef _Fields f = _Fields.__new__(_Fields)
    _fast_loaded()  # (the same UNSET as msgspec_fields')
    lex_init(&lx)
    try:
        if not lex_chunk(&lx, line, _REF_STRUCT):
            return None
        _lexed(&lx, f)
        return _values(<str>OP_NAMES[lx.op], f)
    finally:
        lex_free(&lx)


def msgspec_fields(str line):
    """msgspec's reading of ``line`` (stripped), as :func:`lex_fields` gives it, or None where it
    refuses the line."""
    cdef _Fields f = _Fields.__new__(_Fields)
    _fast_loaded()
    try:
        obj = _decode(line)
    except (ValidationError, DecodeError, UnicodeError):
        return None
    _decoded(obj, f)
    return _values(obj.__struct_config__.tag, f)


cdef object _scan(_State parser, str s, dict pending):
    """:func:`fast_spec`, or with ``pending`` (pass 1 of :func:`first_pass`) the line's row
    itself (:func:`_take`), of the line ``s`` decoded by msgspec; None: the checker reads it."""
    if "\\" in s:
        return None
    if _decode is None:
        _fast_loaded()
    try:
        obj = _decode(s)
    except (ValidationError, DecodeError, UnicodeError):  # (lone surrogates)
        return None
    cls = type(obj)
    op = _TAG_OF.get(cls)
    if op is None:
        op = _TAG_OF[cls] = obj.__struct_config__.tag
    _decoded(obj, _SCANNED)
    return _take(parser, _SCANNED, op, s, pending)


cdef object _take(_State parser, _Fields obj, str op, str s, dict pending):
    """The spec (or row) of a line of op ``op`` whose fields are ``obj``: with ``pending``
    (pass 1 of :func:`first_pass`) the line's row itself, filled here (:func:`_line`; its place,
    an int) where its
    spec would hold nothing pass 2 must wait for (a batch, a buffer op's implicit size): its refs
    resolved now, one of an implicit life to a Ref ``pending`` keeps until :func:`_settle` knows
    that life's size. ``s``: the line, to count its quotes (a key given twice: msgspec keeps the
    last); None where the lexer took it (it refuses a key given twice)."""
    cdef int quotes
    cdef long rank
    cdef bint has_label = False, is_wait = False, has_inferred = False, inferred_name = False
    cdef bint is_query = False, any_source = False, has_any_source = False
    cdef bint is_comm = False, explicit = True
    cdef double dur_c = 1.0
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
        dur_c = obj.dur_c if dur is _C_DUR else <double>dur
    if step is UNSET:
        step = None
    else:
        quotes += 2
    event = label = handle = target = inferred = peer = group = nbytes = batch = result = None
    root = None
    blocking = False
    if op in _EVENT_OPS:
        event = obj.event
        if not event:  # missing (or empty: the checker words either)
            return None
        quotes += 4
    reads = writes = None
    buffer = None
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
                label = obj.label
                has_label = True
    elif op == "wait" or op == "query":  # (the checker's check_fields: its handle's line)
        handle = obj.handle
        if not handle:
            return None
        target = parser.handles.get((r, handle))
        if target is None:  # (the checker words it)
            return None
        quotes += 4
        if op == "query":  # (what the program observed, when it says)
            is_query = True
            result = obj.result
            if result is UNSET:
                result = None
            else:
                quotes += 2
        else:
            is_wait = True
            blocking = obj.blocking
            if blocking is UNSET:
                blocking = False
            else:
                quotes += 2
            inferred = obj.inferred
            if inferred is not UNSET:
                if inferred not in _INFERRED_BY:
                    return None
                quotes += 4
                has_inferred = True
                if obj.name is UNSET:
                    name = _INFERRED_NAME
            else:
                inferred = None
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
        is_comm = True
        if obj.any_source is not UNSET:  # (a recorder's dist.recv without a source)
            quotes += 2
            has_any_source = True
            any_source = obj.any_source
            if any_source and obj.batch is not UNSET:
                return None  # (a batch names its peers: the checker words it)
            if any_source and obj.name is UNSET:
                name = _ANY_SOURCE_NAME
        batch = obj.batch
        if batch is UNSET:
            batch = None
        else:
            quotes += 2
            if g is not None and "cost" in g and g["backend"] == "gloo":
                return None  # (a batch on a group declared gloo: the checker words it)
            if parser.batches.refuses((r, host), batch, group, stream):
                return None  # (the batch rule: the checker words it)
            pending = None  # (a batch's line: batches.check reads its spec)
        if op == "isend":
            reads, writes = tensors, None
        else:
            reads, writes = None, tensors
    elif op in _COLLECTIVE_OPS or op in _ROOTED_OPS:
        if op in _COLLECTIVE_OPS:
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
                writes = reads if rank == <long>root else []
            else:
                inputs, outputs = obj.inputs, obj.outputs
                listed, needed = (outputs, inputs) if op == "gather" else (inputs, outputs)
                if needed is UNSET or (listed is UNSET) == (rank == <long>root):
                    return None  # (missing, or the root's list on another rank: the checker's)
                quotes += 2 * ((inputs is not UNSET) + (outputs is not UNSET))
                reads = [] if inputs is UNSET else inputs
                writes = [] if outputs is UNSET else outputs
        comm = _comm(parser, obj, op)
        if comm is None:
            return None  # (a group of gloo ops, used by an NCCL op: the checker words it)
        group, g, q = comm
        quotes += q
        is_comm = True
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
    else:
        site = None
    if t is not UNSET:
        quotes += 2
    if s is not None and s.count('"') != quotes:  # a key given twice
        return None
    if t is not UNSET:  # (each thread's t in time order: else the checker words it)
        if s is None and parser.t_key is not None and rank == parser.t_rank and \
                <PyObject *>host == parser.t_host:  # (the thread of the last lexed t: pending)
            if t < parser.t_val:
                return None
            parser.t_val, parser.t_line = t, parser.lineno
        else:
            parser.flush_t()
            last = parser.last_t.get((r, host))
            if last is not None and t < last[0]:
                return None
            if s is None:  # (kept pending while the lexed lines stay on this thread)
                parser.t_key, parser.t_val, parser.t_line = (r, host), t, parser.lineno
                parser.t_rank, parser.t_host = rank, <PyObject *>host
            else:
                parser.last_t[(r, host)] = (t, parser.lineno)
    else:
        t = None
    if not parser.ops_seen:  # (a config declaration after this line is an error)
        parser.ops_seen = True
        parser.parser.ops_seen = True
    if s is not None or rank != parser.last_rank or <PyObject *>host != parser.last_host:
        parser.threads.setdefault((r, host), None)
        if s is None:
            parser.last_rank, parser.last_host = rank, <PyObject *>host
    if buffer is not None:  # (the checker's check_fields: the buffer's life at this line)
        key = (r, buffer)
        if op == "alloc":
            nbytes = None if obj.nbytes is UNSET else obj.nbytes
            parser.lives[key] = (nbytes, parser.lineno, stream)
            if s is None:  # (a new life: its Refs are resolved again)
                memo_forget(&parser.memo, rank, <PyObject *>buffer)
            if nbytes is None:
                parser.implicit.setdefault(key, 0)
        else:
            life = parser.lives.get(key)
            if life is None:  # alive from the start
                parser.implicit.setdefault(key, 0)
                nbytes, stream_of = None, "compute"
            else:
                nbytes, _, stream_of = life
            if op == "free":
                stream = stream_of  # a free goes to the allocation stream
        explicit = nbytes is not None  # (None: the implicit size, known after pass 1)
    if is_comm:  # (the checker's check_comm)
        if g is None:
            g = parser.groups[group] = {"backend": "nccl", "line": parser.lineno, "ranks": set(),
                                        "lists": []}
        ranks = g["ranks"]
        ranks.add(r)
        nbytes = None if obj.nbytes is UNSET else obj.nbytes
        if "cost" in g and obj.dur is UNSET:  # a declared group: its cost model times the op
            dur = None
        if peer is not None:
            ranks.add(peer)
        if root is not None:  # (check_rooted: the root is of the group)
            ranks.add(root)
        handle = None if obj.handle is UNSET else obj.handle
        if handle is not None:
            parser.handles[(r, handle)] = parser.lineno
    if pending is not None and explicit:
        rd = _resolved(parser, reads, r, rank, pending, s is None) if reads else ()
        wr = rd if writes is reads else \
            _resolved(parser, writes, r, rank, pending, s is None) if writes else ()
        return _line(parser, op, r, host, stream, name, dur_c, dur is None, step, rd, wr, event,
                     peer, group, handle, nbytes, blocking, buffer, target, batch, site, t, label,
                     inferred, result, root, any_source)
    if dur is _C_DUR:
        dur = PyFloat_FromDouble(dur_c)
    spec = {"op": op, "rank": r, "host": host, "stream": stream, "name": name, "dur": dur,
            "step": step}
    if event is not None:
        spec["event"] = event
    if has_label:
        spec["label"] = label
    if is_wait:
        spec["handle"] = handle
        spec["target"] = target
        spec["blocking"] = blocking
        if has_inferred:
            spec["inferred"] = inferred
    if is_query:
        spec["handle"] = handle
        spec["target"] = target
        if result is not None:
            spec["result"] = result
    if site is not None:
        spec["site"] = site
    if t is not None:
        spec["t"] = t
    if buffer is not None:
        spec["buffer"] = buffer
        spec["nbytes"] = nbytes
    if is_comm:
        spec["group"] = group
        spec["nbytes"] = nbytes
        if op in _COLLECTIVE_OPS:
            if reads is writes:  # (in place)
                spec["reads"] = spec["writes"] = _refs(parser, reads, r, rank) if reads else []
            else:
                spec["reads"] = _refs(parser, reads, r, rank) if reads else []
                spec["writes"] = _refs(parser, writes, r, rank) if writes else []
        elif op in _ROOTED_OPS:
            if op != "barrier":
                spec["root"] = root
                if op == "reduce":  # (its tensors read on every rank, written on the root)
                    refs = _refs(parser, reads, r, rank) if reads else []
                    spec["reads"], spec["writes"] = refs, refs if rank == <long>root else []
                else:
                    spec["reads"] = _refs(parser, reads, r, rank) if reads else []
                    spec["writes"] = _refs(parser, writes, r, rank) if writes else []
        else:
            spec["peer"] = peer
            if reads is not None:
                spec["reads"] = _refs(parser, reads, r, rank) if reads else []
            else:
                spec["writes"] = _refs(parser, writes, r, rank) if writes else []
            spec["batch"] = batch
            if has_any_source:
                spec["any_source"] = any_source
        spec["handle"] = handle
    elif reads is not None:
        spec["reads"] = _refs(parser, reads, r, rank) if reads else []
        spec["writes"] = _refs(parser, writes, r, rank) if writes else []
    return spec


cdef tuple _comm(_State parser, _Fields obj, op):
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


cdef long _ref_quotes(_State parser, list items, r):
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
        offset = x.offset
        if offset is UNSET:
            offset = 0
        else:
            q += 2
        q += 2 * ((x.nbytes is not UNSET) + (x.sizes is not UNSET) + (x.strides is not UNSET) +
                  (x.itemsize is not UNSET))
        hull = _strided_hull(x, offset)  # (as given, or a strided ref's hull)
        if hull is None:
            return -1  # (a strided ref the checker's ``strided`` refuses)
        offset, nbytes = <tuple>hull
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


cdef list _refs(_State parser, names, r, long rank):
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


def second_pass(parser, list raw):
    """The reader's pass 2 (streamsim.oplog.read._Parser.parse, its loop over ``build``): each
    of pass 1's specs in ``raw``, ``(lineno, spec)``, becomes its Line (:func:`_build`), its
    row the one :func:`first_pass` reserved for it; the rows pass 1 filled keep their refs, but
    for a Ref that :func:`_settle` replaced. Returns the log's lines as rows
    (``_lines.Rows``, frozen; ``raw`` emptied): a row is 96 bytes, where a Line and its own
    objects were ~270, and no Line is kept."""
    cdef Py_ssize_t k, n = len(raw)
    _, replace, rows_, spec_rows = parser.settled
    cdef Rows rows = <Rows>rows_
    rows.replace_refs(replace)
    for k in range(n):
        lineno, spec = <tuple>raw[k]
        raw[k] = None  # (the spec goes before its Line is made: the memory peak)
        parser.lineno = lineno
        rows.put(<Py_ssize_t>spec_rows[k], _build(parser, lineno, spec))
    if rows.n:
        parser.lineno = rows.rows[rows.n - 1].lineno
    parser.settled = None
    del raw[:]
    rows.freeze()
    return rows


cdef object _build(parser, object lineno, dict spec):
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
    if spec.keys() <= _FAST_KEYS:
        return Line(lineno, op, parser.path, spec["rank"], spec["host"], spec["stream"],
                    spec["name"], spec["dur"], spec["step"], spec.get("reads", ()),
                    spec.get("writes", ()), spec.get("event"), site=spec.get("site"),
                    t=spec.get("t"))
    line = Line(lineno=lineno, path=parser.path, **spec)
    if line.rare is not None:  # (equal ones: one tuple, as the reference's build)
        line.rare = parser.rares.setdefault(line.rare, line.rare)
    return line


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
                ref = interned[key] = _ref_of(rank, buf, 0, size, None, _FULL)
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
            ref = interned[key] = _ref_of(r.rank, r.buffer, r.offset, n, r.pattern, r.window)
        out.append(ref)
    return tuple(out)
