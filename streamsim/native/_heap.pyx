# cython: language_level=3
"""The command's heap: memory a stage frees is kept for the next stage, not handed back to the
system and faulted in again.

A default ``check`` runs the op log once and then re-runs it per fix it costs. Each run makes
and frees hundreds of megabytes: Python objects, in pymalloc's 1 MiB arenas, and C arrays. By
default both go back to the system as soon as they are free (an empty arena is unmapped; glibc
unmaps a large block and trims its heap), so the next run's memory is fresh pages again, each
zeroed by the kernel on its first touch: on the 200,000-line random program, 278,000 page
faults and 0.6-0.8 s of system time for a peak of 160,000 pages. :func:`keep_freed_memory`
keeps it instead: glibc keeps its heap (``M_TRIM_THRESHOLD``) and serves blocks up to 32 MB
from it (``M_MMAP_THRESHOLD``) rather than mapping each, and pymalloc's arenas are blocks of that
same heap (``PyObject_SetArenaAllocator``: ``malloc`` and ``free``). One pool for both matters:
memory the Python objects of one stage free (a log's lines) is what the C arrays of the next
(the HB pass's) are made of, and the other way round. Until the fifteenth session freed arenas
were kept in a list of their own, which only arenas could reuse: a 1,000,000-line check's peak
was 1,484 MB with the policy against 1,101 MB without (the lines' arenas held while the HB pass
mapped its arrays). Memory freed is reused by whatever is made next (tests/native/test_heap.py),
so the peak stays close to what the runs need, not equal: one heap can leave a freed region too
small for the next array (a 1,000,000-line recorded-like log peaked 3% higher than with the
list). What changes is that the process keeps its memory until it exits. So only the command line's own process asks for it
(``streamsim.cli.main``), never a library import. Where the C library is not glibc, freed arenas
are kept in a list as before (only arenas reuse them). Changes no result: where objects live is
no part of any report.
"""

from libc.stdlib cimport malloc, calloc, free, realloc
from libc.stdint cimport uintptr_t

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
    /* Blocks of ``bytes`` and more mapped on their own (freed: handed back to the system); 1
       when it took. */
    static int streamsim_map_blocks_from(size_t bytes) {
        return mallopt(M_MMAP_THRESHOLD, (int)bytes) == 1;
    }
    #else
    static int streamsim_keep_glibc_heap(void) { return 0; }  /* (another C library: as is) */
    static int streamsim_map_blocks_from(size_t bytes) { return 0; }
    #endif
    """
    int streamsim_keep_glibc_heap()
    int streamsim_map_blocks_from(size_t bytes)

cdef PyObjectArenaAllocator _system  # the allocator the interpreter had: maps and unmaps
cdef void **_kept = NULL  # freed arenas, handed out again last in, first out
cdef size_t _count = 0, _room = 0
cdef size_t _arena_size = 0  # (pymalloc's, learnt from the first arena freed)
cdef size_t _reused = 0
cdef bint _installed = False
cdef bint _glibc = False


# The arenas made by malloc, as a set of addresses (open addressing, linear probing, deletion
# by backward shift; grown at half full): an arena the interpreter mapped before the policy was
# installed is unmapped by the system's allocator, never handed to free().
cdef uintptr_t *_mine = NULL
cdef size_t _mine_cap = 0, _mine_n = 0


cdef inline size_t _slot_of(uintptr_t p, size_t cap) noexcept:
    return <size_t>(((p >> 12) * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1)


cdef bint _mine_add(uintptr_t p) noexcept:
    """Remember arena ``p``; False when the set cannot grow (the caller gives the block back)."""
    global _mine, _mine_cap, _mine_n
    cdef uintptr_t *old = _mine
    cdef size_t oldcap = _mine_cap, i, j
    if 2 * (_mine_n + 1) > _mine_cap:
        _mine_cap = 1024 if oldcap == 0 else 2 * oldcap
        _mine = <uintptr_t *>calloc(_mine_cap, sizeof(uintptr_t))
        if _mine == NULL:
            _mine, _mine_cap = old, oldcap
            return False
        for i in range(oldcap):
            if old[i]:
                j = _slot_of(old[i], _mine_cap)
                while _mine[j]:
                    j = (j + 1) & (_mine_cap - 1)
                _mine[j] = old[i]
        free(old)
    j = _slot_of(p, _mine_cap)
    while _mine[j]:
        j = (j + 1) & (_mine_cap - 1)
    _mine[j] = p
    _mine_n += 1
    return True


cdef bint _mine_remove(uintptr_t p) noexcept:
    """Forget arena ``p``; False when it is not one of the set (the system mapped it)."""
    global _mine_n
    if _mine_cap == 0:
        return False
    cdef size_t mask = _mine_cap - 1, i = _slot_of(p, _mine_cap), j, k
    while _mine[i] != p:
        if not _mine[i]:
            return False
        i = (i + 1) & mask
    _mine[i] = 0
    _mine_n -= 1
    j = i
    while True:  # (backward shift: each later entry of the run moves up if its home allows)
        j = (j + 1) & mask
        if not _mine[j]:
            return True
        k = _slot_of(_mine[j], _mine_cap)
        if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):
            _mine[i] = _mine[j]
            _mine[j] = 0
            i = j


cdef void *_heap_alloc(void *ctx, size_t size) noexcept:
    """An arena: a block of glibc's heap (pymalloc aligns its pools inside it)."""
    cdef void *p = malloc(size)
    if p != NULL and not _mine_add(<uintptr_t>p):
        free(p)
        return _system.alloc(_system.ctx, size)
    return p


