# cython: language_level=3
"""Reading a slots class's fields directly: the compiled passes' one way to read an ``Op``, an
``Access`` or a ``View`` (streamsim/trace.py: slots dataclasses).

Each field of a slots class is a member descriptor at a fixed offset in the object. A load at that
offset is what ``getattr`` ends in, without the type's attribute lookup and the descriptor call on
the way (that lookup was a fifth of the compiled HB pass's time). A pass reads an object this way
only when its type is exactly the class (``Py_TYPE(o) == cls``: a subclass may put a property
where the slot was), and only a slot that is set (a NULL is a field never assigned): where either
fails, it takes its pure-Python reference. Only inline functions: nothing to build on its own.
"""
from cpython.object cimport PyObject, PyTypeObject

cdef extern from "Python.h":
    PyTypeObject *Py_TYPE(PyObject *o)
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member


cdef inline Py_ssize_t slot_offset(type cls, str name) except -1:
    """The offset of ``cls``'s slot ``name`` (TypeError when ``name`` is no slot of it)."""
    descr = cls.__dict__.get(name)
    if descr is None or type(descr).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    return (<PyMemberDescrObject *>descr).d_member.offset


cdef inline PyObject *slot(PyObject *o, Py_ssize_t offset) noexcept:
    """The (borrowed) value of one of ``o``'s slots: NULL when unset."""
    return (<PyObject **>((<char *>o) + offset))[0]
