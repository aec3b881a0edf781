# cython: language_level=3
"""A line of an op log as a C row (``LRow``), and how its fields are read: what
``_lines.pxd``'s ``Rows`` hold and the compiled replay reads. Only inline functions: nothing to
build on its own (as ``_slots.pxd``)."""
from cpython.object cimport PyObject
from streamsim.native._slots cimport (L_LINENO, L_OP, L_PATH, L_RANK, L_HOST, L_STREAM, L_NAME,
    L_DUR, L_STEP, L_READS, L_WRITES, L_EVENT, L_PEER, L_GROUP, L_HANDLE, L_NBYTES, L_BUFFER,
    L_TARGET, L_SITE, L_T, L_RESULT, L_RARE, N_LINE)

# a row's shared fields, each a number into Rows.vals: RO_X is where field L_X is (_o_of maps)
cdef enum:
    RO_OP, RO_PATH, RO_RANK, RO_HOST, RO_STREAM, RO_NAME, RO_STEP, RO_READS, RO_WRITES, RO_EVENT, RO_PEER,
    RO_GROUP, RO_HANDLE, RO_NBYTES, RO_BUFFER, RO_SITE, RO_RARE, N_RO

# a row's flags: which of its C-valued fields are None
cdef enum:
    NO_DUR = 1
    NO_T = 2


ctypedef struct LRow:
    int o[<int>N_RO]  # each shared field's number in the table (Rows.vals)
    int lineno  # its number in the file (1..INT_MAX-1)
    int target  # a wait's or query's target line; -1: None
    signed char result  # a query's observed result: -1 None, 0 False, 1 True
    unsigned char flags
    double dur, t  # (NO_DUR, NO_T: None)


# One row and the table its numbers index (the table's items: fixed once the rows are made,
# Rows.freeze): what the replay passes around as a line. ``row`` NULL: none.
ctypedef struct LRef:
    const LRow *row
    PyObject **vals


cdef inline int _o_of(int field) noexcept:
    """Where shared field ``field`` (L_X) is in a row's ``o`` (RO_X); -1: a C-valued field."""
    if field == L_OP: return RO_OP
    if field == L_PATH: return RO_PATH
    if field == L_RANK: return RO_RANK
    if field == L_HOST: return RO_HOST
    if field == L_STREAM: return RO_STREAM
    if field == L_NAME: return RO_NAME
    if field == L_STEP: return RO_STEP
    if field == L_READS: return RO_READS
    if field == L_WRITES: return RO_WRITES
    if field == L_EVENT: return RO_EVENT
    if field == L_PEER: return RO_PEER
    if field == L_GROUP: return RO_GROUP
    if field == L_HANDLE: return RO_HANDLE
    if field == L_NBYTES: return RO_NBYTES
    if field == L_BUFFER: return RO_BUFFER
    if field == L_SITE: return RO_SITE
    if field == L_RARE: return RO_RARE
    return -1


cdef inline object _l(LRef ln, int field):
    """Field ``field`` (L_X) of a line, as its ``Line`` holds it: a shared one from the table (a
    borrowed object), a C value made an object."""
    cdef const LRow *r = ln.row
    if field == L_LINENO:
        return r.lineno
    if field == L_TARGET:
        return None if r.target < 0 else r.target
    if field == L_DUR:
        return None if r.flags & NO_DUR else r.dur
    if field == L_T:
        return None if r.flags & NO_T else r.t
    if field == L_RESULT:
        return None if r.result < 0 else r.result == 1
    return <object>ln.vals[r.o[_o_of(field)]]
