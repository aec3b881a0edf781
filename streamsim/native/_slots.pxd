# cython: language_level=3
"""Reading a slots class's fields directly: the compiled passes' one way to read (and the compiled
replay's to fill) an ``Op``, an ``Access`` or a ``View``, the reader's to fill (and the replay's to read) a ``Line`` (streamsim/trace.py: slots dataclasses),
and the compiled fixes' and JSON tables' a ``Hazard`` and a ``Fix`` (streamsim/analysis/findings.py).

Each field of a slots class is a member descriptor at a fixed offset in the object. A load at that
offset is what ``getattr`` ends in, without the type's attribute lookup and the descriptor call on
the way (that lookup was a fifth of the compiled HB pass's time). A pass reads an object this way
only when its type is exactly the class (``Py_TYPE(o) == cls``: a subclass may put a property
where the slot was), and only a slot that is set (a NULL is a field never assigned): where either
fails, it takes its pure-Python reference. Only inline functions: nothing to build on its own.
"""
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.long cimport PyLong_AsLongAndOverflow

cdef extern from "Python.h":
    PyTypeObject *Py_TYPE(PyObject *o)
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member


cdef inline Py_ssize_t slot_offset(type cls, str name) except -1:
    """The offset of ``cls``'s slot ``name`` (TypeError when ``name`` is no slot of it). A field
    read through a descriptor of its own holds its slot's as ``slot`` (``Fix.text``:
    findings._FixText)."""
    descr = cls.__dict__.get(name)
    if descr is not None and type(descr).__name__ != "member_descriptor":
        descr = getattr(descr, "slot", None)
    if descr is None or type(descr).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    return (<PyMemberDescrObject *>descr).d_member.offset


cdef inline PyObject *slot(PyObject *o, Py_ssize_t offset) noexcept:
    """The (borrowed) value of one of ``o``'s slots: NULL when unset."""
    return (<PyObject **>((<char *>o) + offset))[0]


# trace.Op's fields, in its __slots__ order: F_X indexes the offsets op_offsets fills
cdef enum:
    F_ID, F_AGENT, F_INDEX, F_KIND, F_NAME, F_ENQUEUED, F_START, F_END, F_START_SEQ, F_END_SEQ,
    F_ACCESSES, F_ISSUER, F_AFTER, F_JOINS, F_LOCATION, F_STEP, F_LINE, F_HANDLE, F_ATTRS, N_FIELDS


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject *type, Py_ssize_t nitems)
    ctypedef struct PyTypeAlloc "PyTypeObject":
        void *tp_alloc


cdef inline int check_generic_alloc(type cls) except -1:
    """TypeError unless ``cls`` allocates as a Python class does (``PyType_GenericAlloc``): what
    :func:`new_record` relies on."""
    if (<PyTypeAlloc *>cls).tp_alloc != <void *>PyType_GenericAlloc:
        raise TypeError(f"{cls.__name__} does not allocate as a Python class does")
    return 0


cdef inline object new_record(type cls):
    """A new ``cls`` with every slot empty, as ``object.__new__(cls)`` makes it (its
    ``tp_alloc``: ``check_generic_alloc``, at bind time), without the call through
    ``object.__new__``'s argument checks (a tenth of making a record)."""
    return PyType_GenericAlloc(<PyTypeObject *>cls, 0)


cdef inline void put_slot(object o, Py_ssize_t offset, object value) noexcept:
    """Set one of the slots of an object just made (``object.__new__``: every slot empty, so
    nothing to release), where its member descriptor reads it: the compiled stages' one way to
    make a record without a call per field."""
    cdef PyObject **at = <PyObject **>((<char *><PyObject *>o) + offset)
    Py_INCREF(value)
    at[0] = <PyObject *>value


cdef inline object slot_set(object o, Py_ssize_t offset):
    """The value of one of ``o``'s slots (a new reference); AttributeError where it is unset (a
    field never assigned), as ``getattr`` raises it."""
    cdef PyObject *v = slot(<PyObject *>o, offset)
    if v == NULL:
        raise AttributeError(f"{type(o).__name__} has a field never set")
    return <object>v


