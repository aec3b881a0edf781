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
- ``index``, ``issuer`` (-1: None), ``line`` (0: None; op-log lines count from 1);
- ``start``, ``end``: the op's times (the floats its ``Op`` would hold);
- ``kind``, ``step``, ``attrs``, ``accesses``, ``after``, ``joins``: the objects its ``Op`` would
  hold (``after``/``joins`` tuples of op ids), borrowed from the owner;
- ``path``: the log's path, one object for all its lines (borrowed; NULL when its lines name
  several): an op's ``location`` is ``f"{path}:{line}"`` (``schema.Line.location``), made only
  where a measure needs it (a fix's sync sits at that line), not kept an op.

Only a struct and a name: nothing to build on its own (as ``_slots.pxd``)."""
from cpython.object cimport PyObject


cdef struct OpCols:
    Py_ssize_t n
    int *agent
    int *index
    int *issuer
    int *line
    double *start
    double *end
    PyObject **kind
    PyObject *path
    PyObject **step
    PyObject **attrs
    PyObject **accesses
    PyObject **after
    PyObject **joins


cdef extern from *:
    """
    #define STREAMSIM_OPCOLS "streamsim.native.OpCols"
    """
    const char *OPCOLS "STREAMSIM_OPCOLS"
