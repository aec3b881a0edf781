# cython: language_level=3
"""A run's ops as columns: what a fix costing re-run hands to the compiled measures (its hazards
left, metrics, shift, critical rank) instead of ``Op`` objects.

The compiled replay (``_replay.pyx``) fills one from the arrays it keeps while it runs, and keeps
it alive with everything it points into (its ``Columns`` object, which makes the trace's ``Op``
objects instead when a measure declines); the measures (``_hb.pyx``, ``_metrics.pyx``) read it
through the capsule :data:`OPCOLS` names. Field for field it holds what the ``Op`` slots of the
same run would (streamsim/trace.py), ops by id (id == position):

- ``agent``: the op's agent as its place in the trace's ``agents`` (sorted, as
  ``finish.trace_of`` sorts them), which the owner keeps as a Python tuple beside this;
- ``issuer`` (-1: None), ``line`` (0: None; op-log lines count from 1); not its ``index``
  (its place among its agent's ops), which a reader counts from ``agent`` (an int an op until
  the thirtieth session);
- ``start``, ``end``: the op's times (the floats its ``Op`` would hold);
- ``attr_at``, ``attr_objs``: its attrs, the object its ``Op`` would hold (borrowed from the
  owner), as its place among the run's attrs dicts (each once: the few most ops share, then
  each op's own); read with :func:`col_attrs`. A pointer an op before (the thirtieth session);
- ``acc_at``, ``acc_pool``, ``acc_objs``: its accesses as ints. ``acc_pool[acc_at[i]]`` is how
  many op ``i`` has, and the ints after it their places in ``acc_objs`` (the run's ``Access``
  objects, each once; borrowed): read with :func:`col_nacc`, :func:`col_acc`, and as the tuple
  its ``Op`` holds, :func:`col_accesses`. Ops on the same refs share their ints; an op of none
  has place 0 (``acc_pool[0]``: 0). A tuple an op before (the twenty-ninth session): 48 MB at
  1,000,000 lines of the random program;
- ``aft_at``: its after edges, as its place in the same pool: how many, then each op id, in
  its ``Op``'s order (0: none): read with :func:`col_naft`, :func:`col_aft`. A tuple an op
  before (the thirtieth session), ``()`` for most, and an int object an edge;
- ``kcode``: its kind, as a code into ``kinds`` (each distinct kind once, at most 256): one byte
  an op where a pointer was eight; read with :func:`col_kind`;
- ``step``, ``joins``: its step and its joins (a tuple of op ids) as ``kind`` was, or NULL where
  every op's step is ``step_one`` or no op joins anything (``no_joins``, the empty tuple, for
  each): read with :func:`col_step`, :func:`col_joins` (a log's ops rarely differ in either:
  8 bytes an op each, 16 MB at 1,000,000 lines of the random program);
- ``path``: the log's path, one object for all its lines (borrowed; NULL when its lines name
  several): an op's ``location`` is ``f"{path}:{line}"`` (``schema.Line.location``), made only
  where a measure needs it (a fix's sync sits at that line), not kept an op;
- ``kept``: once the run has let its lines go (``_Run.release_lines``), what its ops read of
  their line, an int a line number: its combination's number in ``combos``, which holds
  ``KEPT_FIELDS`` ints a combination in the order of the ``KEPT_`` names below, each the value's
  number in ``kept_vals`` (the values the kept lines name, each once, borrowed)
  (``_Run.kept_line``; NULL before). Lines share few combinations. KEPT_FIELDS objects a line
  until the twenty-ninth session, then KEPT_FIELDS ints (16 bytes a line more than now); ``handles``: op id -> the handle its line names (a dict,
  borrowed; NULL: none); ``special``: whether some op is a fix's sync (its line 0: its kind and
  name are made of its spec, which these columns do not hold).
- ``readable``: every op's accesses are ``Access`` objects (exactly that class, their mode
  set), each of a ``View`` (exactly): the replay made them so and says it, so
  that a pass need not check each one (False: unknown, checked as an ``Op``'s are).
- ``from_line``: the one dict that stands, in ``attrs``, for a host action's attrs made of its
  line's ``site`` and ``t`` alone (``_Run.host_attrs``: a recorded log's every host action; a
  dict of its own an op was ~200 bytes a line); NULL: no op has it. ``kept_site``, ``kept_t``,
  ``kept_tnone``: then each line number's site (its number in ``kept_vals``) and t (a C double;
  None where ``kept_tnone``), owned by the run (two objects a line, a float each, before);
  :func:`op_field` makes such an op's attrs of them, as the op's ``Op`` holds them
  (:func:`kept_site_t`).

:func:`op_field` reads an op's ``Op`` slot from them, and an :class:`OpSource` reads a trace's
ops by id either from them or as ``Op`` objects (:func:`op_source`, :func:`source_op`,
:func:`source_field`): the analysis of a run kept as columns proposes its fixes, groups its root
causes and writes its JSON rows without making the ops they name.

Only a struct, names and one reader: nothing to build on its own (as ``_slots.pxd``)."""
from cpython.object cimport PyObject
from cpython.pycapsule cimport PyCapsule_GetPointer

