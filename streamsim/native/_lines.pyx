# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""An op log's lines as C rows: :class:`Rows` (declared in ``_lines.pxd``, which says why).

The compiled reader (``_decode.second_pass``) adds each line to a ``Rows`` as it is final and
lets its ``Line`` go; the compiled replay (``_replay.replay``) reads rows, and makes them of any
other sequence of ``Line`` s it is given (the pure-Python reader's, a hand-built log's). To
Python, a ``Rows`` is a read-only sequence of ``Line`` s, each made when read (so two reads of
one line give equal ``Line`` s, not one object): ``OpLog.lines`` works as the tuple it was.

A row keeps each field's value exactly: the shared fields are the very objects the line held
(equal ``str`` s and ``int`` s as one of them), and a ``Line`` whose own fields are not what the
readers make (a line number or target that is not an ``int`` a row holds, a ``dur`` or ``t``
that is not a ``float``, a ``result`` that is not a ``bool``, a slot never set) is refused
(TypeError): the replay then leaves the log to its reference, which reads ``Line`` s.
Tests: tests/native/test_lines.py.
"""
from cpython.object cimport PyObject
from cpython.ref cimport Py_REFCNT
from cpython.list cimport PyList_GET_SIZE
from libc.limits cimport INT_MAX
from libc.stdlib cimport free, realloc
from libc.string cimport memset

from streamsim.native._addrmap cimport addrmap_free, addrmap_get, addrmap_init, addrmap_put
from streamsim.native._row cimport *
from streamsim.native._slots cimport (check_generic_alloc, line_offsets, new_record, put_slot,
    slot)

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS(object o)

cdef object Line = None  # streamsim.oplog.schema.Line (bind)
cdef Py_ssize_t _off[<int>N_LINE]  # its slots' offsets (L_X)


cdef inline double _float_field(object x, unsigned char none, unsigned char *flags,
                                str name) except? -1.0:
    """A row's ``dur`` or ``t`` (``name``) given as an object: a float's value, or for None the
    flag ``none`` set in ``flags`` and 0.0; TypeError for anything else (a row holds no other
    type exactly)."""
    if x is None:
        flags[0] |= none
        return 0.0
    if type(x) is not float:
        raise TypeError(f"a {name} a row does not hold")
    return <double>x


def bind(line_class) -> None:
    """Take the reader's ``Line`` class (``streamsim.oplog.schema.Line``): what rows are made of
    and made back into. Its slots must be ``_slots.pxd``'s (AssertionError otherwise)."""
    global Line
    if Line is line_class:
        return
    line_offsets(line_class, _off)
    check_generic_alloc(line_class)
    Line = line_class


