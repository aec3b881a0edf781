# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled run metrics: the per-op scans of :func:`streamsim.analysis.metrics.compute_metrics`
(:func:`timing`) and :func:`~streamsim.analysis.metrics.memory_use` (:func:`memory`), in Cython.

The reference and its comments are in streamsim/analysis/metrics.py (``_timing``,
``_memory_events`` and ``_memory_walk``), which this file follows step for step: the same
intervals gathered in the same order, the same stable sorts on the same keys (a C ``qsort`` with
the original position as the last key is Python's stable sort), the same merges, and float sums
in the same order (no reassociation; setup.py compiles with -ffp-contract=off), so every figure is
bit for bit the reference's. What differs is only where the state is held: per-op start and end in
C arrays of doubles instead of tuples, agents found by their address (the reference's
``id(agent)``) in a C hash table, and the groupings (per agent, per rank) as stable counting
sorts over those arrays instead of lists extended in a dict.

Each function returns None, having changed nothing, when the reference must run instead: a time
that is not a Python float (a hand-built trace with int times: the reference's arithmetic would
keep ints), a NaN (Python's sort of NaNs is not a total order), or, for :func:`memory`, op ids
that are not positions (a trace cut to some of its ops). Tests: tests/native/test_metrics.py.

Two scans of fix costing (streamsim/pipeline/fixcost.py), after the run and after each re-run,
read the same op slots and live here too: :func:`keyed_host_ops` (``_keyed_host_ops``) and
:func:`delayed_ops` (the second scan of ``_delayed_ops``), and the rank a re-run ends on,
:func:`critical_rank`. Tests: tests/native/test_fixscan.py. And keying a run's fixes once for
every re-run (``fixcost.Keying``), which scans the same slots: :func:`keying`
(tests/native/test_keying.py); and the walk of a re-run's shift, :func:`shift`
(test_fixscan.py). A run the compiled replay kept as columns (``_cols.pxd``) is read the same
way, its ops made by none of these: :func:`keying_columns`, :func:`delayed_starts_columns`,
:func:`shift_columns` (keying and the shift read a run through one interface, ``_Reader``).
"""
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsSsize_t, PyLong_CheckExact
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport uint64_t, uintptr_t
from libc.stdlib cimport qsort
from libc.string cimport memcmp, memset

from streamsim.native._addrmap cimport AddrMap, addrmap_free, addrmap_get, addrmap_init, addrmap_put
from streamsim.native._cols cimport OpCols, OPCOLS, col_kind, col_step, col_naft, col_aft, col_attrs
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython cimport array
import array
from streamsim.native._slots cimport (slot as _slot, Py_TYPE, op_offsets, N_FIELDS, F_ID,
    F_AGENT, F_KIND, F_START, F_END, F_ISSUER, F_LOCATION, F_STEP, F_ATTRS, fix_record,
    check_generic_alloc, hazard_offsets, fix_offsets, N_HAZARD_FIELDS, N_FIX_FIELDS, H_FIX,
    X_KIND, X_TEXT, X_BEFORE, X_HANDLE_OP, X_RECORD_AFTER, X_EVENT_STREAM, X_WAIT_STREAM,
    X_BUFFER, line_number_at)

from streamsim.trace import HOST, STREAM, TRANSFER_START, Op

cdef extern from "Python.h":
    int PY_VERSION_HEX

# Op is a slots dataclass: the scans read its slots directly (streamsim/native/_slots.pxd: a load
# instead of a getattr, the reads of every op were most of the compiled scans' time); an op of
# another type (a subclass) takes the reference.
cdef PyTypeObject *OP_TYPE = <PyTypeObject *>Op
cdef Py_ssize_t OFF[<int>N_FIELDS]  # the op slots by F_X (streamsim/native/_slots.pxd)
op_offsets(Op, OFF)


cdef object _ABSENT = object()  # (a dict's get default: no value of the dict's is it)
cdef PyObject *ALLOC = <PyObject *>"alloc"
cdef PyObject *FREE = <PyObject *>"free"


cdef struct Iv:
    # An interval and its position in the list the reference sorts (the stable sort's last key).
    double s
    double e
    Py_ssize_t i


cdef struct Ev:
    # A memory event's sort key, (time, issue position), and its index in the events list.
    double t
    long long p
    Py_ssize_t i


cdef int _cmp_iv(const void *a, const void *b) noexcept nogil:
    """sorted() of (start, end) tuples, stable: by start, then end, then original position."""
    cdef const Iv *x = <const Iv *>a
    cdef const Iv *y = <const Iv *>b
    if x.s < y.s:
        return -1
    if x.s > y.s:
        return 1
    if x.e < y.e:
        return -1
    if x.e > y.e:
        return 1
    return (x.i > y.i) - (x.i < y.i)


cdef struct KeyAt:
    # An injection key's sort key as ranks, (agent place, kind, location, n), and its index.
    Py_ssize_t place, kind
    long long loc, n
    Py_ssize_t i


cdef int _cmp_key(const void *a, const void *b) noexcept nogil:
    """sorted() of the keys' (place, kind, location, n): the ranks compared in turn (no two keys
    have the same four)."""
    cdef const KeyAt *x = <const KeyAt *>a
    cdef const KeyAt *y = <const KeyAt *>b
    if x.place != y.place:
        return -1 if x.place < y.place else 1
    if x.kind != y.kind:
        return -1 if x.kind < y.kind else 1
    if x.loc != y.loc:
        return -1 if x.loc < y.loc else 1
    if x.n != y.n:
        return -1 if x.n < y.n else 1
    return (x.i > y.i) - (x.i < y.i)


cdef int _cmp_ev(const void *a, const void *b) noexcept nogil:
    """list.sort(key=lambda e: e[:2]), stable: by time, then issue position, then index."""
    cdef const Ev *x = <const Ev *>a
    cdef const Ev *y = <const Ev *>b
    if x.t < y.t:
        return -1
    if x.t > y.t:
        return 1
    if x.p < y.p:
        return -1
    if x.p > y.p:
        return 1
    return (x.i > y.i) - (x.i < y.i)


cdef class Pairs:
    """A growable list of (start, end, tag) in C arrays (tag: the agent slot of an interval)."""
    cdef double *s
    cdef double *e
    cdef Py_ssize_t *tag
    cdef Py_ssize_t n, cap

    def __dealloc__(self):
        PyMem_Free(self.s)
        PyMem_Free(self.e)
        PyMem_Free(self.tag)

    cdef int push(self, double s, double e, Py_ssize_t tag) except -1:
        cdef Py_ssize_t cap
        cdef void *p
        if self.n == self.cap:
            cap = self.cap * 2 if self.cap else 4096
            p = PyMem_Realloc(self.s, cap * sizeof(double))
            if p == NULL:
                raise MemoryError()
            self.s = <double *>p
            p = PyMem_Realloc(self.e, cap * sizeof(double))
            if p == NULL:
                raise MemoryError()
            self.e = <double *>p
            p = PyMem_Realloc(self.tag, cap * sizeof(Py_ssize_t))
            if p == NULL:
                raise MemoryError()
            self.tag = <Py_ssize_t *>p
            self.cap = cap
        self.s[self.n] = s
        self.e[self.n] = e
        self.tag[self.n] = tag
        self.n += 1
        return 0


cdef class Block:
    """A C array freed with its owner (scratch space of one call)."""
    cdef void *p

    def __cinit__(self, Py_ssize_t nbytes):
        self.p = PyMem_Malloc(nbytes if nbytes > 0 else 1)
        if self.p == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.p)


cdef class PtrMap:
    """Agent address -> slot (the reference's ``seen`` dict keyed by ``id(agent)``): an
    ``AddrMap`` (``_addrmap.pxd``) freed with its owner."""
    cdef AddrMap m

    def __cinit__(self):
        addrmap_init(&self.m)

    def __dealloc__(self):
        addrmap_free(&self.m)

    cdef inline Py_ssize_t get(self, uintptr_t k):
        return addrmap_get(&self.m, k)

    cdef inline int put(self, uintptr_t k, Py_ssize_t v) except -1:
        return addrmap_put(&self.m, k, v)


cdef Py_ssize_t _merge(Iv *buf, Py_ssize_t n, double *out_s, double *out_e) noexcept:
    """The reference's ``_merge`` of the ``n`` intervals in ``buf`` (sorted here, in place) into
    ``out_s``/``out_e``; returns how many merged intervals."""
    cdef Py_ssize_t k, m = 0
    cdef double s, e
    qsort(buf, n, sizeof(Iv), _cmp_iv)
    for k in range(n):
        s = buf[k].s
        e = buf[k].e
        if e <= s:
            continue
        if m and s <= out_e[m - 1]:
            if e > out_e[m - 1]:  # max(out[-1][1], e): the first unless e is greater
                out_e[m - 1] = e
        else:
            out_s[m] = s
            out_e[m] = e
            m += 1
    return m


cdef double _total(double *s, double *e, Py_ssize_t n) except? -1.0:
    """The reference's ``_total``: ``sum(e - s for s, e in intervals)`` as the builtin sum adds
    floats: left to right from 0 before Python 3.12; from 3.12 the builtin compensates its float
    sums (Neumaier), so the differences are handed to it as a list."""
    cdef Py_ssize_t k
    cdef double t = 0.0
    if PY_VERSION_HEX < 0x030C0000:
        for k in range(n):
            t += e[k] - s[k]
        return t
    return float(sum([e[k] - s[k] for k in range(n)]))


cdef double _intersection(double *as_, double *ae, Py_ssize_t na, double *bs, double *be,
                          Py_ssize_t nb) noexcept:
    """The reference's ``_intersection`` of two merged lists."""
    cdef Py_ssize_t i = 0, j = 0
    cdef double total = 0.0, lo, hi
    while i < na and j < nb:
        if bs[j] > as_[i]:  # max(a, b): a unless b is greater
            lo = bs[j]
        else:
            lo = as_[i]
        if be[j] < ae[i]:  # min(a, b): a unless b is smaller
            hi = be[j]
        else:
            hi = ae[i]
        if hi > lo:
            total += hi - lo
        if ae[i] < be[j]:
            i += 1
        else:
            j += 1
    return total


cdef Py_ssize_t *_order(Py_ssize_t n, Py_ssize_t *elems, Py_ssize_t *key, Py_ssize_t nkeys,
                        Py_ssize_t *start, list keep) except NULL:
    """Stable counting sort: the elements ``elems[0:n]`` (or 0..n-1 when NULL), in that order,
    grouped by ``key[element]`` (0..nkeys-1; -1: dropped). Returns the grouped elements (owned by a
    Block appended to ``keep``); ``start[k]:start[k + 1]`` is group k's range."""
    cdef Py_ssize_t i, x, k
    cdef Block out = Block(n * sizeof(Py_ssize_t))
    keep.append(out)
    cdef Py_ssize_t *res = <Py_ssize_t *>out.p
    for k in range(nkeys + 1):
        start[k] = 0
    for i in range(n):
        x = elems[i] if elems != NULL else i
        k = key[x]
        if k >= 0:
            start[k + 1] += 1
    for k in range(nkeys):
        start[k + 1] += start[k]
    cdef Block fill = Block(nkeys * sizeof(Py_ssize_t))
    cdef Py_ssize_t *at = <Py_ssize_t *>fill.p
    for k in range(nkeys):
        at[k] = start[k]
    for i in range(n):
        x = elems[i] if elems != NULL else i
        k = key[x]
        if k >= 0:
            res[at[k]] = x
            at[k] += 1
    return res


cdef inline bint _float(object x, double *out):
    """Store ``x`` in ``out`` if it is a Python float and not a NaN (else the reference runs)."""
    if not PyFloat_CheckExact(x):
        return False
    out[0] = PyFloat_AS_DOUBLE(x)
    return out[0] == out[0]


def timing(trace):
    """The reference's ``_timing(trace)``: ``(latencies, idle, overlap_num, overlap_den,
    busy_us)``, or None when the reference must run (see the module's docstring)."""
    cdef double makespan, start, end, ts
    if not _float(trace.end_time, &makespan):
        return None
    cdef PtrMap slot_of = PtrMap()
    cdef list slot_agents = []  # slot -> its agent object (the reference's agent_at)
    cdef bytearray flags = bytearray()  # slot -> 1 stream, 2 counts for steps, 4 comm stream
    cdef Pairs ivs = Pairs()  # every busy interval, in op order, tagged with its slot
    cdef Pairs moving = Pairs()  # every comm-stream transfer interval, the same
    cdef Pairs spans = Pairs()  # step -> [first start, last end] (tag unused)
    cdef dict step_at = {}  # step label -> its row in spans (insertion order kept)
    cdef Py_ssize_t slot = -1, nslots = 0
    cdef PyObject *last = NULL
    cdef unsigned char f
    cdef object ag
    cdef PyObject *p
    cdef PyObject *ps
    cdef PyObject *pe
    for op in trace.ops:
        p = <PyObject *>op
        if Py_TYPE(p) != OP_TYPE or _slot(p, OFF[F_AGENT]) == NULL:
            return None
        ag = <object>_slot(p, OFF[F_AGENT])
        if <PyObject *>ag != last:
            slot = slot_of.get(<uintptr_t><PyObject *>ag)
            if slot < 0:
                slot = nslots
                nslots += 1
                slot_of.put(<uintptr_t><PyObject *>ag, slot)
                slot_agents.append(ag)
                flags.append(_stream_flags(ag))
            last = <PyObject *>ag
        f = flags[slot]
        if not (f & 1):
            continue
        ps, pe = _slot(p, OFF[F_START]), _slot(p, OFF[F_END])
        if ps == NULL or pe == NULL or not _float(<object>ps, &start) or \
                not _float(<object>pe, &end):
            return None
        if _busy(f, slot, start, end, _slot(p, OFF[F_STEP]), _slot(p, OFF[F_ATTRS]), ivs,
                 moving, spans, step_at) < 0:
            return None
    return _timing_of(makespan, ivs, moving, spans, slot_agents, nslots, trace.agents)


def timing_columns(columns):
    """:func:`timing` of the run ``columns`` holds (``_replay.Columns``, ``_cols.pxd``), read
    from its columns; None as :func:`timing`."""
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    cdef OpCols *c = <OpCols *>PyCapsule_GetPointer(capsule, OPCOLS)
    cdef tuple agents = columns.agents
    cdef double makespan = columns.end_time, start, end
    cdef Py_ssize_t na = len(agents), i, a, slot, nslots = 0
    cdef Block b_slot = Block((na + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *slot_of = <Py_ssize_t *>b_slot.p  # agent -> its slot (first seen), -1
    for a in range(na):
        slot_of[a] = -1
    cdef list slot_agents = []
    cdef bytearray flags = bytearray()
    cdef Pairs ivs = Pairs(), moving = Pairs(), spans = Pairs()
    cdef dict step_at = {}
    cdef unsigned char f
    for i in range(c.n):
        a = c.agent[i]
        slot = slot_of[a]
        if slot < 0:
            slot = slot_of[a] = nslots
            nslots += 1
            slot_agents.append(agents[a])
            flags.append(_stream_flags(agents[a]))
        f = flags[slot]
        if not (f & 1):
            continue
        start, end = c.start[i], c.end[i]
        if start != start or end != end:
            return None  # (a NaN: as timing)
        if _busy(f, slot, start, end, col_step(c, i), col_attrs(c, i), ivs, moving, spans,
                 step_at) < 0:
            return None
    return _timing_of(makespan, ivs, moving, spans, slot_agents, nslots, agents)


cdef unsigned char _stream_flags(object ag):
    """An agent's flags for :func:`timing`: 1 a stream, 2 its ops count for steps, 4 a comm
    stream (a pending gloo object send is host-side bookkeeping, not device work)."""
    stream = ag.kind == STREAM
    return (1 if stream else 0) | (2 if stream and not ag.is_gloo else 0) | \
        (4 if ag.is_comm else 0)


cdef inline int _busy(unsigned char f, Py_ssize_t slot, double start, double end, PyObject *step,
                      PyObject *attrs, Pairs ivs, Pairs moving, Pairs spans, dict step_at) except -2:
    """A stream op's part of :func:`timing` (its agent's flags ``f``, its times, its ``step``
    and ``attrs``): its step's span, its busy interval, a comm op's transfer interval (from
    ``attrs[TRANSFER_START]``, else its start). -1: the reference must run (no attrs, or a
    transfer start that is not a float)."""
    cdef Py_ssize_t k
    cdef double ts
    if f & 2 and step != NULL and step != <PyObject *>None:
        got = step_at.get(<object>step)
        if got is None:
            step_at[<object>step] = spans.n
            spans.push(start, end, 0)
        else:  # (min and max, as the reference: the first unless strictly past it)
            k = got
            if start < spans.s[k]:
                spans.s[k] = start
            if end > spans.e[k]:
                spans.e[k] = end
    if end > start:
        ivs.push(start, end, slot)
        if f & 4:
            if attrs == NULL:
                return -1
            x = (<object>attrs).get(TRANSFER_START, _ABSENT)
            if x is _ABSENT:
                ts = start
            elif not _float(x, &ts):
                return -1
            moving.push(ts, end, slot)
    return 0


cdef tuple _timing_of(double makespan, Pairs ivs, Pairs moving, Pairs spans, list slot_agents,
                      Py_ssize_t nslots, agents):
    """The rest of :func:`timing`, once its scan gathered each stream op's intervals and step
    spans (tagged with their agents' slots, ``slot_agents``): the merges and sums."""
    cdef list keep = []
    cdef Py_ssize_t k
    cdef object ag, got
    # raw: the busy intervals per Agent (equal Agent objects share one entry), in the order the
    # slots were first seen, each slot's intervals in op order
    cdef Block b_start = Block((nslots + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *by_slot_start = <Py_ssize_t *>b_start.p
    cdef Py_ssize_t *by_slot = _order(ivs.n, NULL, ivs.tag, nslots, by_slot_start, keep)
    cdef Block b_group_of = Block(nslots * sizeof(Py_ssize_t))
    cdef Py_ssize_t *group_of = <Py_ssize_t *>b_group_of.p
    cdef dict group_at = {}
    cdef list group_agents = []
    for k in range(nslots):
        if by_slot_start[k + 1] > by_slot_start[k]:
            ag = slot_agents[k]
            got = group_at.get(ag)
            if got is None:
                got = group_at[ag] = len(group_agents)
                group_agents.append(ag)
            group_of[k] = got
        else:
            group_of[k] = -1
    cdef Py_ssize_t ngroups = len(group_agents)
    cdef Block b_key = Block(ivs.n * sizeof(Py_ssize_t))
    cdef Py_ssize_t *key = <Py_ssize_t *>b_key.p
    for k in range(ivs.n):
        key[k] = group_of[ivs.tag[k]]
    cdef Block b_gstart = Block((ngroups + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *gstart = <Py_ssize_t *>b_gstart.p
    cdef Py_ssize_t *by_group = _order(ivs.n, by_slot, key, ngroups, gstart, keep)

    # busy: each group's intervals merged, stored one group after another
    cdef Py_ssize_t most = ivs.n if ivs.n > moving.n else moving.n
    cdef Block b_iv = Block(most * sizeof(Iv))
    cdef Iv *buf = <Iv *>b_iv.p
    cdef Block b_bs = Block(ivs.n * sizeof(double))
    cdef Block b_be = Block(ivs.n * sizeof(double))
    cdef double *busy_s = <double *>b_bs.p
    cdef double *busy_e = <double *>b_be.p
    cdef Block b_boff = Block((ngroups + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *boff = <Py_ssize_t *>b_boff.p
    cdef Block b_btot = Block(ngroups * sizeof(double))
    cdef double *btot = <double *>b_btot.p
    cdef Py_ssize_t g, j, x, n, m
    boff[0] = 0
    for g in range(ngroups):
        n = 0
        for j in range(gstart[g], gstart[g + 1]):
            x = by_group[j]
            buf[n].s = ivs.s[x]
            buf[n].e = ivs.e[x]
            buf[n].i = n
            n += 1
        m = _merge(buf, n, busy_s + boff[g], busy_e + boff[g])
        boff[g + 1] = boff[g] + m
        btot[g] = _total(busy_s + boff[g], busy_e + boff[g], m)

    ranks = sorted({a.rank for a in agents})
    cdef dict rank_at = {r: i for i, r in enumerate(ranks)}
    cdef Py_ssize_t nranks = len(ranks)
    # compute: per rank, the merged busy intervals of its compute streams, in busy's order
    cdef Py_ssize_t nbusy = boff[ngroups]
    cdef Block b_ckey = Block(nbusy * sizeof(Py_ssize_t))
    cdef Py_ssize_t *ckey = <Py_ssize_t *>b_ckey.p
    cdef Py_ssize_t r
    for g in range(ngroups):
        ag = group_agents[g]
        r = -1 if ag.is_comm else rank_at.get(ag.rank, -1)
        for j in range(boff[g], boff[g + 1]):
            ckey[j] = r
    cdef Block b_cstart = Block((nranks + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *cstart = <Py_ssize_t *>b_cstart.p
    cdef Py_ssize_t *by_crank = _order(nbusy, NULL, ckey, nranks, cstart, keep)
    # transfers: per rank, its comm streams' transfer intervals, slot by slot in op order
    cdef Block b_mstart = Block((nslots + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *mslot_start = <Py_ssize_t *>b_mstart.p
    cdef Py_ssize_t *m_by_slot = _order(moving.n, NULL, moving.tag, nslots, mslot_start, keep)
    cdef Block b_srank = Block(nslots * sizeof(Py_ssize_t))
    cdef Py_ssize_t *slot_rank = <Py_ssize_t *>b_srank.p
    for k in range(nslots):
        slot_rank[k] = rank_at.get(slot_agents[k].rank, -1) if \
            mslot_start[k + 1] > mslot_start[k] else -1
    cdef Block b_mkey = Block(moving.n * sizeof(Py_ssize_t))
    cdef Py_ssize_t *mkey = <Py_ssize_t *>b_mkey.p
    for k in range(moving.n):
        mkey[k] = slot_rank[moving.tag[k]]
    cdef Block b_trstart = Block((nranks + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *trstart = <Py_ssize_t *>b_trstart.p
    cdef Py_ssize_t *by_trank = _order(moving.n, m_by_slot, mkey, nranks, trstart, keep)

    cdef Block b_cs = Block(nbusy * sizeof(double))
    cdef Block b_ce = Block(nbusy * sizeof(double))
    cdef Block b_ms = Block(moving.n * sizeof(double))
    cdef Block b_me = Block(moving.n * sizeof(double))
    cdef double *cs = <double *>b_cs.p
    cdef double *ce = <double *>b_ce.p
    cdef double *ms = <double *>b_ms.p
    cdef double *me = <double *>b_me.p
    cdef list idle = []
    cdef double overlap_num = 0.0, overlap_den = 0.0
    cdef Py_ssize_t nc, nm
    for r in range(nranks):
        n = 0
        for j in range(cstart[r], cstart[r + 1]):
            x = by_crank[j]
            buf[n].s = busy_s[x]
            buf[n].e = busy_e[x]
            buf[n].i = n
            n += 1
        nc = _merge(buf, n, cs, ce)
        n = 0
        for j in range(trstart[r], trstart[r + 1]):
            x = by_trank[j]
            buf[n].s = moving.s[x]
            buf[n].e = moving.e[x]
            buf[n].i = n
            n += 1
        nm = _merge(buf, n, ms, me)
        if makespan > 0:
            idle.append(1.0 - _total(cs, ce, nc) / makespan)
        overlap_num += _intersection(cs, ce, nc, ms, me, nm)
        overlap_den += _total(ms, me, nm)
    cdef list latencies = [spans.e[k] - spans.s[k] for k in range(spans.n)]
    cdef dict busy_us = {}
    for ag, g in sorted(zip(group_agents, range(ngroups)), key=_first):
        busy_us[str(ag)] = btot[g]
    return latencies, idle, overlap_num, overlap_den, busy_us


def _first(pair):
    return pair[0]


def memory(trace):
    """The reference's ``_memory_walk(_memory_events(trace))``: ``(series, peak, peak_at,
    freeing, unknown)``, or None when the reference must run (see the module's docstring)."""
    cdef list ranks = [], bufs = [], nbytes = []
    cdef bytearray kinds = bytearray()
    cdef Pairs times = Pairs()  # (time, unused, position) per event: the sort keys
    cdef list frees = []  # (event index, free op)
    cdef double t, best, x
    cdef Py_ssize_t i
    for a in trace.allocations:
        if not _float(a.time, &t):
            return None
        times.push(t, 0.0, 2 * a.issued - 1)
        kinds.append(1)
        ranks.append(a.rank)
        bufs.append(a.buffer)
        nbytes.append(a.nbytes)
    ops = trace.ops
    cdef Py_ssize_t nops = len(ops)
    i = 0
    cdef PyObject *p
    cdef PyObject *pid
    cdef PyObject *pk
    for op in ops:
        p = <PyObject *>op
        if Py_TYPE(p) != OP_TYPE:
            return None
        pid, pk = _slot(p, OFF[F_ID]), _slot(p, OFF[F_KIND])
        if pid == NULL or pk == NULL or not PyLong_CheckExact(<object>pid):
            return None
        if PyLong_AsSsize_t(<object>pid) != i:  # a trace cut to some of its ops: the reference
            return None  # looks ops up by id
        i += 1
        if pk != ALLOC and pk != FREE:  # (the kinds are interned names: most ops are neither)
            k = <object>pk
            if k != "alloc" and k != "free":
                continue
        k = <object>pk
        if k == "alloc":
            if not _float(op.start, &t):
                return None
            attrs = op.attrs
            times.push(t, 0.0, 2 * op.id)
            kinds.append(1)
            ranks.append(op.agent.rank)
            bufs.append(attrs.get("buffer"))
            nbytes.append(int(attrs.get("nbytes") or 0))
        elif k == "free" and op.agent.kind == STREAM:  # (not the host action that issued it)
            frees.append((times.n, op))
            times.push(0.0, 0.0, 0)  # (filled in below)
            kinds.append(0)
            ranks.append(op.agent.rank)
            bufs.append(op.attrs.get("buffer"))
            nbytes.append(0)
    cdef Py_ssize_t at
    for at, op in frees:  # free_time(trace, op, trace.ops)
        issuer = op.issuer
        other = _op_at(ops, nops, issuer)
        if not _float(op.start if other is None else other.start, &best):
            return None
        for a in op.after:
            other = _op_at(ops, nops, a)
            if other is not None:
                if not _float(other.end, &x):
                    return None
                if x > best:  # max(): the first of equal values
                    best = x
        times.s[at] = best
        times.tag[at] = 2 * (op.id if issuer is None else issuer)
    return _memory_walk(times, kinds, ranks, bufs, nbytes)


def memory_columns(columns):
    """:func:`memory` of the run ``columns`` holds (``_replay.Columns``, ``_cols.pxd``: an op
    log's run, so no model allocation), read from its columns; None as :func:`memory`."""
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    cdef OpCols *c = <OpCols *>PyCapsule_GetPointer(capsule, OPCOLS)
    cdef tuple agents = columns.agents
    cdef list ranks = [], bufs = [], nbytes = []
    cdef bytearray kinds = bytearray()
    cdef Pairs times = Pairs()
    cdef list frees = []  # (event index, free op)
    cdef Py_ssize_t i, j, iss
    cdef int k
    cdef double best, x
    cdef PyObject *pk
    for i in range(c.n):
        pk = col_kind(c, i)
        if pk != ALLOC and pk != FREE:  # (as memory(): the kinds are interned names)
            if <object>pk != "alloc" and <object>pk != "free":
                continue
        ag = agents[c.agent[i]]
        if <object>pk == "alloc":
            if c.start[i] != c.start[i]:
                return None  # (a NaN: as memory)
            attrs = <object>col_attrs(c, i)
            times.push(c.start[i], 0.0, 2 * i)
            kinds.append(1)
            ranks.append(ag.rank)
            bufs.append(attrs.get("buffer"))
            nbytes.append(int(attrs.get("nbytes") or 0))
        elif ag.kind == STREAM:  # a free (not the host action that issued it)
            frees.append((times.n, i))
            times.push(0.0, 0.0, 0)  # (filled in below)
            kinds.append(0)
            ranks.append(ag.rank)
            bufs.append((<object>col_attrs(c, i)).get("buffer"))
            nbytes.append(0)
    for at, i in frees:  # free_time: the issuer's start (else its own), or a later end it waits
        iss = c.issuer[i]
        best = c.start[i] if iss < 0 else c.start[iss]
        for k in range(col_naft(c, i)):
            j = col_aft(c, i, k)
            x = c.end[j]
            if x > best:  # max(): the first of equal values
                best = x
        if best != best:
            return None
        times.s[<Py_ssize_t>at] = best
        times.tag[<Py_ssize_t>at] = 2 * (i if iss < 0 else iss)
    return _memory_walk(times, kinds, ranks, bufs, nbytes)


cdef tuple _memory_walk(Pairs times, bytearray kinds, list ranks, list bufs, list nbytes):
    """The rest of :func:`memory`, once its scan gathered the events (``times``: each one's
    time and issue position): the events sorted, and the reference's walk over them."""
    cdef Py_ssize_t n = times.n, i
    cdef Block b_ev = Block(n * sizeof(Ev))
    cdef Ev *ev = <Ev *>b_ev.p
    for i in range(n):
        ev[i].t = times.s[i]
        ev[i].p = times.tag[i]
        ev[i].i = i
    qsort(ev, n, sizeof(Ev), _cmp_ev)
    # the reference's walk, line for line, on Python objects (sizes are Python ints)
    cdef dict live = {}, now = {}, series = {}, peak = {}, peak_at = {}
    cdef set freeing = set()
    cdef Py_ssize_t unknown = 0, e
    for e in range(n):
        i = ev[e].i
        time = ev[e].t
        rank = ranks[i]
        key = (rank, bufs[i])
        old = live.pop(key, 0)
        if kinds[i]:
            live[key] = nbytes[i]
            total = now.get(rank, 0) + nbytes[i]
            if total > peak.get(rank, -1):
                peak[rank], peak_at[rank] = total, time
            total -= old
        elif old:
            freeing.add(rank)
            total = now.get(rank, 0) - old
        else:
            unknown += 1
            continue
        now[rank] = total
        series.setdefault(rank, [(0.0, 0)]).append((time, total))
        if total > peak.get(rank, -1):
            peak[rank], peak_at[rank] = total, time
    return series, peak, peak_at, freeing, unknown


cdef object _op_at(object ops, Py_ssize_t nops, object op_id):
    """The reference's ``_get(trace.ops, op_id)`` where op ids are positions."""
    if op_id is None:
        return None
    if 0 <= op_id < nops:
        return ops[op_id]
    return None



def keyed_host_ops(trace, wanted):
    """The reference's ``fixcost._keyed_host_ops(trace, wanted)``: host op id -> its injection key
    ``(agent, kind, location, n)``, for the keys in ``wanted``, in op order; None when the
    reference must run (a key that is not a 4-tuple, an op of another type than ``Op``).

    The same loop, but the test ``key in wanted`` (a hash of the Agent dataclass per candidate
    op, in Python: most of the reference's time) is made on ``wanted`` grouped by agent once:
    ``(kind, location, n)`` in the group of the op's agent, found by equality once per agent
    object, which holds exactly when the 4-tuple is in ``wanted``."""
    cdef dict want = {}
    for k in wanted:
        if type(k) is not tuple or len(<tuple>k) != 4:
            return None
        group = want.get(k[0])
        if group is None:
            group = want[k[0]] = set()
        group.add((k[1], k[2], k[3]))
    cdef set lines = {k[2] for k in wanted}
    cdef set kinds = {k[1] for k in wanted}
    cdef dict sites = {}  # (thread, kind, location) -> actions seen
    cdef PtrMap thread = PtrMap()  # agent address -> its number + 1 (equal agents: one number),
    # or 0 for an agent that is not a host thread
    cdef dict numbers = {}
    cdef list groups = []  # thread number -> its agent's wanted (kind, location, n), or None
    cdef dict host = {}
    cdef PyObject *p
    cdef PyObject *loc
    cdef PyObject *kind
    cdef PyObject *ag
    cdef Py_ssize_t t
    for op in trace.ops:
        p = <PyObject *>op
        if Py_TYPE(p) != OP_TYPE:
            return None
        loc, kind, ag = _slot(p, OFF[F_LOCATION]), _slot(p, OFF[F_KIND]), _slot(p, OFF[F_AGENT])
        if loc == NULL or kind == NULL or ag == NULL or _slot(p, OFF[F_ID]) == NULL:
            return None
        if not (<object>loc in lines and <object>kind in kinds):
            continue
        t = thread.get(<uintptr_t>ag)
        if t < 0:  # (first op of this agent object)
            if (<object>ag).kind != HOST:
                t = 0
            else:
                t = 1 + numbers.setdefault(<object>ag, len(numbers))
                while len(groups) < t:
                    groups.append(None)
                groups[t - 1] = want.get(<object>ag)
            thread.put(<uintptr_t>ag, t)
        if t == 0 or op.attrs.get("injected"):
            continue
        site = (t - 1, <object>kind, <object>loc)
        n = sites.get(site, 0)
        sites[site] = n + 1
        group = groups[t - 1]
        if group is not None and (<object>kind, <object>loc, n) in group:
            host[<object>_slot(p, OFF[F_ID])] = (<object>ag, <object>kind, <object>loc, n)
    return host


def delayed_ops(trace, dict host):
    """The reference's second scan in ``fixcost._delayed_ops``: injection key -> the first stream
    op the keyed host action (``host``: host op id -> key) enqueued, else that action itself; the
    keys in the order the reference first assigns them. None when the reference must run (an op
    of another type than ``Op``, op ids that are not positions, a host op id that is not an
    int).

    The reference's ``out`` is keyed by the injection key (a hash of the Agent dataclass per
    lookup); a host action's key is its own (two actions never share one), so this holds the
    same state per host op id instead (:func:`_delayed`)."""
    cdef _OpsReader r = _OpsReader(trace.ops if type(trace.ops) is tuple else tuple(trace.ops))
    got = _delayed_of_host(r, host)
    return None if got is None else {k: r.ops[i] for k, i in got}


def delayed_starts_columns(columns, dict host):
    """:func:`delayed_ops` of a run the compiled replay kept as ``columns`` (``_cols.pxd``),
    each op as its start (what a shift reads of it: no op made): injection key -> the start of
    the op chosen, in the same order; None as :func:`delayed_ops`."""
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    cdef _ColumnsReader r = _columns_reader(columns, capsule)
    got = _delayed_of_host(r, host)
    return None if got is None else {k: r.start(i) for k, i in got}


cdef list _delayed_of_host(_Reader r, dict host):
    """``(key, op id)`` of the op each keyed host action's sync delays (``host``: host op id ->
    key), in the order the reference first assigns the keys; None when the reference must run
    (a host op id that is not an int, or ``r`` declines)."""
    cdef Py_ssize_t n = r.n, i, j = 0
    cdef list keys = list(host.values())
    cdef Block b_of = Block((n + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *key_of = <Py_ssize_t *>b_of.p  # host op id -> its key's index, or -1
    for i in range(n):
        key_of[i] = -1
    for h in host:
        if not PyLong_CheckExact(h):
            return None
        i = PyLong_AsSsize_t(h)
        if 0 <= i < n:
            key_of[i] = j
        j += 1
    cdef Block b_chosen = Block((j + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *chosen = <Py_ssize_t *>b_chosen.p
    try:
        order = _delayed(r, key_of, j, chosen)
    except _Decline:
        return None
    return [(keys[j], chosen[j]) for j in order]


cdef list _delayed(_Reader r, const Py_ssize_t *key_of, Py_ssize_t nk, Py_ssize_t *chosen):
    """``fixcost._delayed_ops``' rule, over the run ``r`` reads: the op a sync before each keyed
    host action delays is the first stream op that action enqueued, else the action itself
    (``key_of``: op id -> the index of its action's key, -1: none). Fills ``chosen`` (key index
    -> that op's id, -1: none) and returns the key indices in the order first chosen (the
    reference's dict order). The run's delayed ops (:func:`delayed_ops`) and a re-run's
    (:func:`shift`) are found by it; raises :class:`_Decline` where ``r`` cannot read an op."""
    cdef Block b_host = Block(nk + 1)
    cdef char *from_host = <char *>b_host.p  # key index -> 1: the op chosen is the action
    cdef Py_ssize_t i, k, iss
    cdef list order = []
    for k in range(nk):
        chosen[k] = -1
    for i in range(r.n):
        if r.is_host(i):
            k = key_of[i]
            if k >= 0 and chosen[k] < 0:
                chosen[k], from_host[k] = i, 1
                order.append(k)
        else:
            iss = r.issuer(i)
            if iss < 0:
                continue
            k = key_of[iss]
            if k >= 0 and (chosen[k] < 0 or from_host[k]):
                if chosen[k] < 0:
                    order.append(k)
                chosen[k], from_host[k] = i, 0
    return order


def critical_rank(trace):
    """The reference's ``fixcost.critical_rank(trace)``, wrapped: ``(rank,)``, or ``(None,)``
    for a trace with no ops; None when the reference must run (an op of another type than
    ``Op``, an end that is not a Python float). The rank the makespan waits for: whose last
    kernel (``launch``) ends last, the smallest such rank on a tie; with no kernel, whose last op
    ends last. The same two scans, the ends compared as C doubles (a Python float's comparison),
    an agent's rank read only on a tie, as the reference reads it."""
    cdef list ops = list(trace.ops)
    cdef Py_ssize_t n = len(ops), i
    cdef PyObject *p
    cdef PyObject *kind
    cdef PyObject *end
    cdef PyObject *best = NULL
    cdef double e, best_end = 0.0
    cdef bint kernels
    for kernels in (True, False):
        for i in range(n):
            p = <PyObject *>ops[i]
            if kernels:  # (the first scan reads every op: it checks each can be read)
                if Py_TYPE(p) != OP_TYPE:
                    return None
                kind, end = _slot(p, OFF[F_KIND]), _slot(p, OFF[F_END])
                if kind == NULL or end == NULL or _slot(p, OFF[F_AGENT]) == NULL or \
                        not PyFloat_CheckExact(<object>end):
                    return None
                if <object>kind != "launch":
                    continue
            e = PyFloat_AS_DOUBLE(<object>_slot(p, OFF[F_END]))
            if best == NULL or e > best_end or (
                    e == best_end and (<object>_slot(p, OFF[F_AGENT])).rank <
                    (<object>_slot(best, OFF[F_AGENT])).rank):
                best = p
                best_end = e
        if best != NULL:
            break
    return (None if best == NULL else (<object>_slot(best, OFF[F_AGENT])).rank,)



def critical_rank_columns(columns):
    """:func:`critical_rank` of the run ``columns`` holds (``_replay.Columns``,
    ``_cols.pxd``), read from its columns: ``(rank,)`` or ``(None,)``; None for a NaN end."""
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    cdef OpCols *c = <OpCols *>PyCapsule_GetPointer(capsule, OPCOLS)
    cdef tuple agents = columns.agents
    cdef Py_ssize_t i, best = -1
    cdef double e, best_end = 0.0
    cdef bint kernels
    cdef PyObject *launch = NULL  # the kind object last found to be "launch"
    cdef PyObject *kind
    for kernels in (True, False):
        for i in range(c.n):
            e = c.end[i]
            if kernels:
                if e != e:
                    return None  # (a NaN: as critical_rank, which the reference then runs)
                kind = col_kind(c, i)
                if kind != launch:
                    if <object>kind != "launch":
                        continue
                    launch = kind
            if best < 0 or e > best_end or (e == best_end and agents[c.agent[i]].rank <
                                            agents[c.agent[best]].rank):
                best = i
                best_end = e
        if best >= 0:
            break
    return (None if best < 0 else agents[c.agent[best]].rank,)

def keying(trace, hazards, type fix_class, type hazard_class, fix_kinds):
    """What ``fixcost.Keying`` computes from a run's findings, by the reference's own steps
    (``Keying.__init__``, ``inject.key_fixes(trace, fixes, dedupe=False)`` and its
    ``injection_keys``, ``fixcost._named_host_ops``): ``(fixes, keyed, sync_of, sync, host)``,
    the hazards' distinct fixes in order, the keyed fix of each sync number (the first of its
    keyed identity), each fix's sync number, each hazard's by its place in ``hazards`` (an
    ``array('i')``, -1: no fix), and host action id -> the key of the fixes that sync before it. None when the reference must run:
    a hazard or fix of another class than those given (or a field never set), a fix keyed
    already, of a kind outside ``fix_kinds`` or naming an op that is not there, that no host
    action issued or that freed nothing (the reference words those errors), an op not an ``Op``.

    The reference hashes each fix's identity and then its keyed identity, tuples holding
    Agents and injection keys (a hash of the Agent dataclass, in Python, per agent in them: most
    of its time). Here each is told apart by seven numbers (``SyncKey``, :class:`_Keys`) that are
    equal exactly when the identities are (see :func:`_keying`)."""
    cdef tuple ops = trace.ops if type(trace.ops) is tuple else tuple(trace.ops)
    return _keying(_OpsReader(ops), hazards, fix_class, hazard_class, fix_kinds)


def keying_columns(columns, hazards, type fix_class, type hazard_class, fix_kinds):
    """:func:`keying` of a run the compiled replay kept as ``columns`` (``_replay.Columns``,
    ``_cols.pxd``), its ops read from them (none made); None as :func:`keying`, or when a
    named op's location is not its line's in the columns' one path (the caller then keys the
    run's ops)."""
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    return _keying(_columns_reader(columns, capsule), hazards, fix_class, hazard_class,
                   fix_kinds)


cdef _ColumnsReader _columns_reader(columns, capsule):
    """A reader of ``columns`` (``capsule``: theirs, held by the caller)."""
    cdef _ColumnsReader r = _ColumnsReader(columns.agents)
    r.c = <OpCols *>PyCapsule_GetPointer(capsule, OPCOLS)
    r.n = r.c.n
    if r.c.path != NULL:  # (else its lines name several paths: no location is a line's)
        r.prefix = f"{<object>r.c.path}:"
    return r


class _Decline(Exception):
    """A run's reader met what the compiled keying does not read (an op not an ``Op``, a field
    never set, attrs not a dict): the reference runs instead."""


cdef class _Reader:
    """What :func:`_keying` reads of a run's ops, one interface for the two ways a run is held:
    its ``Op`` objects (:class:`_OpsReader`) or the compiled replay's columns
    (:class:`_ColumnsReader`). Each method raises :class:`_Decline` where the reference must
    read the ops itself."""
    cdef Py_ssize_t n  # the run's ops (ids 0 .. n - 1)

    cdef Py_ssize_t host_of(self, object op_id) except -3:
        """``key_fixes``' ``host_op(op_id)``: the host action that issued op ``op_id``, or that
        op if it is one; -1 for no place (None); -2 where the reference would fail (no such
        op, no host action issued it)."""
        raise NotImplementedError

    cdef object freed_buffer(self, object before):
        """``str(buffer)`` of the free the host action ``before`` issued (the last such free in
        op order, as the reference's dict by issuer keeps it); None: it freed nothing."""
        raise NotImplementedError

    cdef list named_keys(self, char *named, PtrMap agent_no, dict numbers):
        """``injection_keys(trace, only=the named host actions)``: op id -> the injection key
        ``(agent, kind, location, n)`` of each host action ``named`` marks (None elsewhere),
        counting only the program's actions at the named ones' kinds and locations (a key's n
        counts its own site's actions, an injected one not), each counted action's thread
        numbered in ``agent_no``/``numbers`` in op order (equal agents: one number)."""
        raise NotImplementedError

    cdef list at_sites(self, set lines, set kinds, PtrMap agent_no, dict numbers):
        """``injection_keys``' count of the program's actions at ``lines`` and ``kinds`` (a
        key's n counts its own site's actions only, an injected one not): ``(position, agent,
        kind, location, n, thread number)`` of each, in op order, the thread numbered in
        ``agent_no``/``numbers`` (equal agents: one number)."""
        raise NotImplementedError

    cdef bint is_host(self, Py_ssize_t i) except -1:
        """Whether op ``i`` is a host action."""
        raise NotImplementedError

    cdef Py_ssize_t issuer(self, Py_ssize_t i) except -2:
        """The id of the host action that issued op ``i`` (-1: none, or no op of the run)."""
        raise NotImplementedError

    cdef object start(self, Py_ssize_t i):
        """Op ``i``'s start (the float its ``Op`` holds)."""
        raise NotImplementedError


cdef class _OpsReader(_Reader):
    """A run's ``Op`` objects, each read from its slots."""
    cdef tuple ops
    cdef PtrMap host_kind  # agent address -> 1 a host thread, 0 not
    cdef dict freed_by  # issuing host op id -> the free it issued (made at the first ask)

    def __cinit__(self, tuple ops):
        self.ops, self.n, self.host_kind = ops, len(ops), PtrMap()

    cdef Py_ssize_t host_of(self, object op_id) except -3:
        return _host_of(self.ops, self.n, op_id, self.host_kind)

    cdef object freed_buffer(self, object before):
        if self.freed_by is None:  # {op.issuer: op for op in trace.ops if op.kind == "free"}
            self.freed_by = {}
            for op in self.ops:
                if Py_TYPE(<PyObject *>op) != OP_TYPE or \
                        _slot(<PyObject *>op, OFF[F_KIND]) == NULL:
                    raise _Decline()
                if <object>_slot(<PyObject *>op, OFF[F_KIND]) == "free":
                    self.freed_by[op.issuer] = op
        free = self.freed_by.get(before)
        return None if free is None else str(free.attrs.get("buffer"))

    cdef list at_sites(self, set lines, set kinds, PtrMap agent_no, dict numbers):
        got = _at_sites(self.ops, lines, kinds, self.host_kind, agent_no, numbers)
        if got is None:
            raise _Decline()
        return got

    cdef list named_keys(self, char *named, PtrMap agent_no, dict numbers):
        cdef Py_ssize_t i
        lines, kinds = set(), set()
        for i in range(self.n):
            if named[i]:
                op = self.ops[i]
                lines.add(op.location)
                kinds.add(op.kind)
        key_of = [None] * self.n
        for i, ag, okind, loc, k, t in self.at_sites(lines, kinds, agent_no, numbers):
            if named[i]:
                key_of[i] = (ag, okind, loc, k)
        return key_of

    cdef bint is_host(self, Py_ssize_t i) except -1:
        cdef PyObject *p = <PyObject *>self.ops[i]
        if Py_TYPE(p) != OP_TYPE or _slot(p, OFF[F_AGENT]) == NULL or \
                _slot(p, OFF[F_ID]) == NULL or \
                not PyLong_CheckExact(<object>_slot(p, OFF[F_ID])) or \
                PyLong_AsSsize_t(<object>_slot(p, OFF[F_ID])) != i:
            raise _Decline()  # (an op not an Op, or stored off its id)
        return _is_host(_slot(p, OFF[F_AGENT]), self.host_kind)

    cdef Py_ssize_t issuer(self, Py_ssize_t i) except -2:
        cdef PyObject *iss = _slot(<PyObject *>self.ops[i], OFF[F_ISSUER])
        if iss == <PyObject *>None:
            return -1
        if iss == NULL or not PyLong_CheckExact(<object>iss):
            raise _Decline()
        cdef Py_ssize_t h = PyLong_AsSsize_t(<object>iss)
        return h if 0 <= h < self.n else -1

    cdef object start(self, Py_ssize_t i):
        return self.ops[i].start


cdef class _ColumnsReader(_Reader):
    """A run the compiled replay kept as columns (``_cols.pxd``): an op's location is its
    line's, ``f"{path}:{line}"``, made only for the lines a key names; the owner of ``c`` is
    held by the caller."""
    cdef OpCols *c
    cdef tuple agents  # the columns' agents (``OpCols.agent`` indexes them)
    cdef bytearray host  # agent -> 1 a host thread
    cdef str prefix  # the columns' path and a colon
    cdef dict freed_by  # issuing host op id -> the last free it issued (made at the first ask)

    def __cinit__(self, tuple agents):
        self.agents = agents
        self.host = bytearray([ag.kind == HOST for ag in agents])

    cdef Py_ssize_t host_of(self, object op_id) except -3:
        if op_id is None:
            return -1
        if not PyLong_CheckExact(op_id):
            return -2
        cdef Py_ssize_t i = PyLong_AsSsize_t(op_id)
        if not 0 <= i < self.n:
            return -2
        if self.host[self.c.agent[i]]:
            return i
        return self.c.issuer[i] if self.c.issuer[i] >= 0 else -2

    cdef object freed_buffer(self, object before):
        cdef Py_ssize_t i
        if self.freed_by is None:
            self.freed_by = {}
            for i in range(self.n):
                if <object>col_kind(self.c, i) == "free" and self.c.issuer[i] >= 0:
                    self.freed_by[self.c.issuer[i]] = i
        got = self.freed_by.get(before) if PyLong_CheckExact(before) else None
        if got is None:
            return None
        attrs = <object>col_attrs(self.c, <Py_ssize_t>got)
        if type(attrs) is not dict:
            raise _Decline()
        return str((<dict>attrs).get("buffer"))

    cdef list at_sites(self, set lines, set kinds, PtrMap agent_no, dict numbers):
        # An op's location is its line's (one path): the locations wanted are found by their
        # line number (:meth:`counted` counts their actions)
        if self.prefix is None:
            raise _Decline()  # (lines of several paths: a location is not its line number)
        cdef Py_ssize_t last = self.last_line(), n
        cdef Block b_at = Block((last + 1) * sizeof(PyObject *))
        cdef PyObject **at = <PyObject **>b_at.p  # line -> its wanted location (borrowed), NULL
        memset(at, 0, (last + 1) * sizeof(PyObject *))
        cdef Py_ssize_t plen = len(self.prefix)
        for x in lines:
            if type(x) is str and (<str>x).startswith(self.prefix):
                n = line_number_at(<str>x, plen, last + 1)
                if n >= 0:
                    at[n] = <PyObject *>x
        return self.counted(at, last, kinds, agent_no, numbers, NULL)

    cdef list named_keys(self, char *named, PtrMap agent_no, dict numbers):
        # The lines of the named actions are marked by number, each with its location (made
        # once a line: :meth:`counted` counts their actions and keys the named ones)
        if self.prefix is None:
            raise _Decline()  # (lines of several paths: a location is not its line number)
        cdef OpCols *c = self.c
        cdef Py_ssize_t i, last = self.last_line()
        cdef Block b_at = Block((last + 1) * sizeof(PyObject *))
        cdef PyObject **at = <PyObject **>b_at.p  # line -> its location (in ``held``), NULL
        memset(at, 0, (last + 1) * sizeof(PyObject *))
        cdef list held = []
        cdef set kinds = set()
        for i in range(self.n):
            if named[i]:
                if c.line[i] <= 0:
                    raise _Decline()  # (a fix's sync, of no line: not in a first run)
                if at[c.line[i]] == NULL:
                    loc = f"{self.prefix}{c.line[i]}"
                    held.append(loc)
                    at[c.line[i]] = <PyObject *>loc
                kinds.add(<object>col_kind(c, i))
        return self.counted(at, last, kinds, agent_no, numbers, named)

    cdef Py_ssize_t last_line(self) noexcept:
        """The largest line number of the columns' ops."""
        cdef Py_ssize_t i, last = 0
        for i in range(self.n):
            if self.c.line[i] > last:
                last = self.c.line[i]
        return last

    cdef list counted(self, PyObject **at, Py_ssize_t last, set kinds, PtrMap agent_no,
                      dict numbers, char *named):
        """``at_sites`` of the locations ``at`` holds by line number (up to ``last``): each
        line's actions of ``kinds`` counted in C. A line's count is its site's, (thread, kind,
        location), while every action counted at it is of one thread and kind (an op log's line
        is one action; else the reference counts, on the ops). With ``named``: instead of the
        counted actions, ``named_keys``' list, the key of each named one."""
        cdef OpCols *c = self.c
        cdef Py_ssize_t i, a, t, line, nag = len(self.agents)
        cdef Block b_count = Block((last + 1) * sizeof(int))
        cdef int *count = <int *>b_count.p  # line -> its actions counted so far
        cdef Block b_first = Block((last + 1) * sizeof(int))
        cdef int *first = <int *>b_first.p  # line -> the agent of its first action counted
        cdef Block b_kind = Block((last + 1) * sizeof(PyObject *))
        cdef PyObject **kind_of = <PyObject **>b_kind.p  # line -> that action's kind
        memset(count, 0, (last + 1) * sizeof(int))
        cdef Block b_no = Block((nag + 1) * sizeof(Py_ssize_t))
        cdef Py_ssize_t *number = <Py_ssize_t *>b_no.p  # agent -> its thread number, or -1
        for a in range(nag):
            number[a] = -1
        cdef bytearray host = self.host
        cdef list out = [None] * self.n if named != NULL else []
        cdef PyObject *okind
        for i in range(self.n):
            a = c.agent[i]
            line = c.line[i]
            if not host[a] or line <= 0 or at[line] == NULL:
                continue  # (line 0: a fix's sync, no line's action; else no key's line)
            okind = col_kind(c, i)
            if not <object>okind in kinds:
                continue
            if type(<object>col_attrs(c, i)) is not dict:
                raise _Decline()
            if (<dict>col_attrs(c, i)).get("injected"):
                continue
            if count[line] == 0:
                first[line], kind_of[line] = a, okind
            elif first[line] != a or (kind_of[line] != okind and
                                      not <object>kind_of[line] == <object>okind):
                raise _Decline()  # (two sites at one line: not an op log's line)
            t = number[a]
            if t < 0:
                t = number[a] = _agent_number(<PyObject *>self.agents[a], agent_no, numbers)
            if named == NULL:
                out.append((i, self.agents[a], <object>okind, <object>at[line], count[line], t))
            elif named[i]:
                out[i] = (self.agents[a], <object>okind, <object>at[line], count[line])
            count[line] += 1
        return out

    cdef bint is_host(self, Py_ssize_t i) except -1:
        return self.host[self.c.agent[i]]

    cdef Py_ssize_t issuer(self, Py_ssize_t i) except -2:
        return self.c.issuer[i]

    cdef object start(self, Py_ssize_t i):
        return self.c.start[i]


cdef struct SyncKey:
    # A fix's identity as numbers (``_Keys``): its kind, its three places (op ids, or the host
    # actions keyed; -1: None), its two streams' agent numbers and its buffer's number (-1: None)
    long long f[7]


cdef class _Keys:
    """Distinct :c:type:`SyncKey` values, numbered in the order first put: an open-addressing
    table of numbers over an array of the keys, where the reference hashes a tuple of Agents
    and ints per fix (a tuple and a dict entry each: at 1,000,000 lines of the random program,
    299,760 fixes, keying's resident memory was 364 MB)."""
    cdef SyncKey *keys
    cdef Py_ssize_t *slots  # a key's number + 1 (0: an empty slot)
    cdef Py_ssize_t n, mask
    cdef bint added  # whether the last :meth:`number` put a new key

    def __cinit__(self, Py_ssize_t expect):
        cdef Py_ssize_t cap = 16
        while cap < 2 * expect + 2:
            cap *= 2
        self.keys = <SyncKey *>PyMem_Malloc((expect + 1) * sizeof(SyncKey))
        self.slots = <Py_ssize_t *>PyMem_Malloc(cap * sizeof(Py_ssize_t))
        if self.keys == NULL or self.slots == NULL:
            raise MemoryError()
        memset(self.slots, 0, cap * sizeof(Py_ssize_t))
        self.mask = cap - 1

    def __dealloc__(self):
        PyMem_Free(self.keys)
        PyMem_Free(self.slots)

    cdef Py_ssize_t number(self, SyncKey *k) noexcept:
        """The number of key ``k``: an equal one's, else the next (``expect`` keys at most)."""
        cdef uint64_t h = 14695981039346656037ULL
        cdef int f
        for f in range(7):
            h = (h ^ <uint64_t>k.f[f]) * 1099511628211ULL
            h ^= h >> 29
        cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>self.mask), x
        while True:
            x = self.slots[i]
            if x == 0:
                break
            if memcmp(&self.keys[x - 1], k, sizeof(SyncKey)) == 0:
                self.added = False
                return x - 1
            i = (i + 1) & self.mask
        self.keys[self.n] = k[0]
        self.slots[i] = self.n + 1
        self.n += 1
        self.added = True
        return self.n - 1


cdef object _keying(_Reader r, hazards, type fix_class, type hazard_class, fix_kinds):
    """:func:`keying`'s steps, the run's ops read through ``r``. Fixes are told apart by their
    :c:type:`SyncKey` (:class:`_Keys`), equal exactly when their identities are: the kind and
    buffer by a number per distinct value, an agent by its number (equal agents: one number),
    a place by its op id, and a keyed place by the id of its host action (two host actions
    never share a key, and each of a fix's ops has one: the one that issued it, or itself)."""
    cdef Py_ssize_t HOFF[<int>N_HAZARD_FIELDS]
    cdef Py_ssize_t XOFF[<int>N_FIX_FIELDS]
    hazard_offsets(hazard_class, HOFF)
    fix_offsets(fix_class, XOFF)
    check_generic_alloc(fix_class)
    cdef PyTypeObject *HAZ = <PyTypeObject *>hazard_class
    cdef PyTypeObject *FIX = <PyTypeObject *>fix_class
    cdef Py_ssize_t nops = r.n, nh = len(hazards), i, j, pos, nf
    cdef PyObject *p
    cdef PyObject *v
    cdef PtrMap agent_no = PtrMap()  # agent address -> its number (equal agents: one number)
    cdef dict numbers = {}  # agent -> its number
    cdef dict values = {}  # a fix's kind or buffer -> its number (SyncKey's)
    cdef SyncKey key

    # 1. The hazards' distinct fixes (Keying's first loop), told apart by their plain identity.
    cdef list fixes = []
    cdef _Keys plain = _Keys(nh)
    cdef Block b_fix_of = Block(nh * sizeof(Py_ssize_t))
    cdef Py_ssize_t *fix_of = <Py_ssize_t *>b_fix_of.p  # hazard position -> its fix (-1: none)
    for pos in range(nh):
        p = <PyObject *>hazards[pos]
        if Py_TYPE(p) != HAZ:
            return None
        v = _slot(p, HOFF[H_FIX])
        if v == NULL:
            return None
        fix_of[pos] = -1
        if v == <PyObject *>None:
            continue
        if not _plain_key(<object>v, FIX, XOFF, agent_no, numbers, values, &key):
            return None
        i = plain.number(&key)
        if plain.added:
            fixes.append(<object>v)
        fix_of[pos] = i

    # 2. key_fixes(trace, fixes, dedupe=False): the host action of each place each fix names
    nf = len(fixes)
    cdef Block b_named = Block(nops)
    cdef char *named = <char *>b_named.p  # host op id -> 1 named by a fix
    memset(named, 0, nops)
    cdef Block b_places = Block(3 * (nf + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *places = <Py_ssize_t *>b_places.p  # per fix: its places' host op ids (-1)
    cdef dict freed = {}  # a record_stream fix -> the buffer its keyed form names
    cdef Py_ssize_t hb, hh, hr
    try:
        for j in range(nf):
            p = <PyObject *>fixes[j]
            kind = <object>_slot(p, XOFF[X_KIND])
            if kind not in fix_kinds:
                return None  # (the reference raises: "cannot apply a fix of kind ...")
            hb = r.host_of(<object>_slot(p, XOFF[X_BEFORE]))
            hh = r.host_of(<object>_slot(p, XOFF[X_HANDLE_OP]))
            hr = r.host_of(<object>_slot(p, XOFF[X_RECORD_AFTER]))
            if hb < 0 or hh < -1 or hr < -1:
                return None  # (no such op, or no host action issued it: the reference words it)
            named[hb] = 1
            if hh >= 0:
                named[hh] = 1
            if hr >= 0:
                named[hr] = 1
            if kind == "record_stream":
                buffer = r.freed_buffer(<object>_slot(p, XOFF[X_BEFORE]))
                if buffer is None:
                    return None  # (the reference raises: "... which freed nothing")
                freed[j] = buffer
            places[3 * j], places[3 * j + 1], places[3 * j + 2] = hb, hh, hr
        key_of = r.named_keys(named, agent_no, numbers)
    except _Decline:
        return None

    # each fix keyed (the reference's type(fix)(...), made by its slots), numbered by its keyed
    # identity (Keying's second loop), and the host action its sync goes before (_named_host_ops)
    cdef list keyed = []  # sync number -> the first keyed fix of its identity
    cdef list sync_of = []  # fix index -> sync number
    cdef _Keys numbered = _Keys(nf)
    cdef Block b_sync = Block((nf + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *sync_no = <Py_ssize_t *>b_sync.p  # (sync_of, in C)
    cdef dict host = {}
    for j in range(nf):
        fix = fixes[j]
        p = <PyObject *>fix
        hb, hh, hr = places[3 * j], places[3 * j + 1], places[3 * j + 2]
        kb = key_of[hb]
        kh = key_of[hh] if hh >= 0 else None
        kr = key_of[hr] if hr >= 0 else None
        if kb is None or (hh >= 0 and kh is None) or (hr >= 0 and kr is None):
            return None  # (an injected action, or no host thread's: the reference's KeyError)
        buffer = freed.get(j) if freed else None
        key = plain.keys[j]  # (its kind and streams; its places keyed, its buffer the freed one)
        key.f[1], key.f[2], key.f[3] = hb, hh, hr
        key.f[6] = -1 if buffer is None else _value_number(values, buffer)
        i = numbered.number(&key)
        if numbered.added:
            keyed.append(fix_record(fix_class, XOFF, <object>_slot(p, XOFF[X_KIND]),
                                    <object>_slot(p, XOFF[X_TEXT]), kb, kh, kr,
                                    <object>_slot(p, XOFF[X_EVENT_STREAM]),
                                    <object>_slot(p, XOFF[X_WAIT_STREAM]), buffer))
        sync_of.append(i)
        sync_no[j] = i
        host[hb] = kb
    cdef array.array sync = array.clone(_INTS, nh, zero=False)  # hazard position -> sync, -1
    for pos in range(nh):
        sync.data.as_ints[pos] = -1 if fix_of[pos] < 0 else <int>sync_no[fix_of[pos]]
    return fixes, keyed, sync_of, sync, host


cdef array.array _INTS = array.array("i")


cdef Py_ssize_t _value_number(dict values, object x) except -1:
    """The number of a fix's kind or buffer ``x`` (equal values: one number)."""
    got = values.get(x)
    if got is None:
        got = values[x] = len(values)
    return got


cdef bint _plain_key(object fix, PyTypeObject *FIX, Py_ssize_t *XOFF, PtrMap agent_no,
                     dict numbers, dict values, SyncKey *key) except -1:
    """Fill ``key`` with a fix's ``identity`` (each agent as its number, its kind and buffer as
    theirs): equal exactly when the identities are. False when the fix is of another class, has
    a field never set, or is keyed already (a place that is not an int: the reference keeps such
    a fix as it is), or a place past a long long."""
    cdef PyObject *p = <PyObject *>fix
    cdef int f, overflow = 0
    if Py_TYPE(p) != FIX:
        return False
    for f in range(<int>N_FIX_FIELDS):
        if _slot(p, XOFF[f]) == NULL:
            return False
    places = (<object>_slot(p, XOFF[X_BEFORE]), <object>_slot(p, XOFF[X_HANDLE_OP]),
              <object>_slot(p, XOFF[X_RECORD_AFTER]))
    for f in range(3):
        x = places[f]
        if x is None and f > 0:
            key.f[1 + f] = -1
            continue
        if not PyLong_CheckExact(x):
            return False
        key.f[1 + f] = PyLong_AsLongLongAndOverflow(x, &overflow)
        if overflow or key.f[1 + f] < 0:
            return False  # (no op of that id: the reference words it)
    key.f[0] = _value_number(values, <object>_slot(p, XOFF[X_KIND]))
    es, ws = <object>_slot(p, XOFF[X_EVENT_STREAM]), <object>_slot(p, XOFF[X_WAIT_STREAM])
    key.f[4] = -1 if es is None else _agent_number(<PyObject *>es, agent_no, numbers)
    key.f[5] = -1 if ws is None else _agent_number(<PyObject *>ws, agent_no, numbers)
    buffer = <object>_slot(p, XOFF[X_BUFFER])
    key.f[6] = -1 if buffer is None else _value_number(values, buffer)
    return True


cdef list _at_sites(tuple ops, set lines, set kinds, PtrMap host_kind, PtrMap agent_no,
                    dict numbers):
    """``injection_keys``' count of the program's actions, restricted to the kinds and
    locations of the keys wanted (a key's n counts its own site's actions only): ``(position,
    agent, kind, location, n, thread number)`` of each action counted, in op order. None when
    the reference must scan: an op not exactly an ``Op``, a field the scans read never set, op
    ids that are not positions, attrs that are not a dict."""
    cdef list out = []
    cdef dict seen = {}  # (thread number, kind, location) -> actions counted
    cdef Py_ssize_t i, t
    cdef PyObject *p
    cdef PyObject *loc
    cdef PyObject *okind
    cdef PyObject *ag
    cdef PyObject *oid
    cdef PyObject *v
    for i in range(len(ops)):
        p = <PyObject *>ops[i]
        if Py_TYPE(p) != OP_TYPE:
            return None
        loc, okind = _slot(p, OFF[F_LOCATION]), _slot(p, OFF[F_KIND])
        ag, oid = _slot(p, OFF[F_AGENT]), _slot(p, OFF[F_ID])
        if loc == NULL or okind == NULL or ag == NULL or oid == NULL or \
                _slot(p, OFF[F_ISSUER]) == NULL or _slot(p, OFF[F_START]) == NULL:
            return None
        if not PyLong_CheckExact(<object>oid) or PyLong_AsSsize_t(<object>oid) != i:
            return None  # (ops stored off their ids: the reference's trace.op asserts)
        if not _is_host(ag, host_kind):  # (first: half the ops, and no hash)
            continue
        if not (<object>loc in lines and <object>okind in kinds):
            continue
        v = _slot(p, OFF[F_ATTRS])
        if v == NULL or type(<object>v) is not dict:
            return None
        if (<dict>v).get("injected"):
            continue
        t = _agent_number(ag, agent_no, numbers)
        site = (t, <object>okind, <object>loc)
        n = seen.get(site, 0)
        seen[site] = n + 1
        out.append((i, <object>ag, <object>okind, <object>loc, n, t))
    return out


cdef Py_ssize_t _agent_number(PyObject *ag, PtrMap agent_no, dict numbers) except -1:
    """The number of agent ``ag``: one per distinct agent by equality, found by its address."""
    cdef Py_ssize_t t = agent_no.get(<uintptr_t>ag)
    if t < 0:
        t = numbers.setdefault(<object>ag, len(numbers))
        agent_no.put(<uintptr_t>ag, t)
    return t


cdef bint _is_host(PyObject *ag, PtrMap host_kind) except -1:
    """Whether agent ``ag`` is a host thread (its kind read once per agent object)."""
    cdef Py_ssize_t k = host_kind.get(<uintptr_t>ag)
    if k < 0:
        k = 1 if (<object>ag).kind == HOST else 0
        host_kind.put(<uintptr_t>ag, k)
    return k == 1


cdef Py_ssize_t _host_of(tuple ops, Py_ssize_t nops, object op_id, PtrMap host_kind) except -3:
    """``key_fixes``' ``host_op(op_id)``: the host action that issued op ``op_id``, or that op
    if it is one; -1 for no place (None); -2 where the reference would fail (no such op, an op
    not an ``Op`` or stored off its id, an issuer that is not an op id)."""
    if op_id is None:
        return -1
    if not PyLong_CheckExact(op_id):
        return -2
    cdef Py_ssize_t i = PyLong_AsSsize_t(op_id)
    if not 0 <= i < nops:
        return -2
    cdef PyObject *p = <PyObject *>ops[i]
    if Py_TYPE(p) != OP_TYPE or _slot(p, OFF[F_ID]) == NULL or _slot(p, OFF[F_AGENT]) == NULL \
            or _slot(p, OFF[F_ISSUER]) == NULL or <object>_slot(p, OFF[F_ID]) != op_id:
        return -2
    if _is_host(_slot(p, OFF[F_AGENT]), host_kind):
        return i
    iss = <object>_slot(p, OFF[F_ISSUER])
    if not PyLong_CheckExact(iss):
        return -2
    i = PyLong_AsSsize_t(iss)
    return i if 0 <= i < nops else -2


def shift(dict starts, fixed, keyed):
    """The scans and the walk of ``fixcost.fix_shift(trace, fixed, keyed, starts)``, up to its
    sums: ``(n, moved)``, how many of the keys the syncs sit before have an op delayed in both
    runs, and the shifts above 1e-6 of those, in the keys' order (``_key_order``), for the caller's
    ``max`` and ``sum`` (Python's: from 3.12 its float sum is compensated). ``starts``: the start of
    the run's delayed op of each key (``Keying.delayed_start``); ``fixed``: the run re-simulated with
    ``keyed``. None when the reference must run (a key that is not a 4-tuple, an op of another
    type than ``Op`` or with a field never set).

    The reference looks each key up in a set and two dicts, and sorts the keys by a Python key
    function: each a hash of the Agent dataclass in Python. Here each distinct key is numbered
    once by a tuple of ints and strings (its agent by number, equal agents one number), the
    re-run's scan (``_keyed_host_ops`` and ``_delayed_ops``) keeps its state by that number, a
    key of the run's ``starts`` is found by its address first (the keys are the keyed fixes'
    own objects), and the keys are sorted with each agent as its place in the agents' order."""
    return _shift(_OpsReader(fixed.ops if type(fixed.ops) is tuple else tuple(fixed.ops)),
                  starts, keyed)


def shift_columns(dict starts, columns, keyed):
    """:func:`shift` with the re-run ``columns`` holds (``_replay.Columns``, ``_cols.pxd``),
    its scans read from the columns; None as :func:`shift`."""
    capsule = columns.capsule()  # (``columns`` holds what it points into)
    return _shift(_columns_reader(columns, capsule), starts, keyed)


cdef object _shift(_Reader r, dict starts, keyed):
    """:func:`shift`'s scans and walk, the re-run read through ``r``: its host actions at the
    keys (``_keyed_host_ops``), then the op each key's sync delays there (:func:`_delayed`)."""
    cdef _ShiftKeys K = _shift_keys(keyed)
    if K is None:
        return None
    cdef Py_ssize_t n = r.n, i
    cdef Block b_of = Block((n + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *key_of = <Py_ssize_t *>b_of.p  # op id -> index of its key, or -1
    for i in range(n):
        key_of[i] = -1
    cdef Block b_chosen = Block((K.nk + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *chosen = <Py_ssize_t *>b_chosen.p  # key index -> the op delayed, or -1
    try:
        for i, ag, okind, loc, k, t in r.at_sites(K.lines, K.kinds, K.agent_no, K.numbers):
            got = K.want.get((t, okind, loc, k))
            if got is not None:
                key_of[i] = <Py_ssize_t>got
        _delayed(r, key_of, K.nk, chosen)
        after = [None if chosen[i] < 0 else r.start(chosen[i]) for i in range(K.nk)]
    except _Decline:
        return None
    return _shift_of(K, starts, after)


cdef class _ShiftKeys:
    """The keys a shift is measured at (:func:`_shift_keys`)."""
    cdef PtrMap agent_no
    cdef dict numbers  # agent (by equality) -> its number
    cdef dict want  # (agent number, kind, location, n) -> index of the distinct key
    cdef list keys  # index -> the key (its first object)
    cdef Py_ssize_t nk
    cdef set lines, kinds  # the keys' locations and kinds


cdef _ShiftKeys _shift_keys(keyed):
    """The distinct keys the syncs of ``keyed`` sit before, each numbered once by a tuple of
    ints and strings (its agent by number, equal agents one number); None when a key is not a
    4-tuple (the reference runs)."""
    cdef _ShiftKeys K = _ShiftKeys.__new__(_ShiftKeys)
    K.agent_no = PtrMap()
    K.numbers, K.want, K.keys = {}, {}, []
    for kf in keyed:
        k = kf.before
        if type(k) is not tuple or len(<tuple>k) != 4:
            return None
        ag = (<tuple>k)[0]
        cheap = (_agent_number(<PyObject *>ag, K.agent_no, K.numbers), (<tuple>k)[1],
                 (<tuple>k)[2], (<tuple>k)[3])
        if K.want.setdefault(cheap, len(K.keys)) == len(K.keys):
            K.keys.append(k)
    K.nk = len(K.keys)
    K.lines = {k[2] for k in K.keys}
    K.kinds = {k[1] for k in K.keys}
    return K


cdef object _key_order(_ShiftKeys K, dict place):
    """The keys' indices in ``_key_order`` (``place``: each agent number's place in the agents'
    order): as sorted() of (place, kind, location, n) tuples, which compared their items one by
    one through the generic comparison (60,000 keys: 0.05 s). Where every location is one
    prefix and then at most 18 ASCII digits (an op log's: its path, a colon, the line
    number), each is ranked by an int that orders as the strings do (:func:`_digits_rank`),
    each kind by its place among the few distinct ones, and the ranks are sorted in C; else
    the tuples are sorted."""
    cdef Py_ssize_t m = len(K.want), j = 0, start = -1, width = 0, size
    kinds = set()
    prefix = None
    for cheap in K.want:
        loc, n = (<tuple>cheap)[2], (<tuple>cheap)[3]
        if type((<tuple>cheap)[1]) is not str or type(loc) is not str or type(n) is not int \
                or not -_N_BOUND < n < _N_BOUND:
            break
        if prefix is None:
            start = (<str>loc).rfind(":") + 1
            prefix = (<str>loc)[:start]
        size = len(<str>loc) - start
        if size < 1 or size > 18 or not (<str>loc).startswith(prefix) or \
                _digits_rank(<str>loc, start, size) < 0:
            break
        width = max(width, size)
        kinds.add((<tuple>cheap)[1])
    else:
        return _ranked(K, place, kinds, start, width)
    order = sorted([(place[c[0]], c[1], c[2], c[3], i) for c, i in K.want.items()])
    return [entry[4] for entry in order]


_N_BOUND = 2 ** 62


cdef object _ranked(_ShiftKeys K, dict place, set kinds, Py_ssize_t start, Py_ssize_t width):
    """:func:`_key_order` by ranks: every location checked to be the prefix and ``start`` on
    digits, at most ``width`` of them."""
    cdef Py_ssize_t m = len(K.want), j = 0
    cdef dict kind_rank = {k: r for r, k in enumerate(sorted(kinds))}
    cdef Block b = Block((m + 1) * sizeof(KeyAt))
    cdef KeyAt *at = <KeyAt *>b.p
    for cheap, i in K.want.items():
        loc = (<tuple>cheap)[2]
        at[j].place = place[(<tuple>cheap)[0]]
        at[j].kind = kind_rank[(<tuple>cheap)[1]]
        at[j].loc = _digits_rank(<str>loc, start, width)
        at[j].n = (<tuple>cheap)[3]
        at[j].i = i
        j += 1
    qsort(at, m, sizeof(KeyAt), _cmp_key)
    return [at[j].i for j in range(m)]


cdef long long _digits_rank(str loc, Py_ssize_t start, Py_ssize_t width) except -2:
    """An int that orders the digits ``loc[start:]`` as strings order (a shorter string before
    those it begins: "12" < "123" < "13"), for strings of at most ``width`` <= 18 digits: each
    digit d is d + 1 in base 11 from the left, a digit past the end 0; -1 when one is no ASCII
    digit."""
    cdef long long r = 0
    cdef Py_ssize_t k, size = len(loc)
    cdef Py_UCS4 ch
    for k in range(start, start + width):
        r *= 11
        if k < size:
            ch = loc[k]
            if ch < 48 or ch > 57:
                return -1
            r += <long long>ch - 47
    return r


cdef tuple _shift_of(_ShiftKeys K, dict starts, list after_start):
    """The walk of :func:`shift` once the re-run's scans found, per key, the start of the op its
    sync delays there (``after_start``; None: none): ``(n, moved)``."""
    cdef Py_ssize_t i, t, nk = K.nk
    cdef list keys = K.keys
    # the start of the run's delayed op of each key: by the key object's address (Keying's
    # keys are the keyed fixes' own objects), else by value
    cdef PtrMap by_address = PtrMap()
    cdef list run_starts = []
    for k, x in starts.items():
        by_address.put(<uintptr_t><PyObject *>k, len(run_starts))
        run_starts.append(x)
    cdef list before = [None] * nk
    for i in range(nk):
        k = keys[i]
        t = by_address.get(<uintptr_t><PyObject *>k)
        before[i] = run_starts[t] if t >= 0 else starts.get(k)

    # the keys in _key_order: each agent by its place in the agents' (rank, kind, name) order
    cdef dict place = {}
    for ag, t in sorted(K.numbers.items(), key=lambda x: (x[0].rank, x[0].kind, x[0].name)):
        place[t] = len(place)
    cdef list moved = []
    cdef Py_ssize_t count = 0
    for i in _key_order(K, place):
        x, y = before[i], after_start[i]
        if x is not None and y is not None:
            d = y - x
            count += 1
            if d > 1e-6:
                moved.append(d)
    return count, moved
