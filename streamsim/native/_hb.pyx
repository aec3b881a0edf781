# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled HB pass: :func:`streamsim.analysis.hb.hb_pass` (without kept clocks), in Cython.

The same algorithm as the pure-Python pass, step for step and in the same order (so the same
hazards, ranges, modes and manifest flags, and the same issue positions): the reference and its
comments are in streamsim/analysis/hb.py, which this file follows block by block. What differs is
only how the state is held: per-op fields read once into C arrays (index, issuer, previous op of
its agent, free or not), the walk's flags in C byte arrays, and FastTrack's segments and view
states as extension types, a plain segment's last write and reads since it as C ints in the
segment itself (``Seg``; Mark objects only in a mixed segment's lists and a freed storage's
state), so that the hot loop reads C fields instead of Python attributes, tuple items and dicts.
Clocks are dense where the trace has few agents (at most
``DENSE_MAX_AGENTS``): C vectors indexed by agent number, so that a copy is a memcpy and a join a
loop of maxima over a C array (a model's trace has tens of agents and full clocks); with more
agents they stay Python dicts ({agent: epoch}), sparse as in the reference. Both forms hold the
same values (a dict's missing agent is a vector's zero) and take the same branches.

``hb_rows`` returns None, having changed nothing, when the reference must run instead: an op kind
outside ``covered``, an op whose agent is not among ``trace.agents`` (the reference restarts
knowing every agent), or an ordering error (a cycle, an op out of program order), which the
reference words. Tests: tests/native (byte-identical reports on both paths).
"""
cimport cython
from bisect import bisect_right

from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject
from libc.limits cimport INT_MAX
from libc.stdlib cimport qsort
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy, memset

from streamsim.native._addrmap cimport AddrMap, addrmap_free, addrmap_get, addrmap_init, addrmap_put
from streamsim.native._cols cimport OpCols, OPCOLS, col_kind, col_nacc, col_acc, col_accesses
from cpython.pycapsule cimport PyCapsule_GetPointer
from streamsim.native._slots cimport (Py_TYPE, slot, slot_offset, op_offsets, N_FIELDS, F_ID,
    F_AGENT, F_INDEX, F_KIND, F_ACCESSES, F_ISSUER, F_AFTER, F_JOINS, F_LINE, hazard_offsets,
    check_generic_alloc, hazard_record, N_HAZARD_FIELDS, IdInts, ids_init, ids_clear, id_int,
    same_int)
from streamsim.strided import block_hits, covers
from streamsim.trace import HOST, READ, WRITE, Access, Op, View

# The fields the pass reads of every op and access, read from their slots (streamsim/native/
# _slots.pxd): hb_rows checks once, in its first scan, that every op is an Op with these slots
# set and its after, joins and accesses tuples, and every access an Access of a View, else it
# leaves the trace to the reference; the walk then reads them without a check.
cdef PyTypeObject *OP_T = <PyTypeObject *>Op
cdef PyTypeObject *ACCESS_T = <PyTypeObject *>Access
cdef PyTypeObject *VIEW_T = <PyTypeObject *>View
cdef Py_ssize_t OFF[<int>N_FIELDS]  # the op slots by F_X (streamsim/native/_slots.pxd)
op_offsets(Op, OFF)
cdef Py_ssize_t A_VIEW = slot_offset(Access, "view")
cdef Py_ssize_t A_MODE = slot_offset(Access, "mode")
cdef Py_ssize_t V_RANK = slot_offset(View, "rank")
cdef Py_ssize_t V_BUFFER = slot_offset(View, "buffer")
cdef Py_ssize_t V_OFFSET = slot_offset(View, "offset")
cdef Py_ssize_t V_NBYTES = slot_offset(View, "nbytes")
cdef Py_ssize_t V_PATTERN = slot_offset(View, "pattern")


cdef inline object _v(object v, Py_ssize_t offset):
    """Field ``offset`` of View ``v`` (exactly a View: _readable checks each access's), read from
    its slot; AttributeError for one never set, as reading the attribute would raise."""
    cdef PyObject *x = slot(<PyObject *>v, offset)
    if x == NULL:
        raise AttributeError("a View field is not set")
    return <object>x


cdef inline bint _is_tuple(PyObject *o) noexcept:
    return o != NULL and Py_TYPE(o) == <PyTypeObject *>tuple


cdef extern from "Python.h":
    Py_ssize_t _tuple_size "PyTuple_GET_SIZE" (PyObject *t) noexcept
    PyObject *_tuple_item "PyTuple_GET_ITEM" (PyObject *t, Py_ssize_t i) noexcept


cdef inline Py_ssize_t _ntuple(PyObject *t) noexcept:
    """The length of tuple ``t`` (checked a tuple by _readable), without a reference taken."""
    return _tuple_size(t)


cdef inline Py_ssize_t _njoins(PyObject **joins, long oid) noexcept:
    """How many ops op ``oid`` joins: ``joins`` its tuple of them an op, or NULL where no op
    joins any (a run's columns without joins: ``OpCols.joins``)."""
    return 0 if joins == NULL else _tuple_size(joins[oid])


cdef bint _readable(PyObject *p) noexcept:
    """Whether op ``p`` can be read from its slots by the pass (see above)."""
    if Py_TYPE(p) != OP_T or slot(p, OFF[F_ID]) == NULL or slot(p, OFF[F_AGENT]) == NULL or \
            slot(p, OFF[F_INDEX]) == NULL or slot(p, OFF[F_KIND]) == NULL or \
            slot(p, OFF[F_ISSUER]) == NULL or slot(p, OFF[F_LINE]) == NULL or \
            not _is_tuple(slot(p, OFF[F_AFTER])) or not _is_tuple(slot(p, OFF[F_JOINS])):
        return False
    return _readable_accesses(slot(p, OFF[F_ACCESSES]))


cdef bint _readable_accesses(PyObject *accs) noexcept:
    """Whether an op's accesses can be read from their slots: a tuple of ``Access`` objects,
    each of a ``View``."""
    if not _is_tuple(accs):
        return False
    for a in <tuple>accs:
        if not _readable_access(<PyObject *>a):
            return False
    return True


cdef bint _readable_col(OpCols *c, long oid) noexcept:
    """:func:`_readable_accesses` of op ``oid`` of a run's columns (its ints)."""
    cdef int k
    for k in range(col_nacc(c, oid)):
        if not _readable_access(col_acc(c, oid, k)):
            return False
    return True


cdef inline bint _readable_access(PyObject *acc) noexcept:
    """Whether ``acc`` is an ``Access`` (exactly) whose mode is set, of a ``View`` (exactly)."""
    if Py_TYPE(acc) != ACCESS_T or slot(acc, A_MODE) == NULL:
        return False
    cdef PyObject *view = slot(acc, A_VIEW)
    return view != NULL and Py_TYPE(view) == VIEW_T

# A byte position: offsets and sizes are at most 2**63 - 1 (docs/oplog.md), so a view's end fits;
# a position outside [0, 2**64) raises OverflowError, and the caller runs the reference instead.
ctypedef unsigned long long pos_t

# Traces with at most this many agents keep their clocks dense (C vectors indexed by agent
# number); traces with more keep them as sparse dicts, as the reference does. A dense copy costs
# 8 bytes an agent whatever the clock knows, so with 10,000 agents (benchmarks/agents.py) a copy
# would be 80 KB where the dict holds a few entries; with tens of agents (a model's trace: 40,
# clocks full) a copy is a memcpy and a join a loop over a C array instead of dict work.
# A module global so that tests can force either form (tests/native/test_differential.py).
DENSE_MAX_AGENTS = 256
# Copies are carved from blocks of this many clocks (freed together when the pass ends).
DEF BLOCK_CLOCKS = 1024


ctypedef int epoch_t  # a dense clock's entry: an epoch, an op's index + 1 (ops fit a C int)


cdef struct DHist:
    # One agent's dense copies (the dict form's hist_e and hist_c): n copies, the epoch from
    # which each holds (ascending), its tag (the agent's generation) and the copy itself.
    long n
    long cap
    long *e
    long *tag
    epoch_t **c


cdef class Mark:
    """Who accessed: (op, agent, epoch), as the reference's mark tuple."""
    cdef public long op
    cdef public long agent
    cdef public long epoch


cdef Mark _mark(long op, long agent, long epoch):
    cdef Mark m = Mark.__new__(Mark)
    m.op = op
    m.agent = agent
    m.epoch = epoch
    return m


cdef inline Mark _mark_once(object rec, long op, long agent, long epoch):
    """``rec``, an op's Mark made already, else a new one: made only where a mixed segment or a
    freed storage keeps it (a plain segment keeps its marks as ints: ``Seg``)."""
    return _mark(op, agent, epoch) if rec is None else <Mark>rec


DEF NREAD = 6  # readers a segment keeps in its own fields (the rest: Seg.more)


@cython.no_gc  # (its fields never lead back to it: no reference cycle to collect)
cdef class Seg:
    """FastTrack's state of bytes [lo, hi) of a storage (the reference's _Segment); ``live``
    False: split or replaced (the reference's ``lo = None``).

    The last write and the reads since it (the reference's marks: op, agent, epoch) are C
    ints in the segment itself, not a Mark object an access and a dict of readers: a read
    after a write made a dict, and every access a Mark, which the walk then reached through
    a pointer each. The readers keep the reference's dict order (a reader that reads again
    keeps its place): the first NREAD in ``rop``/``rag``/``rep``, the rest in ``more``
    (agent -> (op, epoch)), which is used only once those are full."""
    cdef pos_t lo
    cdef pos_t hi
    cdef bint live
    cdef int wop  # the last write's op (-1: none), agent and epoch
    cdef int wag
    cdef int wep
    cdef int nr  # readers in place
    cdef int rop[NREAD]
    cdef int rag[NREAD]
    cdef int rep[NREAD]
    cdef object more  # dict {agent: (op, epoch)} of the readers past NREAD, or None
    cdef object mixed  # Mixed: a strided access touched it (its state is there), or None


cdef Seg _seg_empty(pos_t lo, pos_t hi):
    """A segment no access has touched."""
    cdef Seg s = Seg.__new__(Seg)
    s.lo = lo
    s.hi = hi
    s.live = True
    s.wop = -1
    return s


cdef Seg _seg_written(pos_t lo, pos_t hi, int op, int agent, int epoch):
    """A segment whose last access is op's write (no read since)."""
    cdef Seg s = _seg_empty(lo, hi)
    s.wop, s.wag, s.wep = op, agent, epoch
    return s


cdef Seg _seg_mixed(pos_t lo, pos_t hi, Mixed m):
    """A mixed segment: its state is ``m``."""
    cdef Seg s = _seg_empty(lo, hi)
    s.mixed = m
    return s


cdef Seg _seg_copy(pos_t lo, pos_t hi, Seg o):
    """Bytes [lo, hi) of ``o``, with a state of their own equal to its (a split)."""
    cdef Seg s = _seg_empty(lo, hi)
    s.wop, s.wag, s.wep = o.wop, o.wag, o.wep
    s.nr = o.nr
    memcpy(s.rop, o.rop, sizeof(o.rop))
    memcpy(s.rag, o.rag, sizeof(o.rag))
    memcpy(s.rep, o.rep, sizeof(o.rep))
    if o.more is not None:
        s.more = dict(<dict>o.more)
    s.mixed = _mixed_copy(o.mixed)
    return s


cdef inline void _read_by(Seg s, int op, int agent, int epoch) except *:
    """The reference's ``reads[agent] = mark``: in place where the agent read since the last
    write (its place kept, as a dict keeps a key's) or where there is room, else in ``more``."""
    cdef int k
    for k in range(s.nr):
        if s.rag[k] == agent:
            s.rop[k] = op
            s.rep[k] = epoch
            return
    if s.nr < NREAD:  # (``more`` is None until these are full)
        s.rop[s.nr] = op
        s.rag[s.nr] = agent
        s.rep[s.nr] = epoch
        s.nr += 1
        return
    if s.more is None:
        s.more = {}
    (<dict>s.more)[agent] = (op, epoch)


cdef list _reader_marks(Seg s):
    """The readers since the last write as Marks, in the reference's dict order."""
    cdef int k
    cdef list out = [_mark(s.rop[k], s.rag[k], s.rep[k]) for k in range(s.nr)]
    if s.more is not None:
        for ag, pair in (<dict>s.more).items():
            out.append(_mark((<tuple>pair)[0], ag, (<tuple>pair)[1]))
    return out


@cython.no_gc  # (its fields never lead back to it: no reference cycle to collect)
cdef class Mixed:
    """The state of a mixed segment (the reference's _Mixed): ``writes`` and ``reads``, lists of
    (Mark, view) in issue order, view None for a plain access (it covered the segment)."""
    cdef list writes
    cdef list reads

    cdef Mixed copy(self):
        return _mixed(list(self.writes), list(self.reads))


cdef Mixed _mixed(list writes, list reads):
    cdef Mixed m = Mixed.__new__(Mixed)
    m.writes = writes
    m.reads = reads
    return m


cdef inline object _mixed_copy(object m):
    """A split segment's copy of its mixed state (the reference's ``s.mixed and
    s.mixed.copy()``)."""
    return None if m is None else (<Mixed>m).copy()


cdef bint _same_view(object a, object b) except -1:
    """``a == b``, ``a`` None or a View, ``b`` a View: the dataclass's ``__eq__`` (its fields
    in order) read from the slots where both are exactly Views, without a Python call (a
    segment's mixed entries are compared with each access to it: 3,388,502 calls, 1.35 s, on a
    20,000-line log of many strided views of few buffers)."""
    if a is b:
        return True
    if a is None:
        return False
    if type(a) is not View or type(b) is not View:
        return a == b
    return (_v(a, V_RANK) == _v(b, V_RANK) and _v(a, V_BUFFER) == _v(b, V_BUFFER) and
            _v(a, V_OFFSET) == _v(b, V_OFFSET) and _v(a, V_NBYTES) == _v(b, V_NBYTES) and
            _v(a, V_PATTERN) == _v(b, V_PATTERN))


cdef list _kept(list entries, object v, object pat, pos_t lo, pos_t hi, long agent,
                int *cover):
    """The reference's ``[e for e in entries if not _covered(e[1], v, lo, hi)]`` (``agent`` >= 0:
    only that agent's entries may go, the rest are kept; ``pat``: ``v``'s pattern, None for a
    plain view, which covers every entry): the same list where none goes (a segment read
    through many views keeps every one that covers no other, and each read rebuilt the whole
    list); ``cover``: whether strided ``v`` covers the segment's bytes that an entry of view
    None holds, -1 until asked (``covers``, once a call)."""
    cdef Py_ssize_t i, n = len(entries)
    cdef list out = None
    cdef bint gone
    for i in range(n):
        e = entries[i]
        gone = False
        if agent < 0 or (<Mark>(<tuple>e)[0]).agent == agent:
            ev = (<tuple>e)[1]
            if pat is None:
                gone = True
            elif ev is None:
                if cover[0] < 0:
                    cover[0] = covers(pat, v.offset, v.nbytes, lo, hi)
                gone = cover[0] == 1
            else:
                gone = _same_view(ev, v)
        if gone:
            if out is None:
                out = entries[:i]
        elif out is not None:
            out.append(e)
    return entries if out is None else out


@cython.no_gc  # (its fields never lead back to it: no reference cycle to collect)
cdef class ViewState:
    """What the pass keeps of one view (the reference's _ViewState)."""
    cdef Seg seg
    cdef pos_t lo
    cdef pos_t hi
    cdef list segs
    cdef object rank
    cdef object buffer
    cdef object view
    cdef object touched  # dict or None
    cdef bint strided  # a view with a pattern: every segment of its hull mixed
    cdef long pid  # a strided view's pattern as a number (_Pass.pats; equal patterns, one)
    cdef int store  # its storage's number (_Pass.store_keys): rank and buffer, as a number


cdef enum:  # a found race's kind, as its place in the pass's ``names`` (RAW, WAR, WAW, UAF)
    K_RAW, K_WAR, K_WAW, K_UAF


cdef inline size_t _found_hash(long f, long s, int kind, int store) noexcept nogil:
    cdef unsigned long long h = <unsigned long long>f * 0x9E3779B97F4A7C15ULL
    h ^= <unsigned long long>s * 0xC2B2AE3D27D4EB4FULL
    h ^= (<unsigned long long>store * 4 + <unsigned long long>kind) * 0x165667B19E3779F9ULL
    return <size_t>(h ^ (h >> 29))


cdef struct FoundSlot:  # a row's key where the table looks it up (one cache line a probe)
    int first
    int second
    int store
    int row  # -1: an empty slot
    unsigned char kind


cdef object _hazard_of(tuple r, type cls, Py_ssize_t *off, dict ranges, IdInts *ids):
    """The hazard of a row (``_FoundTable.rows``'; ``ranges``: as ``hazard_record``'s; its two
    ops' ints: ``ids``')."""
    return hazard_record(cls, off, ranges, r[2], r[3], r[4], r[5], r[6], same_int(ids, r[7]),
                         same_int(ids, r[8]), r[9], r[10], r[11])


@cython.final
cdef class _FoundTable:
    """The hazards being gathered (the reference's ``found``: (first, second, kind, rank,
    buffer) -> its _Found), as rows of C arrays in an open-addressing table: the first and
    second op, the kind (K_*), the storage (rank, buffer) as its number in the pass
    (``ViewState.store``: equal (rank, buffer) pairs, one number, as the reference's dict
    compares them), the range, and whether it struck; the modes, only where the rows are made,
    in a list (two a row). A dict of 5-tuples and an object a row took a fifth of a re-run's
    count on the 200,000-line random program (59,912 hazards: 0.087 -> 0.070 s)."""
    cdef Py_ssize_t n, cap
    cdef long *first
    cdef long *second
    cdef int *store
    cdef unsigned char *kind
    cdef pos_t *lo
    cdef pos_t *hi
    cdef unsigned char *manifest
    cdef list modes
    cdef FoundSlot *slots  # each row's key by hash; ``mask + 1`` of them, at most half full
    cdef size_t mask

    def __cinit__(self):
        self.modes = []

    def __dealloc__(self):
        PyMem_Free(self.first)
        PyMem_Free(self.second)
        PyMem_Free(self.store)
        PyMem_Free(self.kind)
        PyMem_Free(self.lo)
        PyMem_Free(self.hi)
        PyMem_Free(self.manifest)
        PyMem_Free(self.slots)

    cdef Py_ssize_t find(self, long f, long s, int kind, int store) noexcept:
        """The row of (f, s, kind, store); -1: none."""
        if self.n == 0:
            return -1
        cdef size_t j = _found_hash(f, s, kind, store) & self.mask
        cdef FoundSlot *e
        while True:
            e = &self.slots[j]
            if e.row < 0:
                return -1
            if e.first == f and e.second == s and e.kind == kind and e.store == store:
                return e.row
            j = (j + 1) & self.mask

    cdef Py_ssize_t add(self, long f, long s, int kind, int store, pos_t lo, pos_t hi) except -1:
        """A new row (not in the table: :meth:`find`), not manifest; its number."""
        cdef Py_ssize_t x = self.n, k
        if x == self.cap:
            self.grow()
        self.first[x], self.second[x], self.kind[x], self.store[x] = f, s, kind, store
        self.lo[x], self.hi[x], self.manifest[x] = lo, hi, 0
        self.n = x + 1
        if 2 * self.n > <Py_ssize_t>(self.mask + 1):
            self.mask = 2 * self.mask + 1
            self.new_slots()
            for k in range(self.n):
                self.put(k)
        else:
            self.put(x)
        return x

    cdef int new_slots(self) except -1:
        """``mask + 1`` empty slots, in place of the table's."""
        PyMem_Free(self.slots)
        self.slots = <FoundSlot *>PyMem_Malloc((self.mask + 1) * sizeof(FoundSlot))
        if self.slots == NULL:
            raise MemoryError()
        memset(self.slots, 0xff, (self.mask + 1) * sizeof(FoundSlot))  # (row -1: empty)
        return 0

    cdef void put(self, Py_ssize_t x) noexcept:
        cdef size_t j = _found_hash(self.first[x], self.second[x], self.kind[x],
                                    self.store[x]) & self.mask
        while self.slots[j].row >= 0:
            j = (j + 1) & self.mask
        cdef FoundSlot *e = &self.slots[j]
        e.first, e.second, e.store, e.kind = <int>self.first[x], <int>self.second[x], \
            self.store[x], self.kind[x]
        e.row = <int>x

    cdef int grow(self) except -1:
        cdef Py_ssize_t cap = 1024 if self.cap == 0 else 2 * self.cap
        if self.slots == NULL:
            self.mask = 2047
            self.new_slots()
        self.first = <long *>_grown(self.first, cap * sizeof(long))
        self.second = <long *>_grown(self.second, cap * sizeof(long))
        self.store = <int *>_grown(self.store, cap * sizeof(int))
        self.kind = <unsigned char *>_grown(self.kind, cap)
        self.lo = <pos_t *>_grown(self.lo, cap * sizeof(pos_t))
        self.hi = <pos_t *>_grown(self.hi, cap * sizeof(pos_t))
        self.manifest = <unsigned char *>_grown(self.manifest, cap)
        self.cap = cap
        return 0

    cdef list rows(self, const int *position, tuple kinds, list stores, object hazard=None):
        """The rows as the reference makes and sorts them: (position of second, position of
        first, kind, rank, buffer, lo, hi, first, second, first's mode, second's mode,
        manifest), ``kinds`` the four names by K_*, ``stores`` each storage's (rank, buffer).
        Sorted in C by the two positions (an op's position is its own: only the rows of one
        pair of ops tie), each run of ties then by Python's sort of those rows, so that the
        order is ``sorted(rows)``'s, comparisons and all. With ``hazard`` (the findings'
        ``Hazard`` class), in that order the hazard of each row instead, no fix, made by its
        slots (as :func:`hazards` makes them of the rows): no row made but those that tie."""
        cdef Py_ssize_t n = self.n, i, j, x
        cdef Py_ssize_t off[<int>N_HAZARD_FIELDS]
        if hazard is not None:
            hazard_offsets(<type>hazard, off)
            check_generic_alloc(<type>hazard)
        # (each row as its (second, first) positions in one key, both ints below 2**31, and
        # its number: the walk's own KeyId and _by_key)
        cdef KeyId *order = <KeyId *>PyMem_Malloc(max(n, 1) * sizeof(KeyId))
        if order == NULL:
            raise MemoryError()
        cdef list out = []
        cdef list tie
        cdef dict ranges = {}  # (hazard_record)
        cdef IdInts ids  # (the hazards' ops' ints)
        ids_init(&ids)
        try:
            for i in range(n):
                order[i].key = (<long>position[self.second[i]] << 32) | \
                    <long><unsigned int>position[self.first[i]]
                order[i].id = i
            qsort(order, n, sizeof(KeyId), _by_key)
            i = 0
            while i < n:
                j = i + 1
                while j < n and order[j].key == order[i].key:
                    j += 1
                if j - i == 1 and hazard is not None:
                    out.append(self.hazard(order[i].id, kinds, stores, <type>hazard, off,
                                           ranges, &ids))
                elif j - i == 1:
                    out.append(self.row(order[i].id, position, kinds, stores))
                else:
                    tie = [self.row(order[x].id, position, kinds, stores) for x in range(i, j)]
                    tie.sort()
                    if hazard is not None:
                        tie = [_hazard_of(<tuple>r, <type>hazard, off, ranges, &ids) for r in tie]
                    out.extend(tie)
                i = j
        finally:
            PyMem_Free(order)
            ids_clear(&ids)
        return out

    cdef object hazard(self, Py_ssize_t x, tuple kinds, list stores, type cls,
                       Py_ssize_t *off, dict ranges, IdInts *ids):
        """Row ``x``'s hazard (``cls``, its slots at ``off``; ``ranges``: as
        ``hazard_record``'s; its two ops' ints: ``ids``'), no fix."""
        cdef tuple st = <tuple>stores[self.store[x]]
        return hazard_record(cls, off, ranges, kinds[self.kind[x]], st[0], st[1],
                             self.lo[x], self.hi[x], id_int(ids, self.first[x]),
                             id_int(ids, self.second[x]),
                             self.modes[2 * x], self.modes[2 * x + 1], self.manifest[x] != 0)

    cdef tuple row(self, Py_ssize_t x, const int *position, tuple kinds, list stores):
        cdef tuple st = <tuple>stores[self.store[x]]
        return (position[self.second[x]], position[self.first[x]], kinds[self.kind[x]], st[0],
                st[1], self.lo[x], self.hi[x], self.first[x], self.second[x],
                self.modes[2 * x], self.modes[2 * x + 1], self.manifest[x] != 0)


cdef void *_grown(void *p, size_t size) except NULL:
    cdef void *q = PyMem_Realloc(p, size)
    if q == NULL:
        raise MemoryError()
    return q


cdef Seg _DEAD = Seg.__new__(Seg)  # live False
_DEAD.wop = -1
cdef Py_ssize_t MEMO_MAX = 65536  # answers a pass remembers of each kind (then it starts anew)


cdef class _Pass:
    """One run of the pass: its state, as the reference's closure variables."""
    cdef list ops
    cdef long n
    cdef long na
    cdef int *index
    cdef int *issuer  # -1: none
    cdef int *prev_on
    cdef int *agent_of
    cdef long *partner
    cdef long *gen
    cdef long *hist_g
    cdef int *partner_of
    cdef char *is_free
    cdef char *may_skip
    cdef char *is_host  # per op: a host action
    cdef char *has_line  # per op: its op-log line is not None
    cdef int *line  # per op: its op-log line (0 when None)
    cdef int *in_order  # op ids in trace order
    cdef unsigned char *ended
    cdef unsigned char *started
    cdef unsigned char *pending
    # per op, borrowed from it (``ops`` holds the ops for the pass, and an op's fields never
    # change): its joins and accesses tuples, so that the walk reads them without touching
    # the op object again (a cache miss per op at 400,000 ops: a fifth of the walk)
    cdef PyObject **joins
    cdef PyObject **accs  # (NULL for a run's columns: their ints, read with _nacc and _acc)
    # per op, its after edges as C ints: ``aft_at[op]`` its place in ``aft_pool``, which holds
    # how many, then each op id (place 0: none); a run's columns' own (their ``aft_at`` in
    # their ``acc_pool``), else made by the first scan of the ``Op`` s' tuples, whose items the
    # walk read as Python ints two or three times an edge (in the waiting test, the join, the
    # blocker): a model's trace of 269,072 ops has 257,000 of them
    cdef int *aft_at
    cdef int *aft_pool
    # index, issuer, agent_of, after edges and joins are the arrays of the run's columns
    # (hb_columns: the same values, by op id), not the pass's own: 28 bytes an op not copied
    cdef bint borrowed
    cdef long *key  # per op: its issue key (trace.issue_keys)
    cdef int *walk  # the op ids in issue order, then ~id of each op that joins (hb_rows)
    cdef int *stk  # the walk's stack of nodes (an op id, or ~id: its end), ``sp`` deep: a
    cdef long sp  # node is on it once at a time (``pending``), so it is at most the walk long
    cdef int *posn  # op id -> its position in the walk (a list only for the rows: hb_rows)
    cdef list clocks
    cdef list seen
    cdef list hist_e
    cdef list hist_c
    cdef list end_of
    cdef _FoundTable found
    cdef dict stores  # (rank, buffer) -> (segs, touched, its number in store_keys)
    cdef list store_keys  # each storage's (rank, buffer), by its number (ViewState.store)
    cdef dict plain  # (rank, buffer, offset, nbytes) of a plain view -> its place in ``views``
    # What a mixed segment asks of strided views, remembered by their patterns' numbers (pats:
    # pattern -> number) and their offsets' differences, as strided._hits_from is: the answer
    # does not move with the views. A segment read through many views compares each access with
    # every entry (20,000 lines of 64 column views of each of 200 buffers: 2,931,639 overlaps
    # and 4,309,894 block_hits, each hashing its pattern for the lru_cache behind it).
    cdef dict pats
    cdef dict hit_memo  # (pid, lo - offset, hi - offset) -> block_hits
    cdef dict overlap_memo  # (pid, hull, pid, hull, offset - offset) -> View.overlaps
    cdef AddrMap by_agent  # an agent object's address -> its number in trace.agents
    cdef AddrMap by_view  # a view object's address -> its ViewState's place in ``views``
    cdef list views  # the ViewStates, in the order their views were first accessed
    cdef set freed
    cdef object RAW, WAR, WAW, UAF, READ, WRITE
    cdef bint only_count  # hb_rows(only_count=True): the rows are counted, never made
    cdef bint rows_only  # hb_rows(rows_only=True): the rows alone, no position or agent_of
    cdef object hazard  # hb_rows(hazard=Hazard): rows_only's hazards made, not its rows
    cdef OpCols *cols  # a run held as columns (hb_columns): its ops' accesses and times
    cdef long njoin  # ops whose end joins something (their ends end the walk)
    # The dense form (dense True; else these stay NULL): agent a's clock at dclk + a * na, the
    # copies it has seen at dseen[a * na + o] (the dict form's seen[a][o]; -1, never a tag: none),
    # its copies in dh[a], each op's exact end clock (the dict form's end_of, its tag -2 - op) in
    # dend (NULL: none), and the blocks the copies are carved from.
    cdef bint dense
    cdef epoch_t *dclk
    cdef long *dseen
    cdef DHist *dh
    cdef epoch_t **dend
    cdef epoch_t *zero
    cdef epoch_t **blocks
    cdef long nblocks
    cdef long capblocks
    cdef epoch_t *cur
    cdef long left

    def __dealloc__(self):
        addrmap_free(&self.by_agent)
        addrmap_free(&self.by_view)
        self.free_walk()
        PyMem_Free(self.partner)
        PyMem_Free(self.gen)
        PyMem_Free(self.hist_g)
        PyMem_Free(self.may_skip)
        PyMem_Free(self.posn)

    cdef void release_walk(self) noexcept:
        """Free what only the walk reads, once it is over and before the hazards are made of
        the found table and the positions (``posn``), which it keeps: the per-op arrays, the
        clocks and the views' state (of 2,000,000 ops, about 100 MB)."""
        self.free_walk()
        self.clocks = self.seen = self.hist_e = self.hist_c = self.end_of = None
        self.views = None
        self.stores = self.plain = self.pats = self.hit_memo = self.overlap_memo = None
        self.freed = None

    cdef void free_walk(self) noexcept:
        """Free the walk's C arrays (the pass's own, not the columns' it borrowed) and the
        dense clocks, each left NULL: :meth:`release_walk`'s and the deallocation's."""
        cdef long k
        PyMem_Free(self.index)  # (the pass's own, a run's columns' too: they hold none)
        if not self.borrowed:
            PyMem_Free(self.issuer); PyMem_Free(self.agent_of)
            PyMem_Free(self.aft_at); PyMem_Free(self.aft_pool)
            PyMem_Free(self.joins); PyMem_Free(self.accs)
        self.index = self.issuer = self.agent_of = NULL
        self.aft_at = self.aft_pool = NULL
        self.joins = self.accs = NULL
        self.borrowed = False
        PyMem_Free(self.prev_on); PyMem_Free(self.partner_of); PyMem_Free(self.is_free)
        PyMem_Free(self.is_host); PyMem_Free(self.has_line); PyMem_Free(self.line)
        PyMem_Free(self.in_order); PyMem_Free(self.ended); PyMem_Free(self.started)
        PyMem_Free(self.pending); PyMem_Free(self.key); PyMem_Free(self.walk)
        PyMem_Free(self.stk)
        self.prev_on = self.partner_of = self.line = self.in_order = NULL
        self.is_free = self.is_host = self.has_line = NULL
        self.ended = self.started = self.pending = NULL
        self.key = NULL
        self.walk = self.stk = NULL
        if self.dh:
            for k in range(self.na):
                PyMem_Free(self.dh[k].e)
                PyMem_Free(self.dh[k].tag)
                PyMem_Free(self.dh[k].c)
        PyMem_Free(self.dh)
        self.dh = NULL
        for k in range(self.nblocks):
            PyMem_Free(self.blocks[k])
        PyMem_Free(self.blocks)
        self.blocks, self.nblocks, self.capblocks = NULL, 0, 0
        PyMem_Free(self.dclk); PyMem_Free(self.dseen); PyMem_Free(self.dend)
        PyMem_Free(self.zero)
        self.dclk = self.zero = NULL
        self.dseen = NULL
        self.dend = NULL

    cdef int alloc(self, long n, long na, OpCols *cols) except -1:
        """The per-op and per-agent arrays; with ``cols``, those the columns have are theirs
        (``borrowed``)."""
        if n >= INT_MAX:  # (op ids and walk positions are C ints: the reference runs)
            raise OverflowError("more ops than a C int counts")
        cdef long m = n if n > 0 else 1
        cdef long ma = na if na > 0 else 1
        cdef long i
        cdef int *counts
        if cols != NULL:
            self.borrowed = True
            self.issuer, self.agent_of = cols.issuer, cols.agent
            self.aft_at, self.aft_pool = cols.aft_at, cols.acc_pool
            self.joins, self.accs = cols.joins, NULL
            self.index = <int *>PyMem_Calloc(m, sizeof(int))
            counts = <int *>PyMem_Calloc(ma, sizeof(int))
            if self.index == NULL or counts == NULL:
                PyMem_Free(counts)
                raise MemoryError()
            for i in range(n):  # (an op's index among its agent's ops: the columns keep none)
                self.index[i] = counts[cols.agent[i]]
                counts[cols.agent[i]] += 1
            PyMem_Free(counts)
        else:
            self.index = <int *>PyMem_Calloc(m, sizeof(int))
            self.issuer = <int *>PyMem_Calloc(m, sizeof(int))
            self.agent_of = <int *>PyMem_Calloc(m, sizeof(int))
            self.aft_at = <int *>PyMem_Calloc(m, sizeof(int))
            self.aft_pool = <int *>PyMem_Calloc(m + 1, sizeof(int))  # (grown by the scan)
            self.joins = <PyObject **>PyMem_Calloc(m, sizeof(PyObject *))
            self.accs = <PyObject **>PyMem_Calloc(m, sizeof(PyObject *))
        self.prev_on = <int *>PyMem_Calloc(m, sizeof(int))
        self.partner_of = <int *>PyMem_Calloc(m, sizeof(int))
        self.is_free = <char *>PyMem_Calloc(m, 1)
        self.is_host = <char *>PyMem_Calloc(m, 1)
        self.has_line = <char *>PyMem_Calloc(m, 1)
        self.line = <int *>PyMem_Calloc(m, sizeof(int))
        self.in_order = <int *>PyMem_Calloc(m, sizeof(int))
        self.ended = <unsigned char *>PyMem_Calloc(m, 1)
        self.started = <unsigned char *>PyMem_Calloc(m, 1)
        self.pending = <unsigned char *>PyMem_Calloc(m, 1)
        self.key = <long *>PyMem_Calloc(m, sizeof(long))
        self.partner = <long *>PyMem_Calloc(ma, sizeof(long))
        self.gen = <long *>PyMem_Calloc(ma, sizeof(long))
        self.hist_g = <long *>PyMem_Calloc(ma, sizeof(long))
        self.may_skip = <char *>PyMem_Calloc(ma, 1)
        if not (self.prev_on and self.key and
                self.partner_of and self.is_free and self.ended and self.started and
                self.pending and self.partner and self.gen and self.hist_g and self.may_skip
                and self.is_host and self.has_line and self.line and self.in_order):
            raise MemoryError()
        if not (self.index and (self.borrowed or (self.issuer and self.agent_of and self.aft_at
                                                  and self.aft_pool and self.joins
                                                  and self.accs))):
            raise MemoryError()  # (the columns' own may be NULL: a run of no op, empty lists)
        return 0

    cdef int dense_alloc(self) except -1:
        """Set up the dense form: zero clocks, nothing seen, each agent's first copy the zero
        clock with tag 0 from epoch 0 (as the dict form's [(0, {})])."""
        cdef long na = self.na
        cdef long m = na if na > 0 else 1
        cdef long k
        self.dense = True
        self.dclk = <epoch_t *>PyMem_Calloc(m * m, sizeof(epoch_t))
        self.dseen = <long *>PyMem_Calloc(m * m, sizeof(long))
        self.dh = <DHist *>PyMem_Calloc(m, sizeof(DHist))
        self.dend = <epoch_t **>PyMem_Calloc(self.n if self.n > 0 else 1, sizeof(epoch_t *))
        self.zero = <epoch_t *>PyMem_Calloc(m, sizeof(epoch_t))
        if not (self.dclk and self.dseen and self.dh and self.dend and self.zero):
            raise MemoryError()
        for k in range(m * m):
            self.dseen[k] = -1
        for k in range(na):
            self.dh[k].cap = 4
            self.dh[k].e = <long *>PyMem_Calloc(4, sizeof(long))
            self.dh[k].tag = <long *>PyMem_Calloc(4, sizeof(long))
            self.dh[k].c = <epoch_t **>PyMem_Calloc(4, sizeof(epoch_t *))
            if not (self.dh[k].e and self.dh[k].tag and self.dh[k].c):
                raise MemoryError()
            self.dh[k].n = 1
            self.dh[k].c[0] = self.zero
        return 0

    cdef epoch_t *dcopy(self, const epoch_t *src) except NULL:
        """A copy of the dense clock src, carved from the current block."""
        cdef long na = self.na
        cdef epoch_t *p
        cdef void *grown
        if self.left < na:
            if self.nblocks == self.capblocks:
                self.capblocks = 2 * self.capblocks + 8
                grown = PyMem_Realloc(self.blocks, self.capblocks * sizeof(epoch_t *))
                if not grown:
                    raise MemoryError()
                self.blocks = <epoch_t **>grown
            self.cur = <epoch_t *>PyMem_Calloc(na * BLOCK_CLOCKS, sizeof(epoch_t))
            if not self.cur:
                raise MemoryError()
            self.blocks[self.nblocks] = self.cur
            self.nblocks += 1
            self.left = na * BLOCK_CLOCKS
        p = self.cur
        self.cur += na
        self.left -= na
        memcpy(p, src, na * sizeof(epoch_t))
        return p

    cdef epoch_t *dstart(self, long r, long *tag):
        """start_copy, dense: the copy standing for op r's start clock, its tag in tag[0]."""
        cdef DHist *h = &self.dh[self.agent_of[r]]
        cdef long e = self.index[r] + 1
        cdef long k = h.n - 1
        cdef long lo, hi, mid
        if h.e[k] > e:  # bisect_right(h.e, e) - 1
            lo = 0
            hi = h.n
            while lo < hi:
                mid = (lo + hi) >> 1
                if e < h.e[mid]:
                    hi = mid
                else:
                    lo = mid + 1
            k = lo - 1
        tag[0] = h.tag[k]
        return h.c[k]

    cdef epoch_t *dend_copy(self, long r, long *tag):
        """end_copy, dense."""
        cdef epoch_t *p = self.dend[r]
        if p == NULL:
            return self.dstart(r, tag)
        tag[0] = -2 - r
        return p

    cdef void djoin(self, long b, epoch_t *C, const epoch_t *S, long tag, long r):
        """join, dense: agent b's clock C ⊔= op r's clock, whose copy is S (tagged tag)."""
        cdef long pb = self.partner[b]
        cdef long o = self.agent_of[r]
        cdef long na = self.na
        cdef bint changed = False
        cdef long i, v, p
        for i in range(na):
            if S[i] > C[i]:
                C[i] = S[i]
                if i != b and i != pb:
                    changed = True
        v = self.index[r] + 1
        if v > C[o]:
            C[o] = v
            if o != b and o != pb:
                changed = True
        p = self.partner[o]
        if p != o:
            v = self.partner_of[r]
            if v > C[p]:
                C[p] = v
                if p != b and p != pb:
                    changed = True
        if changed:
            self.gen[b] += 1
        self.dseen[b * na + o] = tag

    cdef int dnew_copy(self, long a, const epoch_t *C, long e) except -1:
        """new_copy, dense."""
        cdef DHist *h = &self.dh[a]
        cdef void *p
        if h.n == h.cap:
            h.cap *= 2
            p = PyMem_Realloc(h.e, h.cap * sizeof(long))
            if not p:
                raise MemoryError()
            h.e = <long *>p
            p = PyMem_Realloc(h.tag, h.cap * sizeof(long))
            if not p:
                raise MemoryError()
            h.tag = <long *>p
            p = PyMem_Realloc(h.c, h.cap * sizeof(epoch_t *))
            if not p:
                raise MemoryError()
            h.c = <epoch_t **>p
        h.c[h.n] = self.dcopy(C)
        h.e[h.n] = e
        h.tag[h.n] = self.gen[a]
        h.n += 1
        self.hist_g[a] = self.gen[a]
        return 0

    cdef tuple start_copy(self, long r):
        """The copy standing for op r's start clock (its agent's copy for r's epoch)."""
        cdef long o = self.agent_of[r]
        cdef list he = <list>self.hist_e[o]
        cdef long e = self.index[r] + 1
        if <long>he[len(he) - 1] <= e:
            return <tuple>(<list>self.hist_c[o])[len(he) - 1]
        return <tuple>(<list>self.hist_c[o])[bisect_right(he, e) - 1]

    cdef tuple end_copy(self, long r):
        S = self.end_of[r]
        return self.start_copy(r) if S is None else <tuple>S

    cdef void join(self, long b, dict C, tuple S, long r):
        """Agent b's clock C ⊔= op r's clock, whose copy is S."""
        cdef long pb = self.partner[b]
        cdef long o = self.agent_of[r]
        cdef bint changed = False
        cdef long i, x, v, p
        for ko, xo in (<dict>S[1]).items():
            i = ko
            x = xo
            if x > <long>C.get(ko, 0):
                C[ko] = xo
                if i != b and i != pb:
                    changed = True
        v = self.index[r] + 1
        if v > <long>C.get(o, 0):
            C[o] = v
            if o != b and o != pb:
                changed = True
        p = self.partner[o]
        if p != o:
            v = self.partner_of[r]
            if v > <long>C.get(p, 0):
                C[p] = v
                if p != b and p != pb:
                    changed = True
        if changed:
            self.gen[b] += 1
        (<dict>self.seen[b])[o] = S[0]

    cdef void new_copy(self, long a, dict C, long e):
        (<list>self.hist_e[a]).append(e)
        (<list>self.hist_c[a]).append((self.gen[a], dict(C)))
        self.hist_g[a] = self.gen[a]

    cdef report(self, long first, object fmode, long sid, object acc, object kind, pos_t lo,
                pos_t hi, ViewState ent):
        """Record the race of op sid's access acc (second) with op ``first``'s (its mark's op)
        on [lo, hi) of ``ent``'s storage (the reference's ``found`` keyed by (first, second,
        kind, rank, buffer): here a :class:`_FoundTable` row, the rank and buffer as
        ``ent.store``)."""
        cdef long fid = first
        cdef long f0 = fid, s0 = sid  # (as found: before the swap into issue order)
        cdef _FoundTable T = self.found
        cdef Py_ssize_t x
        first_mode = fmode
        if self.is_free[sid] or self.is_free[fid]:
            kind = self.UAF
        elif kind is self.WAW:
            x = T.find(fid, sid, K_RAW, ent.store)
            if x >= 0 and T.lo[x] <= lo and hi <= T.hi[x]:
                return
        smode = <object>slot(<PyObject *>acc, A_MODE)
        swap = self.key[fid] > self.key[sid]
        if swap:
            fmode, smode = smode, fmode
            fid, sid = sid, fid
            if kind is not self.UAF:
                kind = self.WAW if fmode == smode else (self.RAW if fmode == self.WRITE
                                                        else self.WAR)
        cdef int code = K_RAW if kind is self.RAW else K_WAR if kind is self.WAR else \
            K_WAW if kind is self.WAW else K_UAF
        x = T.find(fid, sid, code, ent.store)
        cdef bint fresh = x < 0
        if fresh:
            x = T.add(fid, sid, code, ent.store, lo, hi)
        else:
            if lo < T.lo[x]:
                T.lo[x] = lo
            if hi > T.hi[x]:
                T.hi[x] = hi
        # a count (only_count) reads the rows' ranges, for the WAW-within-RAW rule above, but
        # never whether a race struck: no access looked up, no window; nor can the windows
        # change a row already manifest
        if self.only_count or (not fresh and T.manifest[x]):
            return
        cdef double fs, fe, ss, se  # the first's and second's start and end (as found)
        if self.cols != NULL:
            faccs = col_accesses(self.cols, f0)
            fs, fe = self.cols.start[f0], self.cols.end[f0]
            ss, se = self.cols.start[s0], self.cols.end[s0]
        else:
            fop, op = self.ops[f0], self.ops[s0]
            faccs = fop.accesses
            fs, fe, ss, se = fop.start, fop.end, op.start, op.end
        facc = _access_of(faccs, f0, first_mode, ent.rank, ent.buffer, lo, hi)
        if swap:
            fs, fe, ss, se = ss, se, fs, fe
            facc, acc = acc, facc
        manifest = _window_at(ss, se, acc, 0) < _window_at(fs, fe, facc, 1)
        if fresh:
            T.modes.append(fmode)  # (a fresh row reaches here: its modes at 2 * x, 2 * x + 1)
            T.modes.append(smode)
            T.manifest[x] = manifest
        elif manifest:
            T.manifest[x] = 1

    cdef ViewState entry(self, object v):
        """The state of view ``v`` met for the first time (by its address): that of an equal
        plain view met before, else a new one. A model makes a View object per access (its
        Buffer's ``whole``, a slice: vllm_pp's 130,864 accesses are 26,978 distinct views);
        equal plain views are one ViewState, which keeps the segment it last found (``seg``).
        (A ViewState's ``view`` is the first of its equal views: nothing reads it.)"""
        rank, buffer, offset = _v(v, V_RANK), _v(v, V_BUFFER), _v(v, V_OFFSET)
        nbytes = _v(v, V_NBYTES)
        strided = _v(v, V_PATTERN) is not None
        if not strided:
            pk = (rank, buffer, offset, nbytes)
            got = self.plain.get(pk)
            if got is not None:
                addrmap_put(&self.by_view, <uintptr_t><PyObject *>v, <Py_ssize_t>got)
                return <ViewState>self.views[<Py_ssize_t>got]
            self.plain[pk] = len(self.views)
        sk = (rank, buffer)
        st = self.stores.get(sk)
        if st is None:
            st = self.stores[sk] = ([], {} if sk in self.freed else None,
                                    len(self.store_keys))
            self.store_keys.append(sk)
        cdef ViewState ent = ViewState.__new__(ViewState)
        ent.seg = _DEAD
        ent.lo = offset
        ent.hi = offset + nbytes
        ent.segs = <list>st[0]
        ent.touched = st[1]
        ent.store = st[2]
        ent.rank = rank
        ent.buffer = buffer
        ent.view = v
        ent.strided = strided
        if strided:
            pat = _v(v, V_PATTERN)
            got = self.pats.get(pat)
            if got is None:
                got = self.pats[pat] = len(self.pats)
            ent.pid = got
        else:
            ent.pid = -1
        addrmap_put(&self.by_view, <uintptr_t><PyObject *>v, len(self.views))
        self.views.append(ent)
        return ent

    cdef inline void against_write(self, Seg s, long op, object acc, object kind, pos_t lo,
                                   pos_t hi, ViewState ent, dict C, const epoch_t *D) except *:
        """Op ``op``'s access ``acc`` against segment ``s``'s last write (a RAW or WAW race on
        [lo, hi) where nothing orders them)."""
        if s.wop >= 0 and _cget(C, D, s.wag) < s.wep:
            self.report(s.wop, WRITE, op, acc, kind, lo, hi, ent)

    cdef void war(self, Seg s, long op, object acc, dict C, const epoch_t *D, pos_t lo,
                  pos_t hi, ViewState ent) except *:
        """Op ``op``'s write ``acc`` against the reads of segment ``s`` since its last write, in
        the reference's dict order (the reads' WAR races, on [lo, hi))."""
        cdef int k
        for k in range(s.nr):
            if _cget(C, D, s.rag[k]) < s.rep[k]:
                self.report(s.rop[k], READ, op, acc, self.WAR, lo, hi, ent)
        if s.more is not None:
            for ag, pair in (<dict>s.more).items():
                if _cget(C, D, <long>ag) < <long>(<tuple>pair)[1]:
                    self.report(<long>(<tuple>pair)[0], READ, op, acc, self.WAR, lo, hi, ent)

    cdef bint hits(self, ViewState ent, object pat, pos_t lo, pos_t hi) except -1:
        """``block_hits(pat, offset, nbytes, lo, hi)`` of strided view state ``ent`` (``pat``
        its pattern), remembered (``hit_memo``)."""
        key = (ent.pid, <long long>lo - <long long>ent.lo, <long long>hi - <long long>ent.lo)
        got = self.hit_memo.get(key)
        if got is None:
            if len(self.hit_memo) >= MEMO_MAX:
                self.hit_memo.clear()
            got = self.hit_memo[key] = block_hits(pat, ent.lo, ent.hi - ent.lo, lo, hi)
        return got is True

    cdef bint overlaps(self, object wv, object v, ViewState ent) except -1:
        """``wv.overlaps(v)``: ``wv`` a mixed entry's view (strided), ``v`` an access's view
        (``ent`` its state), remembered (``overlap_memo``) where both are exactly Views of one
        storage and strided; a plain ``v`` is ``block_hits`` of ``wv`` on its range."""
        cdef Py_ssize_t x
        cdef ViewState we
        if type(wv) is not View or type(v) is not View:
            return wv.overlaps(v)
        x = addrmap_get(&self.by_view, <uintptr_t><PyObject *>wv)
        if x < 0:
            return wv.overlaps(v)
        we = <ViewState>self.views[x]
        if we.pid < 0 or we.rank != ent.rank or we.buffer != ent.buffer:
            return wv.overlaps(v)
        if not (we.lo < ent.hi and ent.lo < we.hi) or we.hi <= we.lo or ent.hi <= ent.lo:
            return False  # (overlap's test of the hulls)
        if ent.pid < 0:  # (a plain range: overlap's block_hits of the strided one on it)
            return self.hits(we, _v(wv, V_PATTERN), ent.lo, ent.hi)
        key = (we.pid, we.hi - we.lo, ent.pid, ent.hi - ent.lo,
               <long long>we.lo - <long long>ent.lo)
        got = self.overlap_memo.get(key)
        if got is None:
            if len(self.overlap_memo) >= MEMO_MAX:
                self.overlap_memo.clear()
            got = self.overlap_memo[key] = wv.overlaps(v)
        return got is True

    cdef mixed(self, list segs, long k, long op, object acc, long a, Mark rec, dict C,
               const epoch_t *D, ViewState ent):
        """Check and record ``acc`` on segment ``segs[k]`` as a mixed segment (the reference's
        ``mixed``): a strided access, or a plain one on a segment some strided access made
        mixed (a plain access covers the whole segment)."""
        cdef Seg s = <Seg>segs[k]
        cdef pos_t lo = s.lo, hi = s.hi
        cdef Mark w, r
        cdef Mixed m
        cdef int cover = -1  # (whether the access covers a plain entry's bytes: _kept asks once)
        v = <object>slot(<PyObject *>acc, A_VIEW)
        pat = v.pattern
        if pat is not None and not self.hits(ent, pat, lo, hi):
            return  # the view has no byte here
        if s.mixed is None:  # a plain segment becomes mixed: a new one (views remember the old)
            m = _mixed([(_mark(s.wop, s.wag, s.wep), None)] if s.wop >= 0 else [],
                       [(ro, None) for ro in _reader_marks(s)])
            s.live = False
            s = _seg_mixed(lo, hi, m)
            segs[k] = s
        else:
            m = <Mixed>s.mixed
        write = <object>slot(<PyObject *>acc, A_MODE) == WRITE
        own = v if pat is not None else None
        for e in m.writes:
            w = <Mark>(<tuple>e)[0]
            wv = (<tuple>e)[1]
            if _cget(C, D, w.agent) < w.epoch and (wv is None or self.overlaps(wv, v, ent)):
                self.report(w.op, WRITE, op, acc, self.WAW if write else self.RAW, lo, hi, ent)
        if write:
            for e in m.reads:
                r = <Mark>(<tuple>e)[0]
                rv = (<tuple>e)[1]
                if _cget(C, D, r.agent) < r.epoch and (rv is None or self.overlaps(rv, v, ent)):
                    self.report(r.op, READ, op, acc, self.WAR, lo, hi, ent)
            if pat is None:  # (a plain access covers the segment: every entry goes)
                m.writes = [(rec, own)]
                m.reads = []
            else:
                m.writes = _kept(m.writes, v, pat, lo, hi, -1, &cover)
                m.writes.append((rec, own))
                m.reads = _kept(m.reads, v, pat, lo, hi, -1, &cover)
        else:
            m.reads = _kept(m.reads, v, pat, lo, hi, a, &cover)
            m.reads.append((rec, own))

    cdef touch(self, dict touched, long op, long a, Mark rec, object acc, dict C,
               const epoch_t *D, ViewState ent):
        cdef pos_t flo, fhi, lo, hi
        cdef long b
        cdef Mark r
        if self.is_free[rec.op]:
            lo, hi = ent.lo, ent.hi
            for bo, pair in touched.items():
                b = bo
                r = <Mark>(<tuple>pair)[0]
                racc = (<tuple>pair)[1]
                if b != a and _cget(C, D, b) < r.epoch:
                    v = racc.view
                    flo = max(lo, <pos_t>v.offset)
                    fhi = min(hi, <pos_t>(v.offset + v.nbytes))
                    if flo < fhi:
                        self.report(r.op, racc.mode, op, acc, self.UAF, flo, fhi, ent)
            touched.clear()
        touched[a] = (rec, acc)

    cdef long blocker(self, long oid) except? -1:
        """The unprocessed predecessor of op oid's start with the smallest key, as a node: its
        predecessor on its agent, its issuer, then its after edges, in that order."""
        cdef long best = -1
        cdef long x
        cdef int k
        for k in range(2):
            x = self.prev_on[oid] if k == 0 else self.issuer[oid]
            if x >= 0 and not self.ended[x] and (best < 0 or _before(self.key, x, best)):
                best = x
        for k in range(_naft(self, oid)):
            x = _aft(self, oid, k)
            if not self.ended[x] and (best < 0 or _before(self.key, x, best)):
                best = x
        return ~best if _njoins(self.joins, best) else best

    cdef int push(self, long node) except -2:
        """Push node; 1: a cycle (the reference raises; the caller gives up)."""
        cdef long x
        cdef unsigned char bit
        if node < 0:
            bit, x = 2, ~node
        else:
            bit, x = 1, node
        if self.pending[x] & bit:
            return 1
        self.pending[x] |= bit
        self.stk[self.sp] = node
        self.sp += 1
        return 0


cdef inline long _cget(dict C, const epoch_t *D, long x) except? -1:
    """Component x of the walking agent's clock: D[x] in the dense form, else C.get(x, 0)."""
    if D != NULL:
        return D[x]
    return <long>C.get(x, 0)


cdef object _access_of(object accesses, long oid, object mode, object rank, object buf, pos_t lo,
                       pos_t hi):
    """The access of op ``oid`` (``accesses``: its own) that left its mark on [lo, hi) of
    (rank, buf) with mode: the last one."""
    found = None
    for acc in accesses:
        v = acc.view
        if (acc.mode == mode and v.rank == rank and v.buffer == buf and v.offset < hi
                and lo < v.offset + v.nbytes):
            found = acc
    assert found is not None, (oid, mode, rank, buf, lo, hi)
    return found


cdef double _window_at(double start, double end, object acc, int side):
    """``op.window_time(acc)[side]`` of an op from ``start`` to ``end``, the same double
    operations (setup.py turns FMA contraction off, so that a * b + c rounds twice, as in
    Python)."""
    cdef double d = end - start
    return start + <double>acc.window[side] * d


cdef inline Py_ssize_t _seg_at(list segs, pos_t lo) noexcept:
    """The place of the last segment of ``segs`` (in order, tiling) that starts at or before
    ``lo``, -1 if none does: ``bisect_right`` of their starts, minus one, on their C fields
    (a list of their starts as ints was kept beside them for ``bisect``, and each search
    made an int of ``lo``)."""
    cdef Py_ssize_t a = 0, b = len(segs), m
    while a < b:
        m = (a + b) >> 1
        if lo < (<Seg>segs[m]).lo:
            b = m
        else:
            a = m + 1
    return a - 1


cdef Py_ssize_t _cover(list segs, pos_t lo, pos_t hi, Py_ssize_t *end) except -1:
    """Make segs[i:j] tile [lo, hi) exactly (the reference's _cover): i, and j in ``end``."""
    cdef Py_ssize_t i = _seg_at(segs, lo)
    cdef Py_ssize_t j
    cdef pos_t pos, stop
    cdef Seg s
    if i >= 0 and (<Seg>segs[i]).hi > lo:
        s = <Seg>segs[i]
        if s.lo < lo:
            segs[i] = _seg_copy(s.lo, lo, s)
            segs.insert(i + 1, _seg_copy(lo, s.hi, s))
            s.live = False
            i += 1
    else:
        i += 1
    j = i
    pos = lo
    while pos < hi:
        if j < len(segs) and (<Seg>segs[j]).lo == pos:
            s = <Seg>segs[j]
            if s.hi > hi:
                segs[j] = _seg_copy(s.lo, hi, s)
                segs.insert(j + 1, _seg_copy(hi, s.hi, s))
                s.live = False
                s = <Seg>segs[j]
            pos = s.hi
        else:
            stop = (<Seg>segs[j]).lo if j < len(segs) and (<Seg>segs[j]).lo < hi else hi
            segs.insert(j, _seg_empty(pos, stop))
            pos = stop
        j += 1
    end[0] = j
    return i


cdef void _issue_keys(_Pass P, list agents, list used, bint any_line, bint all_issued):
    """:func:`streamsim.trace.issue_keys` of the ops the first loop of :func:`hb_rows` read (the
    same values, the same branches, ops taken in trace order as there; see its docstring), from
    the fields that loop stored, without another scan of the Python op objects: into ``P.key``."""
    cdef long n = P.n
    cdef long pos, oid, t, r, width
    cdef long *keys = P.key
    # host threads in Agent order, equal agents one thread (as the reference's set of agents)
    order_of = {ag: k for k, ag in enumerate(sorted({agents[i] for i in used}))}
    cdef list thread = [order_of.get(ag, -1) for ag in agents]  # per agent index
    if any_line:
        last = [0] * len(order_of)
        for pos in range(n):  # (ids follow each thread's program order)
            oid = P.in_order[pos]
            if P.is_host[oid]:
                t = thread[P.agent_of[oid]]
                if P.has_line[oid]:
                    keys[oid] = <long>P.line[oid] * 4
                    last[t] = P.line[oid]
                else:
                    keys[oid] = <long>last[t] * 4 + 2
    elif all_issued:
        width = 2 * max(1, len(order_of))
        for pos in range(n):
            oid = P.in_order[pos]
            if P.is_host[oid]:
                keys[oid] = <long>P.index[oid] * width + 2 * <long>thread[P.agent_of[oid]]
    else:
        for oid in range(n):
            keys[oid] = oid
        return
    for pos in range(n):
        oid = P.in_order[pos]
        if not P.is_host[oid]:
            r = P.issuer[oid]
            keys[oid] = keys[r] + 1 if r >= 0 else <long>P.line[oid] * 4 + 1


cdef inline bint _before(const long *key, long x, long y) noexcept:
    """(key[x], x) < (key[y], y): x comes first in issue order (ties: the smaller id)."""
    return key[x] < key[y] or (key[x] == key[y] and x < y)


cdef struct KeyId:
    long key
    long id


cdef int _by_key(const void *a, const void *b) noexcept nogil:
    cdef const KeyId *x = <const KeyId *>a
    cdef const KeyId *y = <const KeyId *>b
    if x.key != y.key:
        return -1 if x.key < y.key else 1
    return -1 if x.id < y.id else (1 if x.id > y.id else 0)


cdef bint _counting_sort(const long *key, long n, int *out) except -1:
    """``out``: the ids 0..n-1 in (key, id) order, by counting the keys (stable: ids taken in
    order), where the keys span at most 4n + 1024 values (an op log's: four a line, a re-run's
    fix syncs at their lines' keys out of id order); False, nothing written, where they span
    more (the caller sorts). A sort of a 640,000-op re-run's keys was 12% of its count."""
    if n <= 0:
        return False
    cdef long i, lo = key[0], hi = key[0], span
    for i in range(1, n):
        if key[i] < lo:
            lo = key[i]
        elif key[i] > hi:
            hi = key[i]
    span = hi - lo + 1
    if span <= 0 or span > 4 * n + 1024:
        return False
    cdef long *start = <long *>PyMem_Malloc((span + 1) * sizeof(long))
    if start == NULL:
        raise MemoryError()
    memset(start, 0, (span + 1) * sizeof(long))
    for i in range(n):  # (how many keys below each: the first place of each key's ids)
        start[key[i] - lo + 1] += 1
    for i in range(span):
        start[i + 1] += start[i]
    for i in range(n):
        out[start[key[i] - lo]] = <int>i
        start[key[i] - lo] += 1
    PyMem_Free(start)
    return True


def hb_rows(trace, list keys, tuple names, covered, bint only_count=False, bint rows_only=False,
            hazard=None):
    """The pass over ``trace``: (sorted hazard rows, position, agent_of), or None (see above).
    ``keys``: the trace's issue keys, or None to compute them here (as ``issue_keys`` does).
    ``only_count``: only how many rows there are (an int), none of them made or sorted;
    ``rows_only``: the sorted rows alone (what the hazards are made of: no list of n positions
    and agents made); ``hazard`` (the findings' ``Hazard`` class, with ``rows_only``): each
    row's ``Hazard`` instead (its fix None), made once the walk's state is freed, no row made.
    A row: (position of second, position of first, kind, rank, buffer, lo, hi, first, second,
    first's mode, second's mode, manifest), as the reference sorts them."""
    if len(set(names)) != 4:  # (the four kinds are told apart by their place: _FoundTable)
        return None
    cdef list ops = list(trace.ops)
    cdef list agents = list(trace.agents)
    cdef _Pass P = _start(agents, len(ops), names, only_count)
    P.ops = ops
    P.rows_only = rows_only
    P.hazard = hazard if rows_only else None
    if not _scan_ops(P, ops, agents, keys, covered):
        return None
    return _walk(P)


def hazards(list rows, hazard):
    """``hb._hazards(rows)``: a ``hazard`` (the findings' ``Hazard`` class; no fix yet) of each
    of the HB pass's sorted rows (:func:`hb_rows`'), made by its slots, where the reference's
    ``__init__`` calls ``object.__setattr__`` once per field (most of making 60,000 of them)."""
    cdef Py_ssize_t off[<int>N_HAZARD_FIELDS]
    hazard_offsets(<type?>hazard, off)
    check_generic_alloc(<type>hazard)
    cdef list out = []
    cdef dict ranges = {}  # (hazard_record)
    cdef IdInts ids
    ids_init(&ids)
    try:
        for row in rows:
            if len(<tuple?>row) != 12:
                raise ValueError(f"a hazard row of {len(row)} fields")
            out.append(_hazard_of(<tuple>row, <type>hazard, off, ranges, &ids))
    finally:
        ids_clear(&ids)
    return out


def hb_columns(columns, tuple names, covered, bint only_count=False, bint rows_only=False,
               hazard=None):
    """:func:`hb_rows` (``keys`` None: computed here) of the run ``columns`` holds
    (``_replay.Columns``: a check's first run, or a fix costing re-run, as columns,
    ``_cols.pxd``), its ops read from the columns: none is made. ``only_count``: their count,
    as :func:`hb_rows`'s, ``rows_only`` its rows alone, and ``hazard`` their hazards, as
    :func:`hb_rows`'s. None as :func:`hb_rows` (the
    caller then makes the trace)."""
    if len(set(names)) != 4:  # (the four kinds are told apart by their place: _FoundTable)
        return None
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    cdef OpCols *c = <OpCols *>PyCapsule_GetPointer(capsule, OPCOLS)
    cdef list agents = list(columns.agents)
    cdef _Pass P = _start(agents, c.n, names, only_count, c)
    P.cols = c
    P.rows_only = rows_only
    P.hazard = hazard if rows_only else None
    if not _scan_columns(P, c, agents, covered):
        return None
    return _walk(P)


cdef _Pass _start(list agents, long n, tuple names, bint only_count, OpCols *cols=NULL):
    """A pass over n ops of ``agents`` (the trace's, in order), set up before its first scan:
    each agent's partner (its rank's first host thread, for a stream), agents by address;
    ``cols``: the run's columns, whose arrays it reads where they are its own."""
    cdef _Pass P = _Pass.__new__(_Pass)
    cdef long na = len(agents), i
    P.n = n
    P.na = na
    P.only_count = only_count
    P.RAW, P.WAR, P.WAW, P.UAF = names
    P.READ, P.WRITE = READ, WRITE
    P.alloc(n, na, cols)
    first_host = {}
    for i, ag in enumerate(agents):
        if ag.kind == HOST:
            first_host.setdefault(ag.rank, i)
    for i, ag in enumerate(agents):
        P.partner[i] = i
        if ag.kind != HOST and ag.rank in first_host:
            P.partner[i] = first_host[ag.rank]
        P.may_skip[i] = P.partner[i] == i
    addrmap_init(&P.by_agent)
    addrmap_init(&P.by_view)
    for i in range(na - 1, -1, -1):  # (an object listed twice: its last place, as a dict's)
        ag = agents[i]
        if addrmap_get(&P.by_agent, <uintptr_t><PyObject *>ag) < 0:
            addrmap_put(&P.by_agent, <uintptr_t><PyObject *>ag, i)
    P.freed = set()
    return P


cdef int _put_after(_Pass P, long oid, object after, Py_ssize_t *used, Py_ssize_t *cap
                    ) except -1:
    """Op ``oid``'s after edges (``after``, its ``Op``'s tuple of op ids) into ``P.aft_pool``
    (``used`` of ``cap`` places taken; grown as needed); none: place 0. An id that is not an
    int raises as the walk's reading of it did; one that is no op's, OverflowError (the
    reference runs, and says what is wrong)."""
    cdef Py_ssize_t k, m = len(<tuple?>after), at = used[0]
    cdef long x
    if m == 0:
        P.aft_at[oid] = 0
        return 0
    if at + 1 + m > cap[0]:
        cap[0] = 2 * cap[0] + 1 + m
        P.aft_pool = <int *>_grown(P.aft_pool, cap[0] * sizeof(int))
    P.aft_at[oid] = <int>at
    P.aft_pool[at] = <int>m
    for k in range(m):
        x = <long>(<tuple>after)[k]
        if not 0 <= x < P.n:  # (the walk indexes its arrays by it)
            raise OverflowError("an after edge past the ops")
        P.aft_pool[at + 1 + k] = <int>x
    used[0] = at + 1 + m
    return 0


cdef bint _scan_ops(_Pass P, list ops, list agents, list keys, covered) except -1:
    """The first scan, of the trace's ``Op`` objects: each op's fields into P's arrays, and its
    issue keys (``keys``, or computed as ``issue_keys`` does). False: the reference must run."""
    cdef long n = P.n, na = P.na, a, oid
    cdef Py_ssize_t nafter = 1, capafter = n + 1  # (P.aft_pool's: place 0 holds 0, none)
    by_eq = {ag: i for i, ag in enumerate(agents)}
    cdef list last_on = [-1] * na
    host_agent = [ag.kind == HOST for ag in agents]
    used = set()  # agents with a host action (issue keys)
    cdef bint any_line = False  # a host action has an op-log line
    cdef bint all_issued = True  # every stream op names the host action that issued it
    cdef long pos = 0, i
    cdef PyObject *po
    P.njoin = 0
    for op in ops:
        po = <PyObject *>op
        if not _readable(po):
            return False  # (an op of another type, or unset fields: the reference reads it)
        kind = <object>slot(po, OFF[F_KIND])
        if kind not in covered:
            return False
        ag = <object>slot(po, OFF[F_AGENT])
        a = addrmap_get(&P.by_agent, <uintptr_t><PyObject *>ag)
        if a < 0:  # (an agent object not in trace.agents: an equal one, or none)
            got = by_eq.get(ag)
            if got is None:
                return False  # the reference restarts knowing every agent
            a = got
            addrmap_put(&P.by_agent, <uintptr_t><PyObject *>ag, a)
        oid = <object>slot(po, OFF[F_ID])
        if oid != pos:  # (ops not stored by id, as Trace.op requires: the per-op arrays are
            return False  # indexed by id; the reference says what is wrong)
        P.agent_of[oid] = a
        P.prev_on[oid] = last_on[a]
        last_on[a] = oid
        P.index[oid] = <object>slot(po, OFF[F_INDEX])
        iss = <object>slot(po, OFF[F_ISSUER])
        P.issuer[oid] = -1 if iss is None else <int>iss
        P.in_order[pos] = oid
        pos += 1
        if keys is None:  # (what issue_keys reads of the op)
            if host_agent[a]:
                P.is_host[oid] = 1
                used.add(a)
                ln = <object>slot(po, OFF[F_LINE])
                if ln is not None:
                    P.has_line[oid] = 1
                    P.line[oid] = ln
                    any_line = True
            elif iss is None:
                all_issued = False
                ln = <object>slot(po, OFF[F_LINE])
                if ln:
                    P.line[oid] = ln
        _put_after(P, oid, <object>slot(po, OFF[F_AFTER]), &nafter, &capafter)
        P.joins[oid] = slot(po, OFF[F_JOINS])
        P.accs[oid] = slot(po, OFF[F_ACCESSES])
        if _njoins(P.joins, oid):
            P.njoin += 1
        if kind == "free":
            P.is_free[oid] = 1
            for acc in <tuple>slot(po, OFF[F_ACCESSES]):
                view = <object>slot(<PyObject *>acc, A_VIEW)
                P.freed.add((_v(view, V_RANK), _v(view, V_BUFFER)))
    if keys is None:
        _issue_keys(P, agents, sorted(used), any_line, all_issued)
    else:  # (the caller's: trace.issue_keys; a key past 64 bits raises OverflowError: the
        for i in range(n):  # reference's then, streamsim.native.hb_rows)
            P.key[i] = keys[i]
    return True


cdef bint _scan_columns(_Pass P, OpCols *c, list agents, covered) except -1:
    """The first scan, of a run held as columns (``_cols.pxd``): what :func:`_scan_ops` reads
    of each ``Op``, read from its column instead, and the issue keys computed from them. The
    columns are the compiled replay's: op ids are positions and every agent is in ``agents``,
    so only the kinds and the accesses are checked (the accesses not where the replay says they
    are what it made: ``OpCols.readable``, a reading of every Access and View the walk then
    reads again). False: the reference must run."""
    cdef long n = P.n, na = P.na, a, oid
    cdef list last_on = [-1] * na
    cdef bytearray host_agent = bytearray([ag.kind == HOST for ag in agents])
    used = set()
    cdef bint any_line = False, all_issued = True
    cdef PyObject *kind
    cdef PyObject *known = NULL  # the last kind found covered (kinds are the lines' objects)
    P.njoin = 0
    for oid in range(n):
        kind = col_kind(c, oid)
        if kind != known:
            if <object>kind not in covered:
                return False
            known = kind
        a = c.agent[oid]  # (P.agent_of, P.index, P.issuer: the columns' own)
        P.prev_on[oid] = last_on[a]
        last_on[a] = oid
        P.in_order[oid] = oid
        if host_agent[a]:
            P.is_host[oid] = 1
            used.add(a)
            if c.line[oid]:
                P.has_line[oid] = 1
                P.line[oid] = c.line[oid]
                any_line = True
        elif c.issuer[oid] < 0:
            all_issued = False
            P.line[oid] = c.line[oid]
        if not ((c.joins == NULL or _is_tuple(c.joins[oid])) and
                (c.readable or _readable_col(c, oid))):
            return False  # (P.joins: the columns' own, and the accesses and after edges ints;
            # these are checked unless the replay that made them says they can be read:
            # OpCols.readable)
        if _njoins(P.joins, oid):
            P.njoin += 1
        if <object>kind == "free":
            P.is_free[oid] = 1
            for ai in range(col_nacc(c, oid)):
                view = <object>slot(col_acc(c, oid, ai), A_VIEW)
                P.freed.add((_v(view, V_RANK), _v(view, V_BUFFER)))
    _issue_keys(P, agents, sorted(used), any_line, all_issued)
    return True


cdef inline Py_ssize_t _nacc(_Pass P, long oid) noexcept:
    """How many accesses op ``oid`` has: its ``Op``'s tuple's length, or a run's columns' count
    (``P.accs`` NULL: ``_cols.col_nacc``)."""
    return col_nacc(P.cols, oid) if P.accs == NULL else _ntuple(P.accs[oid])


cdef inline PyObject *_acc(_Pass P, long oid, Py_ssize_t k) noexcept:
    """Op ``oid``'s ``k``-th access (borrowed), of its ``Op``'s tuple or the columns' ints."""
    return col_acc(P.cols, oid, <int>k) if P.accs == NULL else \
        _tuple_item(P.accs[oid], k)


cdef inline Py_ssize_t _naft(_Pass P, long oid) noexcept:
    """How many after edges op ``oid`` has (``P.aft_pool``)."""
    return P.aft_pool[P.aft_at[oid]]


cdef inline long _aft(_Pass P, long oid, Py_ssize_t k) noexcept:
    """The op id of op ``oid``'s ``k``-th after edge, in its ``Op``'s order."""
    return P.aft_pool[P.aft_at[oid] + 1 + k]


cdef object _walk(_Pass P):
    """The walk over the ops in issue order (the pass proper), once a first scan filled P: the
    rows, position and agent_of as :func:`hb_rows` returns them, their count (``only_count``),
    or None (an ordering error: the reference words it)."""
    cdef long n = P.n, na = P.na
    cdef long i, a, oid, p, r, o, v, q, e, k, count, root, x
    cdef Py_ssize_t j2
    cdef Py_ssize_t naft, ka
    cdef Py_ssize_t nacc
    cdef pos_t lo, hi
    cdef dict C
    cdef tuple S
    cdef epoch_t *D = NULL  # the walking agent's dense clock (the dense form; else NULL)
    cdef epoch_t *Sp
    cdef long tag
    cdef object rec
    cdef Seg s
    cdef ViewState ent
    cdef list segs
    cdef long njoin = P.njoin
    cdef bint only_count = P.only_count
    # the walk: op ids by issue key (ties by id: Python's stable sort of range(n) by key), then
    # the ends of the ops that join (~id), in id order
    cdef long nwalk = n + njoin
    cdef KeyId *by_key
    cdef int *walk = <int *>PyMem_Malloc(max(nwalk, 1) * sizeof(int))
    P.walk = walk  # (freed with P)
    P.stk = <int *>PyMem_Malloc(max(nwalk, 1) * sizeof(int))
    P.sp = 0
    if walk == NULL or P.stk == NULL:
        raise MemoryError()
    cdef bint in_order = True  # (an op log's ops are numbered in issue order: most traces)
    for i in range(1, n):
        if P.key[i] < P.key[i - 1]:
            in_order = False
            break
    if in_order:  # (already sorted by (key, id): the ids in order)
        for i in range(n):
            walk[i] = i
    elif not _counting_sort(P.key, n, walk):
        by_key = <KeyId *>PyMem_Malloc(max(n, 1) * sizeof(KeyId))
        if by_key == NULL:
            raise MemoryError()
        for i in range(n):
            by_key[i].key = P.key[i]
            by_key[i].id = i
        qsort(by_key, n, sizeof(KeyId), _by_key)
        for i in range(n):
            walk[i] = by_key[i].id
        PyMem_Free(by_key)
    k = n
    for i in range(n):
        if _njoins(P.joins, i):
            walk[k] = ~i
            k += 1

    if na <= DENSE_MAX_AGENTS:
        P.dense_alloc()
    cdef bint dense = P.dense
    P.clocks = [{} for _ in range(na)]
    P.seen = [{} for _ in range(na)]
    P.hist_e = [[0] for _ in range(na)]
    P.hist_c = [[(0, {})] for _ in range(na)]
    P.end_of = None if dense else [None] * n  # (the dict form's: dense has dend)
    P.found = _FoundTable()
    P.stores = {}
    P.store_keys = []
    P.plain = {}
    P.pats = {}
    P.hit_memo = {}
    P.overlap_memo = {}
    P.views = []
    cdef list views = P.views
    P.posn = <int *>PyMem_Malloc(max(n, 1) * sizeof(int))
    if P.posn == NULL:
        raise MemoryError()
    cdef int *position = P.posn
    for i in range(n):
        position[i] = 0
    count = 0
    cdef list clocks = P.clocks
    cdef bint waiting

    for wi in range(nwalk):
        root = walk[wi]
        while True:
            if P.sp:
                oid = P.stk[P.sp - 1]
            else:
                oid = root
                if oid < 0:
                    if P.ended[~oid]:
                        break
                    if P.push(oid):
                        return None
                elif P.started[oid]:
                    break
            if oid < 0:  # the end of an op that joins (rule 6)
                oid = ~oid
                if not P.started[oid]:
                    need = oid
                else:
                    need = None
                    for jo in <tuple>P.joins[oid]:
                        x = jo
                        if not P.started[x] and (need is None or _before(P.key, x, <long>need)):
                            need = x
                if need is not None:
                    if P.push(<long>need):
                        return None
                    continue
                P.sp -= 1
                P.pending[oid] &= ~2
                a = P.agent_of[oid]
                g = P.gen[a]
                if dense:
                    D = P.dclk + a * na
                    for jo in <tuple>P.joins[oid]:
                        x = jo
                        Sp = P.dstart(x, &tag)
                        P.djoin(a, D, Sp, tag, x)
                    P.dend[oid] = P.dcopy(D)
                    if P.gen[a] != g:
                        P.dnew_copy(a, D, P.index[oid] + 2)
                else:
                    C = <dict>clocks[a]
                    for jo in <tuple>P.joins[oid]:
                        P.join(a, C, P.start_copy(jo), jo)
                    P.end_of[oid] = (-2 - oid, dict(C))
                    if P.gen[a] != g:
                        P.new_copy(a, C, P.index[oid] + 2)
                P.ended[oid] = 1
                continue

            # an op's start (rules 1, 2 and its after edges first)
            p = P.prev_on[oid]
            r = P.issuer[oid]
            naft = _naft(P, oid)
            waiting = (p >= 0 and not P.ended[p]) or (r >= 0 and not P.ended[r])
            if not waiting and naft:
                for ka in range(naft):
                    if not P.ended[_aft(P, oid, ka)]:
                        waiting = True
                        break
            if waiting:
                if not P.sp:
                    if P.push(oid):
                        return None
                if P.push(P.blocker(oid)):
                    return None
                continue
            if P.sp:
                P.sp -= 1
                P.pending[oid] &= ~1
            a = P.agent_of[oid]
            position[oid] = count
            count += 1
            P.started[oid] = 1
            nacc = _nacc(P, oid)
            if r < 0 and P.may_skip[a] and not nacc and not naft and \
                    not _njoins(P.joins, oid):
                P.ended[oid] = 1
                continue

            if dense:
                C = None
                D = P.dclk + a * na
                if r >= 0:  # rule 2 (enqueue), as below
                    o = P.agent_of[r]
                    v = P.index[r] + 1
                    Sp = P.dend_copy(r, &tag)
                    if P.dseen[a * na + o] == tag:
                        if v > D[o]:
                            D[o] = v
                            if o != P.partner[a]:
                                P.gen[a] += 1
                        q = P.partner[o]
                        if q != o:
                            v = P.partner_of[r]
                            if v > D[q]:
                                D[q] = v
                                if q != P.partner[a] and q != a:
                                    P.gen[a] += 1
                    else:
                        P.djoin(a, D, Sp, tag, r)
                for ka in range(naft):
                    x = _aft(P, oid, ka)
                    Sp = P.dend_copy(x, &tag)
                    P.djoin(a, D, Sp, tag, x)
            else:
                C = <dict>clocks[a]
                D = NULL
            if not dense and r >= 0:  # rule 2 (enqueue)
                S_o = P.end_of[r]
                o = P.agent_of[r]
                v = P.index[r] + 1
                if S_o is None:
                    he = <list>P.hist_e[o]
                    if <long>he[len(he) - 1] <= v:
                        S = <tuple>(<list>P.hist_c[o])[len(he) - 1]
                    else:
                        S = <tuple>(<list>P.hist_c[o])[bisect_right(he, v) - 1]
                else:
                    S = <tuple>S_o
                if (<dict>P.seen[a]).get(o) == S[0]:
                    if v > <long>C.get(o, 0):
                        C[o] = v
                        if o != P.partner[a]:
                            P.gen[a] += 1
                    q = P.partner[o]
                    if q != o:
                        v = P.partner_of[r]
                        if v > <long>C.get(q, 0):
                            C[q] = v
                            if q != P.partner[a] and q != a:
                                P.gen[a] += 1
                else:
                    P.join(a, C, S, r)
            if not dense:
                for ka in range(naft):
                    x = _aft(P, oid, ka)
                    P.join(a, C, P.end_copy(x), x)
            e = P.index[oid] + 1
            if _cget(C, D, a) >= e:
                return None  # out of program order: the reference raises
            if dense:
                D[a] = e
            else:
                C[a] = e
            if P.partner[a] != a:
                P.partner_of[oid] = _cget(C, D, P.partner[a])
            if P.gen[a] != P.hist_g[a]:
                if dense:
                    P.dnew_copy(a, D, e)
                else:
                    P.new_copy(a, C, e)
            if not _njoins(P.joins, oid):
                P.ended[oid] = 1

            if not nacc:
                continue
            rec = None  # (this op's Mark: made only for a mixed segment or a freed storage)
            for ai in range(nacc):
                acc = <object>_acc(P, oid, ai)
                view = <object>slot(<PyObject *>acc, A_VIEW)
                x = addrmap_get(&P.by_view, <uintptr_t><PyObject *>view)
                ent = P.entry(view) if x < 0 else <ViewState>views[x]
                if ent.touched is not None:
                    rec = _mark_once(rec, oid, a, e)
                    P.touch(<dict>ent.touched, oid, a, <Mark>rec, acc, C, D, ent)
                if ent.strided:  # a strided view: every segment of its hull, mixed
                    if ent.hi > ent.lo:
                        rec = _mark_once(rec, oid, a, e)
                        segs = ent.segs
                        i = _cover(segs, ent.lo, ent.hi, &j2)
                        for k in range(i, j2):
                            P.mixed(segs, k, oid, acc, a, <Mark>rec, C, D, ent)
                    continue
                s = ent.seg
                mode = <object>slot(<PyObject *>acc, A_MODE)
                if mode is READ or mode == READ:
                    if s.live:
                        P.against_write(s, oid, acc, P.RAW, ent.lo, ent.hi, ent, C, D)
                        _read_by(s, oid, a, e)
                        continue
                    lo, hi = ent.lo, ent.hi
                    if hi <= lo:
                        continue
                    segs = ent.segs
                    i = _cover(segs, lo, hi, &j2)
                    if j2 - i == 1 and (<Seg>segs[i]).mixed is None:
                        ent.seg = <Seg>segs[i]
                    for k in range(i, j2):
                        s = <Seg>segs[k]
                        if s.mixed is not None:
                            rec = _mark_once(rec, oid, a, e)
                            P.mixed(segs, k, oid, acc, a, <Mark>rec, C, D, ent)
                            continue
                        P.against_write(s, oid, acc, P.RAW, s.lo, s.hi, ent, C, D)
                        _read_by(s, oid, a, e)
                    continue
                # a write: against the last write and every read since it
                if s.live:
                    P.against_write(s, oid, acc, P.WAW, ent.lo, ent.hi, ent, C, D)
                    if s.nr:
                        P.war(s, oid, acc, C, D, ent.lo, ent.hi, ent)
                        s.nr = 0
                        s.more = None
                    s.wop, s.wag, s.wep = oid, a, e
                    continue
                lo, hi = ent.lo, ent.hi
                if hi <= lo:
                    continue
                segs = ent.segs
                i = _cover(segs, lo, hi, &j2)
                for k in range(i, j2):
                    s = <Seg>segs[k]
                    if s.mixed is not None:  # checked as mixed, then replaced as the others
                        rec = _mark_once(rec, oid, a, e)
                        P.mixed(segs, k, oid, acc, a, <Mark>rec, C, D, ent)
                        (<Seg>segs[k]).live = False
                        continue
                    P.against_write(s, oid, acc, P.WAW, s.lo, s.hi, ent, C, D)
                    if s.nr:
                        P.war(s, oid, acc, C, D, s.lo, s.hi, ent)
                    s.live = False
                s = _seg_written(lo, hi, oid, a, e)
                ent.seg = s
                if j2 == i + 1:
                    segs[i] = s
                else:
                    segs[i:j2] = [s]

    if only_count:
        return P.found.n
    if P.hazard is not None:  # (the walk's state let go first: the hazards take its memory)
        P.release_walk()
        return P.found.rows(position, (P.RAW, P.WAR, P.WAW, P.UAF), P.store_keys, P.hazard)
    rows = P.found.rows(position, (P.RAW, P.WAR, P.WAW, P.UAF), P.store_keys)
    if P.rows_only:
        return rows
    agent_of = [P.agent_of[i] for i in range(n)]
    return rows, [position[i] for i in range(n)], agent_of