from streamsim.native._slots cimport (slot_set, F_ID, F_AGENT, F_KIND, F_NAME, F_START, F_END,
                                      F_ISSUER, F_HANDLE, F_LOCATION, F_STEP, F_LINE, F_ATTRS)


cdef enum:  # what ``kept`` holds of a line, in this order
    KEPT_OP, KEPT_NAME, KEPT_PATH, KEPT_STEP, KEPT_EVENT, KEPT_FIELDS


cdef struct OpCols:
    Py_ssize_t n
    int *agent
    int *issuer
    int *line
    double *start
    double *end
    unsigned char *kcode
    PyObject **kinds
    PyObject *path
    PyObject **step
    PyObject *step_one
    int *attr_at
    PyObject **attr_objs
    int *acc_at
    int *acc_pool
    PyObject **acc_objs
    int *aft_at
    PyObject **joins
    PyObject *no_joins
    int *kept
    Py_ssize_t nkept
    int *combos
    PyObject **kept_vals
    PyObject *handles
    bint special
    PyObject *from_line
    int *kept_site
    double *kept_t
    unsigned char *kept_tnone
    bint readable


cdef extern from *:
    """
    #define STREAMSIM_OPCOLS "streamsim.native.OpCols"
    """
    const char *OPCOLS "STREAMSIM_OPCOLS"


cdef inline PyObject *col_kind(OpCols *c, Py_ssize_t i) noexcept:
    """Op ``i``'s kind (borrowed)."""
    return c.kinds[c.kcode[i]]


cdef inline int col_nacc(OpCols *c, Py_ssize_t i) noexcept:
    """How many accesses op ``i`` has."""
    return c.acc_pool[c.acc_at[i]]


cdef inline PyObject *col_acc(OpCols *c, Py_ssize_t i, int k) noexcept:
    """Op ``i``'s ``k``-th access (borrowed): reads first, then writes, as its ``Op`` lists them."""
    return c.acc_objs[c.acc_pool[c.acc_at[i] + 1 + k]]


cdef inline tuple col_accesses(OpCols *c, Py_ssize_t i):
    """Op ``i``'s accesses as its ``Op`` holds them: a tuple, made now."""
    cdef int n = col_nacc(c, i), k
    cdef list out = [None] * n
    for k in range(n):
        out[k] = <object>col_acc(c, i, k)
    return tuple(out)


cdef inline PyObject *col_attrs(OpCols *c, Py_ssize_t i) noexcept:
    """Op ``i``'s attrs (borrowed)."""
    return c.attr_objs[c.attr_at[i]]


cdef inline int col_naft(OpCols *c, Py_ssize_t i) noexcept:
    """How many after edges op ``i`` has."""
    return c.acc_pool[c.aft_at[i]]


cdef inline int col_aft(OpCols *c, Py_ssize_t i, int k) noexcept:
    """The op id of op ``i``'s ``k``-th after edge, in its ``Op``'s order."""
    return c.acc_pool[c.aft_at[i] + 1 + k]


cdef inline PyObject *col_step(OpCols *c, Py_ssize_t i) noexcept:
    """Op ``i``'s step (borrowed)."""
    return c.step_one if c.step == NULL else c.step[i]


cdef inline PyObject *col_joins(OpCols *c, Py_ssize_t i) noexcept:
    """Op ``i``'s joins, a tuple (borrowed)."""
    return c.no_joins if c.joins == NULL else c.joins[i]


cdef inline PyObject *kept_of(OpCols *c, Py_ssize_t i, int k) noexcept:
    """What op ``i`` reads of its line: the ``k``-th (KEPT_X) kept of it (borrowed)."""
    return c.kept_vals[c.combos[c.kept[c.line[i]] * KEPT_FIELDS + k]]


cdef inline dict kept_site_t(const int *site, const double *t, const unsigned char *tnone,
                             PyObject **vals, Py_ssize_t lo):
    """:func:`site_t_attrs` of what is kept of line number ``lo``: its site (its number in
    ``vals``) and its t (None where ``tnone``)."""
    return site_t_attrs(<object>vals[site[lo]], None if tnone[lo] else t[lo])


cdef inline dict site_t_attrs(object site, object t):
    """A host action's attrs as its line's ``site`` and ``t`` make them: the site, then the t,
    each where the line gives it (``_replay._Run.host_attrs``, which adds the rest)."""
    cdef dict d = {}
    if site is not None:
        d["site"] = site
    if t is not None:
        d["t"] = t
    return d