cdef void _heap_free(void *ctx, void *ptr, size_t size) noexcept:
    """An arena freed: back to glibc's heap, for whatever is made next; one the system mapped
    (before the policy, or when the set could not grow), to the system."""
    if ptr != NULL and _mine_remove(<uintptr_t>ptr):
        free(ptr)
    else:
        _system.free(_system.ctx, ptr, size)


cdef void *_alloc(void *ctx, size_t size) noexcept:
    """An arena: the last one freed, else a new one from the system (not glibc)."""
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
        if _glibc:  # (one heap for arenas and C arrays: the module's docstring)
            mine.alloc = _heap_alloc
            mine.free = _heap_free
        else:
            mine.alloc = _alloc
            mine.free = _free
        PyObject_SetArenaAllocator(&mine)
        _installed = True
    return _glibc


DEF KEPT_BLOCKS_UP_TO = 32 * 1024 * 1024  # the policy's M_MMAP_THRESHOLD (streamsim_keep_glibc_heap)
DEF MAPPED_FROM = 1536 * 1024  # map_large_blocks's: past pymalloc's arenas (1 MiB), which stay


def map_large_blocks(bint on) -> bool:
    """While ``on``, blocks of 1.5 MiB and more are mapped on their own and handed back to the
    system when freed, as glibc does by default, rather than served from the kept heap;
    pymalloc's arenas (1 MiB) are still served from it. Off: the policy's 32 MB again. True
    when it took (the policy installed, on glibc); else nothing is done.

    For a stage whose large arrays all die before it ends, while what it makes lives on: the
    first analysis's HB pass (``native.hb_hazards``). Its per-op arrays (about 100 MB at
    1,000,000 lines of the random program) did not fit the holes the replay left in the heap,
    so they were placed at its top, and the heap kept that much more for good once they were
    freed: the hazards, fixes and root causes made after filled little of it. Mapped, they
    are handed back as the walk ends (that check's peak: 330 -> 315 MB). A fix costing re-run's
    count keeps the heap: it would fault those pages in again each time."""
    if not (_installed and _glibc):
        return False
    return streamsim_map_blocks_from(MAPPED_FROM if on else KEPT_BLOCKS_UP_TO) == 1


def kept() -> tuple:
    """``(installed, arenas handed out again, arenas kept now)``: for tests and benchmarks (the
    two counts are those of the list of freed arenas: 0 where glibc's heap holds them)."""
    return _installed, _reused, _count
