# cython: language_level=3
"""An object's address -> a number, in C: what ``{id(obj): n}`` does for a compiled pass, without a
Python int made for the address and a dict lookup per query (the HB pass asks it per op and per
access: the op's agent, the access's view). The objects must outlive the map (their addresses are
the keys): the passes map objects that the trace holds. Open addressing over a power-of-two table,
grown at half full; 0 is no key (no object lives at address 0). Only inline functions: nothing to
build on its own (as ``_slots.pxd``)."""
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport uint64_t, uintptr_t


cdef struct AddrMap:
    uintptr_t *keys
    Py_ssize_t *vals
    Py_ssize_t cap
    Py_ssize_t n


cdef inline int addrmap_init(AddrMap *m) except -1:
    cdef Py_ssize_t i
    m.cap = 64
    m.n = 0
    m.keys = <uintptr_t *>PyMem_Malloc(m.cap * sizeof(uintptr_t))
    m.vals = <Py_ssize_t *>PyMem_Malloc(m.cap * sizeof(Py_ssize_t))
    if m.keys == NULL or m.vals == NULL:
        addrmap_free(m)
        raise MemoryError()
    for i in range(m.cap):
        m.keys[i] = 0
    return 0


cdef inline void addrmap_free(AddrMap *m) noexcept:
    PyMem_Free(m.keys)
    PyMem_Free(m.vals)
    m.keys = NULL
    m.vals = NULL
    m.cap = m.n = 0


cdef inline Py_ssize_t _addrmap_home(const AddrMap *m, uintptr_t k) noexcept:
    return <Py_ssize_t>((<uint64_t>(k >> 4) * <uint64_t>11400714819323198485ULL) >> 20) & (
        m.cap - 1)


cdef inline Py_ssize_t addrmap_get(const AddrMap *m, uintptr_t k) noexcept:
    """The number mapped to address ``k``; -1: none."""
    cdef Py_ssize_t h = _addrmap_home(m, k)
    while m.keys[h]:
        if m.keys[h] == k:
            return m.vals[h]
        h = (h + 1) & (m.cap - 1)
    return -1


cdef inline void _addrmap_insert(AddrMap *m, uintptr_t k, Py_ssize_t v) noexcept:
    cdef Py_ssize_t h = _addrmap_home(m, k)
    while m.keys[h]:
        h = (h + 1) & (m.cap - 1)
    m.keys[h] = k
    m.vals[h] = v
    m.n += 1


cdef inline int addrmap_put(AddrMap *m, uintptr_t k, Py_ssize_t v) except -1:
    """Map address ``k`` (not mapped yet) to ``v``."""
    cdef Py_ssize_t i, old_cap = m.cap
    cdef uintptr_t *old_keys = m.keys
    cdef Py_ssize_t *old_vals = m.vals
    if 2 * (m.n + 1) > m.cap:
        m.cap = old_cap * 2
        m.keys = <uintptr_t *>PyMem_Malloc(m.cap * sizeof(uintptr_t))
        m.vals = <Py_ssize_t *>PyMem_Malloc(m.cap * sizeof(Py_ssize_t))
        if m.keys == NULL or m.vals == NULL:
            PyMem_Free(old_keys)
            PyMem_Free(old_vals)
            addrmap_free(m)
            raise MemoryError()
        for i in range(m.cap):
            m.keys[i] = 0
        m.n = 0
        for i in range(old_cap):
            if old_keys[i]:
                _addrmap_insert(m, old_keys[i], old_vals[i])
        PyMem_Free(old_keys)
        PyMem_Free(old_vals)
    _addrmap_insert(m, k, v)
    return 0
