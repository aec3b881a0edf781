# cython: language_level=3
"""An op log's lines as C rows (:class:`Rows`, streamsim/native/_lines.pyx): what the compiled
reader hands over as ``OpLog.lines`` and the compiled replay reads, instead of a ``Line`` object a
line (208 bytes, plus its line number's int, its t's float and its duration's: ~270 bytes a line
at a 1,000,000-line check's peak). A row is 96 bytes: the fields a line shares with others (its
kind, names, ref tuples, ...) as numbers into one table of objects, the ones of its own (its
number, its target, its duration, its t, a query's result) as C values. A ``Line`` is made only
where Python reads one (``Rows.__getitem__``)."""
from cpython.object cimport PyObject
from streamsim.native._addrmap cimport AddrMap
from streamsim.native._row cimport LRow, LRef, N_RO


cdef class Rows:
    cdef LRow *rows
    cdef Py_ssize_t n, cap
    cdef list vals  # the shared field values, vals[0] None
    cdef AddrMap at  # an object's address -> its place in vals (the objects vals holds)
    cdef dict by_str, by_int  # a str's, an int's value -> its place (equal values: one object)
    cdef PyObject *last[<int>N_RO]  # per field, the last object added and its place
    cdef int last_at[<int>N_RO]
    cdef PyObject **items  # vals' items, once frozen (NULL before)
    cdef list replaced  # ref tuples replace_refs replaced (kept until freeze: ``at`` keys)
    cdef Py_ssize_t reserve(self) except -1
    cdef int add(self, object line) except -1
    cdef int put(self, Py_ssize_t i, object line) except -1
    cdef int put_values(self, Py_ssize_t i, object lineno, object op, object path, object rank,
                        object host, object stream, object name, double dur, object step,
                        object reads, object writes, object event, object peer, object group,
                        object handle, object nbytes, object buffer, object target,
                        object site, double t, object result, object rare,
                        unsigned char flags) except -1
    cdef int replace_refs(self, dict replace) except -1
    cdef int value(self, object v, int field) except -1
    cdef int freeze(self) except -1
    cdef object line(self, Py_ssize_t i)

    cdef inline LRef ref(self, Py_ssize_t i) noexcept:
        """Row ``i`` (0 <= i < n) with its table (frozen: :meth:`freeze`)."""
        cdef LRef r
        r.row = self.rows + i
        r.vals = self.items
        return r