cdef inline bint op_fields_kept(OpCols *c) noexcept:
    """Whether :func:`op_field` reads every op of ``c``: its lines' fields are kept (their site and
    t too, where an op's attrs are made of them) and no op is a fix's sync."""
    return c.kept != NULL and not c.special and (c.from_line == NULL or c.kept_site != NULL)


cdef inline object op_field(OpCols *c, tuple agents, object op_id, int field):
    """Slot ``field`` (F_ID, F_AGENT, F_KIND, F_NAME, F_START, F_END, F_ISSUER, F_HANDLE,
    F_LOCATION, F_STEP, F_LINE or F_ATTRS) of op ``op_id`` (an int in range) as its ``Op`` holds
    it (``agents``: the columns' tuple), where :func:`op_fields_kept`: equal values, the ints,
    floats and the location made now. The attrs are the run's: an event's record or wait names
    its event only in its ``Op`` (``_replay._Run.record``)."""
    cdef Py_ssize_t i = op_id
    if field == F_ID:
        return op_id
    if field == F_AGENT:
        return agents[c.agent[i]]
    if field == F_KIND:
        return <object>col_kind(c, i)
    if field == F_NAME:
        return <object>kept_of(c, i, KEPT_NAME)
    if field == F_START:
        return c.start[i]
    if field == F_END:
        return c.end[i]
    if field == F_ISSUER:
        return None if c.issuer[i] < 0 else c.issuer[i]
    if field == F_HANDLE:
        return None if c.handles == NULL else (<dict>c.handles).get(op_id)
    if field == F_LOCATION:
        return f"{<object>kept_of(c, i, KEPT_PATH)}:{c.line[i]}"
    if field == F_STEP:
        return <object>col_step(c, i)
    if field == F_LINE:
        return c.line[i]
    if field == F_ATTRS:
        if col_attrs(c, i) == c.from_line and c.from_line != NULL:
            return kept_site_t(c.kept_site, c.kept_t, c.kept_tnone, c.kept_vals, c.line[i])
        return <object>col_attrs(c, i)
    raise ValueError(f"op_field: field {field} is not read from columns")


cdef struct OpSource:
    # The ops a compiled reader of a trace reads by id: a run's columns (``c`` not NULL, an op
    # read as its id, ``agents`` their tuple) or the trace's ``Op`` objects (``ops``: a sequence
    # of all, or a dict of some, by id); ``n``: how many the trace has. Borrowed: the caller
    # holds what :func:`op_source` returns while it reads.
    OpCols *c
    PyObject *agents
    PyObject *ops
    bint by_dict
    Py_ssize_t n


cdef inline list op_source(OpSource *s, object columns, object ops, Py_ssize_t n):
    """Fill ``s``: ``columns`` (a run's, ``native._columns_of``; None: a trace whose ops are
    made) where :func:`op_field` reads every op of them, else ``ops``, a callable that gives
    them (``trace.ops_of_hazards``); None when neither serves (no ``ops``). Returns what ``s``
    points into."""
    if columns is not None:
        capsule = columns.capsule()
        s.c = <OpCols *>PyCapsule_GetPointer(capsule, OPCOLS)
        if op_fields_kept(s.c):
            agents = columns.agents
            s.agents, s.ops, s.n = <PyObject *>agents, NULL, s.c.n
            return [capsule, columns, agents]
    s.c = NULL
    if ops is None:
        return None
    got = ops()
    s.agents, s.ops, s.by_dict, s.n = NULL, <PyObject *>got, type(got) is dict, n
    return [got]


cdef inline object source_op(OpSource *s, object op_id, type op_class, Py_ssize_t *offsets):
    """Op ``op_id`` of ``s``, to read with :func:`source_field`: its ``Op`` (of ``op_class``
    exactly, with that id; ``offsets``: its slots) or, from columns, its id; None when there is
    no such op (the reference then reads it)."""
    if type(op_id) is not int:
        return None
    cdef Py_ssize_t i = op_id
    if i < 0 or i >= s.n:
        return None
    if s.c != NULL:
        return op_id
    o = (<dict>s.ops).get(i) if s.by_dict else (<object>s.ops)[i]
    if type(o) is not op_class or slot_set(o, offsets[F_ID]) != op_id:
        return None
    return o


cdef inline object source_field(OpSource *s, object o, int field, Py_ssize_t *offsets):
    """Slot ``field`` of ``o``, an op :func:`source_op` gave."""
    return slot_set(o, offsets[field]) if s.c == NULL else \
        op_field(s.c, <tuple>s.agents, o, field)