cdef inline int class_offsets(type cls, tuple names, Py_ssize_t *out) except -1:
    """Fill ``out[i]`` with the offset of ``cls``'s slot ``names[i]``; AssertionError when its
    slots are not ``names``, in that order (a field added, removed or moved: the enums below)."""
    if tuple(cls.__slots__) != names:
        raise AssertionError(f"{cls.__name__}'s slots changed: {cls.__slots__}")
    for i, name in enumerate(names):
        out[i] = slot_offset(cls, name)
    return 0


cdef inline int op_offsets(type op_class, Py_ssize_t *out) except -1:
    """``out[F_X]``: the offset of each of ``op_class``'s slots (``trace.Op``, or a class of its
    slots)."""
    return class_offsets(op_class, ("id", "agent", "index", "kind", "name", "enqueued", "start",
                                    "end", "start_seq", "end_seq", "accesses", "issuer", "after",
                                    "joins", "location", "step", "line", "handle", "attrs"), out)


# streamsim.oplog.schema.Line's fields, in its __slots__ order: L_X indexes the offsets
# line_offsets fills (the compiled reader makes Lines by them, the compiled replay reads them)
cdef enum:
    L_LINENO, L_OP, L_PATH, L_RANK, L_HOST, L_STREAM, L_NAME, L_DUR, L_STEP, L_READS,
    L_WRITES, L_EVENT, L_PEER, L_GROUP, L_HANDLE, L_NBYTES, L_BUFFER, L_TARGET, L_SITE, L_T,
    L_RESULT, L_RARE, N_LINE


# the items of a Line's ``rare`` tuple (schema.RARE_FIELDS, in its order), each read by
# rare_field with its default (schema.RARE_DEFAULTS) where the line has no such tuple
cdef enum:
    R_RANKS, R_BLOCKING, R_BATCH, R_LABEL, R_CHANNEL, R_ROOT, R_ANY_SOURCE, R_INFERRED, N_RARE


cdef inline int line_offsets(type line_class, Py_ssize_t *out) except -1:
    """``out[L_X]``: the offset of each of ``line_class``'s slots (``schema.Line``).
    AssertionError, as for its slots, when the items of its ``rare`` tuple or their defaults
    are not the R_X enum's (``schema.RARE_FIELDS``, ``RARE_DEFAULTS``, which the compiled
    reader writes and the compiled replay reads by position)."""
    import sys
    schema = sys.modules[line_class.__module__]
    if schema.RARE_FIELDS != ("ranks", "blocking", "batch", "label", "channel", "root",
                              "any_source", "inferred") or \
            schema.RARE_DEFAULTS != (None, False, None, None, None, None, False, None):
        raise AssertionError(f"{line_class.__name__}'s rare fields changed: "
                             f"{schema.RARE_FIELDS} = {schema.RARE_DEFAULTS}")
    return class_offsets(line_class, (
        "lineno", "op", "path", "rank", "host", "stream", "name", "dur", "step", "reads",
        "writes", "event", "peer", "group", "handle", "nbytes", "buffer", "target", "site", "t",
        "result", "rare"), out)


cdef inline Py_ssize_t line_number_at(str location, Py_ssize_t start,
                                      Py_ssize_t limit) except -2:
    """The line number ``location[start:]`` is written as, as a Line's location writes it
    (``schema.Line.location``: ``f"{path}:{lineno}"``, Python's digits of an int, no sign, no
    leading zero), if below ``limit``; else -1 (a location ending otherwise is no line's).
    Read in C: a fix costing re-run parses each key's location (``_replay``, ``_metrics``)."""
    cdef Py_ssize_t k, size = len(location), n = 0
    cdef Py_UCS4 ch
    if size <= start or (size - start > 1 and location[start] == "0"):
        return -1
    for k in range(start, size):
        ch = location[k]
        if ch < 48 or ch > 57:  # ("0", "9": ASCII digits only)
            return -1
        n = 10 * n + (<Py_ssize_t>ch - 48)
        if n >= limit:
            return -1
    return n