cdef class Rows:
    """An op log's lines as rows (``_lines.pxd``): a read-only sequence of ``Line`` s to Python."""

    def __cinit__(self):
        self.rows = NULL
        self.n = self.cap = 0
        self.vals = [None]
        addrmap_init(&self.at)
        addrmap_put(&self.at, <size_t><PyObject *>None, 0)
        self.by_str, self.by_int = {}, {}
        memset(self.last, 0, sizeof(self.last))
        self.items = NULL
        self.replaced = None

    def __dealloc__(self):
        free(self.rows)
        addrmap_free(&self.at)

    cdef int value(self, object v, int field) except -1:
        """The place in ``vals`` of shared field ``field``'s (RO_X) value ``v``: the object's own,
        else an equal ``str``'s or ``int``'s, else ``v`` added."""
        cdef PyObject *p = <PyObject *>v
        cdef Py_ssize_t k
        if v is None:  # (vals[0]: most of a line's fields)
            return 0
        if p == self.last[field]:
            return self.last_at[field]
        # A tuple only the caller holds is not in vals: it is added without a lookup in ``at``
        # (a cache miss each, in a map as large as the log's distinct ref tuples) and not kept
        # there. Most ref tuples come so, made for their line. Should the same tuple come again
        # later, it is added once more: its rows read the same object from two places.
        if type(v) is tuple and Py_REFCNT(v) == 1:
            k = PyList_GET_SIZE(self.vals)
            if k >= INT_MAX:
                raise MemoryError()
            self.vals.append(v)
            self.last[field] = p
            self.last_at[field] = <int>k
            return <int>k
        k = addrmap_get(&self.at, <size_t>p)
        if k < 0:
            t = type(v)
            by = self.by_str if t is str else self.by_int if t is int else None
            got = by.get(v) if by is not None else None
            if got is not None:
                k = <Py_ssize_t>got
            else:
                k = PyList_GET_SIZE(self.vals)
                if k >= INT_MAX:
                    raise MemoryError()
                self.vals.append(v)
                addrmap_put(&self.at, <size_t>p, k)
                if by is not None:
                    by[v] = k
        # (the object vals holds: an equal value found is not held, and its address may be
        # another object's later)
        self.last[field] = <PyObject *>self.vals[k]
        self.last_at[field] = <int>k
        return <int>k

    cdef Py_ssize_t reserve(self) except -1:
        """Room for the next row, filled later (:meth:`put`, :meth:`put_values`): the reader's
        place for a line whose ``Line`` its pass 2 makes. Its line number 0 until filled."""
        cdef LRow *rows
        if self.items != NULL:
            raise TypeError("rows are frozen")
        if self.n == self.cap:
            self.cap = 1024 if self.cap == 0 else 2 * self.cap
            rows = <LRow *>realloc(self.rows, self.cap * sizeof(LRow))
            if rows == NULL:
                raise MemoryError()
            self.rows = rows
        self.rows[self.n].lineno = 0
        self.n += 1
        return self.n - 1

    cdef int add(self, object line) except -1:
        """Add ``line`` (exactly a ``Line``) as the next row; TypeError where a row cannot hold
        it as it is (the module's docstring)."""
        return self.put(self.reserve(), line)

    cdef int put(self, Py_ssize_t i, object line) except -1:
        """Fill row ``i`` (:meth:`reserve`) with ``line``, exactly a ``Line``."""
        cdef PyObject *o = <PyObject *>line
        cdef int f
        cdef unsigned char flags = 0
        cdef double dur, t
        if type(line) is not Line or Line is None:
            raise TypeError("not a Line")
        for f in range(N_LINE):
            if slot(o, _off[f]) == NULL:
                raise TypeError("a Line field never set")
        dur = _float_field(<object>slot(o, _off[L_DUR]), NO_DUR, &flags, "dur")
        t = _float_field(<object>slot(o, _off[L_T]), NO_T, &flags, "t")
        return self.put_values(
            i, <object>slot(o, _off[L_LINENO]), <object>slot(o, _off[L_OP]),
            <object>slot(o, _off[L_PATH]), <object>slot(o, _off[L_RANK]),
            <object>slot(o, _off[L_HOST]), <object>slot(o, _off[L_STREAM]),
            <object>slot(o, _off[L_NAME]), dur, <object>slot(o, _off[L_STEP]),
            <object>slot(o, _off[L_READS]), <object>slot(o, _off[L_WRITES]), <object>slot(o, _off[L_EVENT]),
            <object>slot(o, _off[L_PEER]), <object>slot(o, _off[L_GROUP]),
            <object>slot(o, _off[L_HANDLE]), <object>slot(o, _off[L_NBYTES]),
            <object>slot(o, _off[L_BUFFER]), <object>slot(o, _off[L_TARGET]),
            <object>slot(o, _off[L_SITE]), t, <object>slot(o, _off[L_RESULT]),
            <object>slot(o, _off[L_RARE]), flags)

    cdef int put_values(self, Py_ssize_t i, object lineno, object op, object path, object rank,
                        object host, object stream, object name, double dur, object step,
                        object reads, object writes, object event, object peer, object group,
                        object handle, object nbytes, object buffer, object target,
                        object site, double t, object result, object rare,
                        unsigned char flags) except -1:
        """Fill row ``i`` (:meth:`reserve`) with a line's field values, as its ``Line`` would
        hold them (the compiled reader's pass 1 makes no ``Line``): its ``dur`` and ``t`` as C
        values, None where ``flags`` has NO_DUR, NO_T (then the value is not read); TypeError
        where a row cannot hold a value as it is."""
        cdef LRow *row = self.rows + i
        if type(lineno) is not int or not 1 <= lineno < INT_MAX:
            raise TypeError("a line number a row does not hold")
        if target is None:
            row.target = -1
        elif type(target) is not int or not 0 <= target < INT_MAX:
            raise TypeError("a target a row does not hold")
        else:
            row.target = <int>target
        row.flags = flags & (NO_DUR | NO_T)
        row.dur = 0.0 if flags & NO_DUR else dur
        row.t = 0.0 if flags & NO_T else t
        if result is None:
            row.result = -1
        elif result is True or result is False:
            row.result = 1 if result is True else 0
        else:
            raise TypeError("a result a row does not hold")
        row.o[RO_OP] = self.value(op, RO_OP)
        row.o[RO_PATH] = self.value(path, RO_PATH)
        row.o[RO_RANK] = self.value(rank, RO_RANK)
        row.o[RO_HOST] = self.value(host, RO_HOST)
        row.o[RO_STREAM] = self.value(stream, RO_STREAM)
        row.o[RO_NAME] = self.value(name, RO_NAME)
        row.o[RO_STEP] = self.value(step, RO_STEP)
        row.o[RO_READS] = self.value(reads, RO_READS)
        row.o[RO_WRITES] = self.value(writes, RO_WRITES)
        row.o[RO_EVENT] = self.value(event, RO_EVENT)
        row.o[RO_PEER] = self.value(peer, RO_PEER)
        row.o[RO_GROUP] = self.value(group, RO_GROUP)
        row.o[RO_HANDLE] = self.value(handle, RO_HANDLE)
        row.o[RO_NBYTES] = self.value(nbytes, RO_NBYTES)
        row.o[RO_BUFFER] = self.value(buffer, RO_BUFFER)
        row.o[RO_SITE] = self.value(site, RO_SITE)
        row.o[RO_RARE] = self.value(rare, RO_RARE)
        row.lineno = <int>lineno  # (last: a row is filled once it has its number)
        return 0

    cdef int replace_refs(self, dict replace) except -1:
        """The reader's pass 2 for the rows its pass 1 made: each ref tuple (of ``reads`` or
        ``writes``) that holds a Ref ``replace`` names (by id) holds the one it names instead.
        A tuple is the table's entry for every row that names it, so each is made once; the
        tuple replaced is kept until :meth:`freeze` (its address is a key of ``at``)."""
        cdef Py_ssize_t k
        if not replace:
            return 0
        gone = []
        for k in range(1, PyList_GET_SIZE(self.vals)):
            x = self.vals[k]
            if type(x) is not tuple:
                continue
            for ref in <tuple>x:
                if id(ref) in replace:
                    self.vals[k] = tuple([replace.get(id(y), y) for y in <tuple>x])
                    gone.append(x)
                    break
        if gone:
            self.replaced = gone if self.replaced is None else self.replaced + gone
        return 0

    cdef int freeze(self) except -1:
        """No row is added after: the table's items are fixed (what :meth:`ref` hands out), the
        rows' spare room and the interning maps let go."""
        cdef LRow *rows
        cdef Py_ssize_t i
        if self.items != NULL:
            return 0
        if self.n < self.cap:
            rows = <LRow *>realloc(self.rows, (self.n if self.n else 1) * sizeof(LRow))
            if rows != NULL:
                self.rows = rows
                self.cap = self.n
        for i in range(self.n):
            if self.rows[i].lineno == 0:
                raise AssertionError(f"row {i} was never filled")
        addrmap_free(&self.at)
        self.by_str = self.by_int = self.replaced = None
        self.items = PySequence_Fast_ITEMS(self.vals)
        return 0

    cdef object line(self, Py_ssize_t i):
        """Row ``i`` as the ``Line`` it was made of (equal to it, its shared fields the same
        objects)."""
        cdef LRef ref = self.ref(i)
        cdef int f
        ln = new_record(<type>Line)
        for f in range(N_LINE):
            put_slot(ln, _off[f], _l(ref, f))
        return ln

    # -- the sequence Python sees -------------------------------------------------------------
    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        cdef Py_ssize_t k
        if isinstance(i, slice):
            return tuple([self.line(k) for k in range(*i.indices(self.n))])
        k = i
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError("line index out of range")
        return self.line(k)

    def __iter__(self):
        cdef Py_ssize_t k
        for k in range(self.n):
            yield self.line(k)

    def __eq__(self, other):
        if isinstance(other, (Rows, tuple, list)):
            return len(other) == self.n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self) -> str:
        return f"<Rows: {self.n} lines>"

    def __reduce__(self):
        return tuple, (tuple(self),)  # (a copy elsewhere is the tuple of Lines it stands for)

    def row_bytes(self) -> int:
        """The bytes of the rows themselves (what a test of their size reads)."""
        return self.cap * sizeof(LRow)


def rows_of(lines) -> Rows:
    """``lines`` (``Line`` s) as rows, frozen; TypeError where a row cannot hold one (the
    module's docstring)."""
    cdef Rows out = Rows()
    for ln in lines:
        out.add(ln)
    out.freeze()
    return out


def row_size() -> int:
    """The bytes of one row."""
    return sizeof(LRow)
