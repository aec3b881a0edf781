# cython: language_level=3
"""The command's heap: memory a stage frees is kept for the next stage, not handed back to the
system and faulted in again.

A default ``check`` runs the op log once and then re-runs it per fix it costs. Each run makes
and frees hundreds of megabytes: Python objects, in pymalloc's 1 MiB arenas, and C arrays. By
default both go back to the system as soon as they are free (an empty arena is unmapped; glibc
unmaps a large block and trims its heap), so the next run's memory is fresh pages again, each
zeroed by the kernel on its first touch: on the 200,000-line random program, 278,000 page
faults and 0.6-0.8 s of system time for a peak of 160,000 pages. :func:`keep_freed_memory`
keeps it instead: freed arenas are cached and handed out again (``PyObject_SetArenaAllocator``),
and glibc keeps its heap (``M_TRIM_THRESHOLD``) and serves blocks up to 32 MB from it
(``M_MMAP_THRESHOLD``) rather than mapping each. The peak stays what the runs need (memory
freed is reused, so it is never held twice); what changes is that the process keeps it until it
exits. So only the command line's own process asks for it (``streamsim.cli.main``), never a
library import. Changes no result: where objects live is no part of any report.
"""

from libc.stdlib cimport realloc

cdef extern from "Python.h":
    ctypedef struct PyObjectArenaAllocator:
        void *ctx
        void *(*alloc)(void *ctx, size_t size) noexcept
        void (*free)(void *ctx, void *ptr, size_t size) noexcept
    void PyObject_GetArenaAllocator(PyObjectArenaAllocator *allocator)
    void PyObject_SetArenaAllocator(PyObjectArenaAllocator *allocator)

cdef extern from *:
    """
    #include <limits.h>
    #if defined(__GLIBC__)
    #include <malloc.h>
    /* glibc keeps its heap and serves blocks up to 32 MB (its documented maximum on 64-bit
       systems) from it; 1 when both settings took. */
    static int streamsim_keep_glibc_heap(void) {
        int mapped = mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
        int trimmed = mallopt(M_TRIM_THRESHOLD, INT_MAX);
        return mapped == 1 && trimmed == 1;
    }
    #else
    static int streamsim_keep_glibc_heap(void) { return 0; }  /* (another C library: as is) */
    #endif
    """
    int streamsim_keep_glibc_heap()

cdef PyObjectArenaAllocator _system  # the allocator the interpreter had: maps and unmaps
cdef void **_kept = NULL  # freed arenas, handed out again last in, first out
cdef size_t _count = 0, _room = 0
cdef size_t _arena_size = 0  # (pymalloc's, learnt from the first arena freed)
cdef size_t _reused = 0
cdef bint _installed = False
cdef bint _glibc = False


cdef void *_alloc(void *ctx, size_t size) noexcept:
    """An arena: the last one freed, else a new one from the system."""
    global _count, _reused
    if _count and size == _arena_size:
        _count -= 1
        _reused += 1
        return _kept[_count]
    return _system.alloc(_system.ctx, size)


cdef void _free(void *ctx, void *ptr, size_t size) noexcept:
    """Keep a freed arena for the next :func:`_alloc` (the system's free when the list of them
    cannot grow, or for a block of another size)."""
    global _count, _room, _arena_size, _kept
    cdef void **grown
    if _arena_size == 0:
        _arena_size = size
    if size == _arena_size:
        if _count == _room:
            grown = <void **>realloc(_kept, (2 * _room + 64) * sizeof(void *))
            if grown != NULL:
                _kept, _room = grown, 2 * _room + 64
        if _count < _room:
            _kept[_count] = ptr
            _count += 1
            return
    _system.free(_system.ctx, ptr, size)


def keep_freed_memory() -> bool:
    """Keep freed memory in this process for reuse (the module's docstring says why); once per
    process, later calls do nothing. True when glibc's heap settings took as well (False on
    another C library, where pymalloc's arenas alone are kept)."""
    global _installed, _glibc
    cdef PyObjectArenaAllocator mine
    if not _installed:
        _glibc = streamsim_keep_glibc_heap() == 1
        PyObject_GetArenaAllocator(&_system)
        mine.ctx = NULL
        mine.alloc = _alloc
        mine.free = _free
        PyObject_SetArenaAllocator(&mine)
        _installed = True
    return _glibc


def kept() -> tuple:
    """``(installed, arenas handed out again, arenas kept now)``: for tests and benchmarks."""
    return _installed, _reused, _count