cdef enum:
    N_VIEW_FIELDS = 5  # trace.View's (rank, buffer, offset, nbytes, pattern)


cdef inline int view_offsets(type view_class, Py_ssize_t *out) except -1:
    """``out[i]``: the offset of each of ``view_class``'s slots (``trace.View``: rank, buffer,
    offset, nbytes, pattern)."""
    return class_offsets(view_class, ("rank", "buffer", "offset", "nbytes", "pattern"), out)


cdef inline object view_record(type view_class, Py_ssize_t *off, object rank, object buffer,
                               object offset, object nbytes, object pattern):
    """``View(rank, buffer, offset, nbytes, pattern)`` made by its slots (``off``: what
    :func:`view_offsets` filled; ``check_generic_alloc`` of the class at bind time), without the
    dataclass ``__init__`` call (a recorded log makes views at every alloc)."""
    v = new_record(view_class)
    put_slot(v, off[0], rank)
    put_slot(v, off[1], buffer)
    put_slot(v, off[2], offset)
    put_slot(v, off[3], nbytes)
    put_slot(v, off[4], pattern)
    return v


# streamsim.analysis.findings' Hazard and Fix, their fields in __slots__ order: H_X and X_X index
# the offsets hazard_offsets and fix_offsets fill
cdef enum:
    H_KIND, H_RANK, H_BUFFER, H_RANGE, H_FIRST, H_SECOND, H_FIRST_MODE, H_SECOND_MODE,
    H_MANIFEST, H_FIX, N_HAZARD_FIELDS
cdef enum:
    X_KIND, X_TEXT, X_BEFORE, X_HANDLE_OP, X_RECORD_AFTER, X_EVENT_STREAM, X_WAIT_STREAM,
    X_BUFFER, N_FIX_FIELDS


cdef inline int hazard_offsets(type hazard_class, Py_ssize_t *out) except -1:
    return class_offsets(hazard_class, ("kind", "rank", "buffer", "range", "first", "second",
                                        "first_mode", "second_mode", "manifest", "fix"), out)


cdef inline int fix_offsets(type fix_class, Py_ssize_t *out) except -1:
    return class_offsets(fix_class, ("kind", "text", "before", "handle_op", "record_after",
                                     "event_stream", "wait_stream", "buffer"), out)


cdef enum:
    RANGES_MAX = 65536  # the distinct ranges a list's making remembers (then it starts anew)
    ID_INTS = 4096  # the op ids an IdInts remembers (a power of two: by their low bits)


# The int objects of the op ids a maker of many records put in them lately, by the ids' low bits
# (``ID_INTS`` of them, owned): a record names an op by the same int object as the records made
# shortly before it, rather than an int of its own (32 bytes). A maker's records name the same
# op again soon after, mostly: on the random program, 45,809 of the 45,838 repeats among its
# hazards' two ops, and as many among their fixes' two places. Start it with ``ids_init``, end
# it with ``ids_clear``.
ctypedef struct IdInts:
    PyObject *slot[<int>ID_INTS]


cdef inline void ids_init(IdInts *c) noexcept:
    cdef int k
    for k in range(ID_INTS):
        c.slot[k] = NULL


cdef inline void ids_clear(IdInts *c) noexcept:
    cdef int k
    for k in range(ID_INTS):
        Py_XDECREF(c.slot[k])
        c.slot[k] = NULL


cdef inline bint _holds(PyObject *o, long v) noexcept:
    """Whether ``o``, an int an IdInts remembers (or NULL), is op id ``v``."""
    cdef int overflow
    return o != NULL and PyLong_AsLongAndOverflow(<object>o, &overflow) == v


cdef inline object _remembered(PyObject **at, object x):
    """``x``, remembered in slot ``at`` in place of what it held."""
    Py_INCREF(x)
    Py_XDECREF(at[0])
    at[0] = <PyObject *>x
    return x


cdef inline object id_int(IdInts *c, long v):
    """Op id ``v`` as an int object: the one ``c`` remembers for it, else a new one, remembered."""
    cdef PyObject **at = &c.slot[v & (ID_INTS - 1)]
    if _holds(at[0], v):
        return <object>at[0]
    return _remembered(at, v)


cdef inline object same_int(IdInts *c, object x):
    """``x``, or where it is an int (an op id), the equal one ``c`` remembers (``x`` remembered
    where none)."""
    if type(x) is not int:
        return x
    cdef int overflow
    cdef long v = PyLong_AsLongAndOverflow(x, &overflow)
    if overflow:
        return x
    cdef PyObject **at = &c.slot[v & (ID_INTS - 1)]
    if _holds(at[0], v):
        return <object>at[0]
    return _remembered(at, x)
    cdef int overflow
    cdef long v = PyLong_AsLongAndOverflow(x, &overflow)
    if overflow:
        return x
    cdef PyObject **at = &c.slot[v & (ID_INTS - 1)]
    if at[0] != NULL and PyLong_AsLongAndOverflow(<object>at[0], &overflow) == v:
        return <object>at[0]
    Py_INCREF(x)
    Py_XDECREF(at[0])
    at[0] = <PyObject *>x
    return x


cdef inline object hazard_record(type hazard_class, Py_ssize_t *off, dict ranges, object kind,
                                 object rank, object buffer, object lo, object hi, object first,
                                 object second, object first_mode, object second_mode,
                                 bint manifest):
    """A new ``Hazard`` (``hazard_class``, its slots' offsets ``off``: hazard_offsets) with
    these fields and no fix: what its dataclass ``__init__`` makes, without a call per field.
    Its range ``(lo, hi)`` is one tuple with the equal ranges of the hazards made before it with
    the same ``ranges`` (a dict the maker of a list of hazards holds while it makes them): most
    of a log's hazards have few distinct ranges, and a tuple each was 64 bytes a hazard (19 MB
    of the 301,502 hazards at 1,000,000 lines of the random program)."""
    cdef tuple rng = (lo, hi)
    got = ranges.get(rng)
    if got is None:
        if len(ranges) >= RANGES_MAX:
            ranges.clear()
        ranges[rng] = rng
    else:
        rng = <tuple>got
    made = new_record(hazard_class)
    put_slot(made, off[H_KIND], kind)
    put_slot(made, off[H_RANK], rank)
    put_slot(made, off[H_BUFFER], buffer)
    put_slot(made, off[H_RANGE], rng)
    put_slot(made, off[H_FIRST], first)
    put_slot(made, off[H_SECOND], second)
    put_slot(made, off[H_FIRST_MODE], first_mode)
    put_slot(made, off[H_SECOND_MODE], second_mode)
    put_slot(made, off[H_MANIFEST], manifest)
    put_slot(made, off[H_FIX], None)
    return made


cdef inline object fix_record(type fix_class, Py_ssize_t *off, object kind, object text,
                              object before, object handle_op, object record_after,
                              object event_stream, object wait_stream, object buffer):
    """A new ``Fix`` (``fix_class``, its slots' offsets ``off``: fix_offsets) with every field
    set: what its dataclass ``__init__`` makes, without a call per field."""
    fix = new_record(fix_class)
    put_slot(fix, off[X_KIND], kind)
    put_slot(fix, off[X_TEXT], text)
    put_slot(fix, off[X_BEFORE], before)
    put_slot(fix, off[X_HANDLE_OP], handle_op)
    put_slot(fix, off[X_RECORD_AFTER], record_after)
    put_slot(fix, off[X_EVENT_STREAM], event_stream)
    put_slot(fix, off[X_WAIT_STREAM], wait_stream)
    put_slot(fix, off[X_BUFFER], buffer)
    return fix
