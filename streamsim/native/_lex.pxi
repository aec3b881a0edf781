"""A lexer of the common op-log line, from its bytes: what msgspec's typed decode of the line
(streamsim/oplog/fastpath.py, ``FAST_DECODER``) gives, without a ``str`` of the line, a decode
of it, a strip, and a new ``str`` per string value.

Why: of the compiled reader's pass 1 on the 200,000-line random program, the bytes' decode to
``str`` and strip, msgspec's decode and the quote count of the line took 0.19 s of 0.8 s (each
measured alone, 2026-12-06). This is the first stage of the columnar reader the compiled core is
going to (docs/native.md).

What it takes, and nothing else (anything else is refused, 0, and the line goes the way it went
before: msgspec, then the checker, which words every error): one JSON object, spaces and tabs
between its tokens, of the keys the line's op allows (as the fast path's Structs list them), each
once; string values of valid UTF-8 without escapes or control characters; integers without sign,
fraction or exponent, of at most 19 digits; the float fields as any JSON number; ``true`` and
``false``; lists of buffer names and of ref objects (``buffer``, ``offset``, ``nbytes``,
``window``, and a strided ref's ``sizes``, ``strides`` and ``itemsize``). The ranges and
non-empty strings the Structs' ``Meta`` require are required here too. So a line it takes is
decoded to the field values msgspec gives it (tests/native/test_lex.py holds the two to that on
generated lines), and a line it refuses loses nothing.

Each distinct string is made once (:func:`lex_str`: a table from its bytes to its ``str``, by
hash; the op names are put in first, so an op's name is one of ``OP_NAMES``'s objects).
Included by _decode.pyx (``include``: its tables are module constants, which a ``.pxd`` cannot
hold).
"""
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject
from libc.stdint cimport uint64_t
from libc.string cimport memcmp


cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char *s, Py_ssize_t size, const char *errors)
    double PyOS_string_to_double(const char *s, char **endptr, PyObject *overflow_exception) \
        except? -1.0
    Py_ssize_t PyUnicode_GET_LENGTH(PyObject *o)
    void *PyUnicode_DATA(PyObject *o)
    object PyLong_FromLongLong(long long v)
    object PyFloat_FromDouble(double v)
    bint PyUnicode_IS_ASCII(object o)
    object PyUnicode_DecodeUTF8(const char *s, Py_ssize_t size, const char *errors)
    const char *PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL
    char *PyBytes_AS_STRING(object o)
    Py_ssize_t PyBytes_GET_SIZE(object o)
    int PyList_Append(object lst, object item) except -1


# the keys a line may hold (the union of the fast path's Structs' fields)
cdef enum:
    K_OP, K_RANK, K_HOST, K_STREAM, K_NAME, K_DUR, K_STEP, K_SITE, K_T, K_READS, K_WRITES,
    K_EVENT, K_BUFFER, K_NBYTES, K_LABEL, K_HANDLE, K_BLOCKING, K_INFERRED, K_TENSORS, K_PEER,
    K_GROUP, K_BATCH, K_INPUTS, K_OUTPUTS, K_RESULT, K_ROOT, K_ANY_SOURCE, N_KEYS

cdef tuple KEY_NAMES = ("op", "rank", "host", "stream", "name", "dur", "step", "site", "t",
                        "reads", "writes", "event", "buffer", "nbytes", "label", "handle",
                        "blocking", "inferred", "tensors", "peer", "group", "batch", "inputs",
                        "outputs", "result", "root", "any_source")  # (in the K_ order)

# the ops, in the order of OP_NAMES; each one's keys (KEYS_OF)
cdef enum:
    O_SYNC_STREAM, O_SYNC_DEVICE, O_LAUNCH, O_HOST, O_RECORD, O_WAIT_EVENT, O_SYNC_EVENT, O_FREE,
    O_RECORD_STREAM, O_ALLOC, O_WAIT, O_ISEND, O_IRECV, O_ALL_REDUCE, O_ALL_GATHER,
    O_REDUCE_SCATTER, O_ALL_TO_ALL, O_BROADCAST, O_QUERY, O_BARRIER, O_REDUCE, O_GATHER,
    O_SCATTER, N_OPS

cdef tuple OP_NAMES = ("sync_stream", "sync_device", "launch", "host", "record", "wait_event",
                       "sync_event", "free", "record_stream", "alloc", "wait", "isend", "irecv",
                       "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                       "query", "barrier", "reduce", "gather", "scatter")

cdef enum:
    M_BASE = ((1 << K_OP) | (1 << K_RANK) | (1 << K_HOST) | (1 << K_STREAM) | (1 << K_NAME) |
             (1 << K_DUR) | (1 << K_STEP) | (1 << K_SITE) | (1 << K_T))
    M_KERNEL = M_BASE | (1 << K_READS) | (1 << K_WRITES)
    M_EVENT = M_BASE | (1 << K_EVENT)
    M_BUF = M_BASE | (1 << K_BUFFER)
    M_ALLOC = M_BUF | (1 << K_NBYTES) | (1 << K_LABEL)
    M_WAIT = M_BASE | (1 << K_HANDLE) | (1 << K_BLOCKING) | (1 << K_INFERRED)
    M_QUERY = M_BASE | (1 << K_HANDLE) | (1 << K_RESULT)
    M_P2P = (M_BASE | (1 << K_TENSORS) | (1 << K_PEER) | (1 << K_GROUP) | (1 << K_HANDLE) |
            (1 << K_NBYTES) | (1 << K_BATCH))
    M_IRECV = M_P2P | (1 << K_ANY_SOURCE)
    M_COLL = (M_BASE | (1 << K_TENSORS) | (1 << K_INPUTS) | (1 << K_OUTPUTS) | (1 << K_GROUP) |
             (1 << K_HANDLE) | (1 << K_NBYTES))
    M_BARRIER = M_BASE | (1 << K_GROUP) | (1 << K_HANDLE)
    M_REDUCE = (M_BASE | (1 << K_TENSORS) | (1 << K_ROOT) | (1 << K_GROUP) | (1 << K_HANDLE) |
               (1 << K_NBYTES))
    M_GATHER = (M_BASE | (1 << K_INPUTS) | (1 << K_OUTPUTS) | (1 << K_ROOT) | (1 << K_GROUP) |
               (1 << K_HANDLE) | (1 << K_NBYTES))

cdef unsigned int[N_OPS] KEYS_OF = [M_BASE, M_BASE, M_KERNEL, M_KERNEL, M_EVENT, M_EVENT,
                                    M_EVENT, M_BUF, M_BUF, M_ALLOC, M_WAIT, M_P2P, M_IRECV, M_COLL,
                                    M_COLL, M_COLL, M_COLL, M_COLL, M_QUERY, M_BARRIER, M_REDUCE,
                                    M_GATHER, M_GATHER]

# the keys each op's Struct requires by a default that is no value ("" where its Struct gives the
# field a default: a line without it is refused here, and msgspec's decode is the checker's)
cdef unsigned int[N_OPS] REQUIRED_OF = [0, 0, 0, 0, 1 << K_EVENT, 1 << K_EVENT, 1 << K_EVENT,
                                        1 << K_BUFFER, 1 << K_BUFFER, 1 << K_BUFFER,
                                        1 << K_HANDLE, 0, 0, 0, 0, 0, 0, 0, 1 << K_HANDLE, 0, 0,
                                        0, 0]

# a value's type: a string (non-empty unless T_STR_ANY), a non-negative integer up to its key's
# limit (LIMIT_OF), a float in [0, MAX_FLOAT], a bool, a list of refs
cdef enum:
    T_STR, T_STR_ANY, T_INT, T_FLOAT, T_BOOL, T_REFS

cdef int[N_KEYS] TYPE_OF = [T_STR, T_INT, T_STR, T_STR, T_STR_ANY, T_FLOAT, T_INT, T_STR, T_FLOAT,
                            T_REFS, T_REFS, T_STR, T_STR, T_INT, T_STR, T_STR, T_BOOL, T_STR_ANY,
                            T_REFS, T_INT, T_STR, T_INT, T_REFS, T_REFS, T_BOOL, T_INT, T_BOOL]

# the schema's limits (streamsim/oplog/schema.py: LIMITS, MAX_DUR), set by lex_limits
cdef long long[N_KEYS] LIMIT_OF
cdef long long LIMIT_OFFSET = 0, LIMIT_NBYTES = 0
cdef double MAX_FLOAT = 0.0
cdef Py_ssize_t MAX_DIMS = 0  # a strided ref's sizes and strides, each (schema.MAX_DIMS)


cdef int lex_limits(dict limits, double max_dur, Py_ssize_t max_dims) except -1:
    """Take the schema's limits: each integer key's (``limits``, by name), the floats' and a
    strided ref's dims."""
    global LIMIT_OFFSET, LIMIT_NBYTES, MAX_FLOAT, MAX_DIMS
    cdef int k
    for k in range(N_KEYS):
        LIMIT_OF[k] = limits[KEY_NAMES[k]] if TYPE_OF[k] == T_INT else 0
    LIMIT_OFFSET, LIMIT_NBYTES, MAX_FLOAT = limits["offset"], limits["nbytes"], max_dur
    MAX_DIMS = max_dims
    return 0


cdef struct Lex:
    # the strings made so far: a table of their hashes and objects (owned), open addressing
    uint64_t *hashes
    PyObject **strs
    Py_ssize_t cap
    Py_ssize_t n
    # the last line lexed: its op (O_X), the keys it holds (a bit each), and each key's value:
    # a string (borrowed from the table), a list (owned), an int, a float, a bool
    int op
    unsigned int seen
    # the last line refused had an op none of OP_NAMES (a declaration, an op only the checker
    # reads): msgspec's fast path refuses it too, so it goes to the checker without it
    bint foreign_op
    PyObject *obj[N_KEYS]
    long long num[N_KEYS]
    double real[N_KEYS]


cdef int lex_init(Lex *lx) except -1:
    cdef Py_ssize_t i
    lx.cap = 1024
    lx.n = 0
    lx.hashes = <uint64_t *>PyMem_Malloc(lx.cap * sizeof(uint64_t))
    lx.strs = <PyObject **>PyMem_Malloc(lx.cap * sizeof(PyObject *))
    lx.seen = 0
    lx.foreign_op = False
    for i in range(N_KEYS):
        lx.obj[i] = NULL
    if lx.hashes == NULL or lx.strs == NULL:
        lex_free(lx)
        raise MemoryError()
    for i in range(lx.cap):
        lx.strs[i] = NULL
    for name in OP_NAMES:  # (first: an op's value is then one of these objects)
        _lex_put(lx, name)
    return 0


cdef void lex_clear(Lex *lx) noexcept:
    """Drop the lists the last line holds."""
    cdef int k
    for k in range(N_KEYS):
        if TYPE_OF[k] == T_REFS:
            Py_XDECREF(lx.obj[k])
        lx.obj[k] = NULL
    lx.seen = 0


cdef void lex_free(Lex *lx) noexcept:
    cdef Py_ssize_t i
    if lx.strs != NULL:
        lex_clear(lx)
        for i in range(lx.cap):
            Py_XDECREF(lx.strs[i])
    PyMem_Free(lx.hashes)
    PyMem_Free(lx.strs)
    lx.hashes = NULL
    lx.strs = NULL
    lx.cap = lx.n = 0


cdef inline uint64_t _lex_hash(const char *p, Py_ssize_t n) noexcept:
    cdef uint64_t h = 14695981039346656037ULL  # FNV-1a
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ <unsigned char>p[i]) * 1099511628211ULL
    return h


cdef PyObject *lex_str(Lex *lx, const char *p, Py_ssize_t n) except? NULL:
    """The one ``str`` of the UTF-8 bytes ``p[:n]`` (no control character, no escape), borrowed
    from the table; NULL (no error set) where they are not valid UTF-8 (a surrogate's encoding,
    a truncated sequence: the checker words it)."""
    cdef uint64_t h = 14695981039346656037ULL  # FNV-1a
    cdef unsigned char wide = 0
    cdef Py_ssize_t i, size
    cdef const char *have
    cdef PyObject *s
    for i in range(n):
        h = (h ^ <unsigned char>p[i]) * 1099511628211ULL
        wide |= <unsigned char>p[i]
    i = <Py_ssize_t>(h & <uint64_t>(lx.cap - 1))
    while lx.strs[i] != NULL:
        s = lx.strs[i]
        if lx.hashes[i] == h:
            if PyUnicode_IS_ASCII(<object>s):
                have, size = <const char *>PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s)
            else:
                have = PyUnicode_AsUTF8AndSize(<object>s, &size)  # (kept in the str)
            if size == n and memcmp(have, p, n) == 0:
                return s
        i = (i + 1) & (lx.cap - 1)
    if (lx.n + 1) * 2 > lx.cap:
        _lex_grow(lx)
        return lex_str(lx, p, n)
    if wide & 0x80:
        try:
            obj = PyUnicode_DecodeUTF8(p, n, "strict")
        except UnicodeDecodeError:
            return NULL
    else:
        obj = PyUnicode_DecodeASCII(p, n, NULL)
    s = <PyObject *>obj
    Py_INCREF(obj)  # (the table's reference)
    lx.strs[i] = s
    lx.hashes[i] = h
    lx.n += 1
    return s


cdef int _lex_put(Lex *lx, str name) except -1:
    """Put ``name`` (ASCII) in the table, as the string of its bytes."""
    b = name.encode("ascii")
    cdef uint64_t h = _lex_hash(b, len(b))
    cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>(lx.cap - 1))
    while lx.strs[i] != NULL:
        i = (i + 1) & (lx.cap - 1)
    Py_INCREF(name)
    lx.strs[i] = <PyObject *>name
    lx.hashes[i] = h
    lx.n += 1
    return 0


cdef int _lex_grow(Lex *lx) except -1:
    cdef Py_ssize_t i, j, old = lx.cap, cap = lx.cap * 2
    cdef uint64_t *hashes = <uint64_t *>PyMem_Malloc(cap * sizeof(uint64_t))
    cdef PyObject **strs = <PyObject **>PyMem_Malloc(cap * sizeof(PyObject *))
    if hashes == NULL or strs == NULL:
        PyMem_Free(hashes)
        PyMem_Free(strs)
        raise MemoryError()
    for i in range(cap):
        strs[i] = NULL
    for i in range(old):
        if lx.strs[i] != NULL:
            j = <Py_ssize_t>(lx.hashes[i] & <uint64_t>(cap - 1))
            while strs[j] != NULL:
                j = (j + 1) & (cap - 1)
            strs[j] = lx.strs[i]
            hashes[j] = lx.hashes[i]
    PyMem_Free(lx.hashes)
    PyMem_Free(lx.strs)
    lx.hashes, lx.strs, lx.cap = hashes, strs, cap
    return 0


cdef inline Py_ssize_t _lex_ws(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept:
    while i < n and (p[i] == 32 or p[i] == 9):  # (space, tab: the whitespace JSON allows in a line)
        i += 1
    return i


cdef inline Py_ssize_t _lex_string(const char *p, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of the string whose opening quote is at ``i`` (the index past its closing quote),
    or -1: a control character (DEL too) or an escape in it. Bytes past ASCII are taken here
    (a quote is never part of a UTF-8 sequence): :func:`lex_str` decodes them."""
    cdef unsigned char c
    i += 1
    while i < n:
        c = <unsigned char>p[i]
        if c == 34:
            return i + 1
        if c < 32 or c == 127 or c == 92:
            return -1
        i += 1
    return -1


cdef Py_ssize_t _lex_number(const char *p, Py_ssize_t i, Py_ssize_t n, bint *integer) noexcept:
    """The end of the JSON number at ``i``, or -1; ``integer``: no sign, fraction or exponent."""
    cdef Py_ssize_t start
    integer[0] = True
    if i < n and p[i] == 45:  # -
        integer[0] = False
        i += 1
    if i >= n or not 48 <= p[i] <= 57:
        return -1
    if p[i] == 48:
        i += 1
        if i < n and 48 <= p[i] <= 57:
            return -1  # (a leading zero)
    else:
        while i < n and 48 <= p[i] <= 57:
            i += 1
    if i < n and p[i] == 46:  # .
        integer[0] = False
        i += 1
        start = i
        while i < n and 48 <= p[i] <= 57:
            i += 1
        if i == start:
            return -1
    if i < n and (p[i] == 101 or p[i] == 69):  # e E
        integer[0] = False
        i += 1
        if i < n and (p[i] == 43 or p[i] == 45):
            i += 1
        start = i
        while i < n and 48 <= p[i] <= 57:
            i += 1
        if i == start:
            return -1
    return i


cdef inline int _lex_key(const char *p, Py_ssize_t n) noexcept:
    """The key K_X of the name ``p[:n]``, or -1."""
    if n == 1:
        return K_T if p[0] == 116 else -1
    if n == 2:
        return K_OP if memcmp(p, b"op", 2) == 0 else -1
    if n == 4:
        if memcmp(p, b"rank", 4) == 0: return K_RANK
        if memcmp(p, b"host", 4) == 0: return K_HOST
        if memcmp(p, b"name", 4) == 0: return K_NAME
        if memcmp(p, b"site", 4) == 0: return K_SITE
        if memcmp(p, b"step", 4) == 0: return K_STEP
        if memcmp(p, b"peer", 4) == 0: return K_PEER
        if memcmp(p, b"root", 4) == 0: return K_ROOT
        return -1
    if n == 3:
        return K_DUR if memcmp(p, b"dur", 3) == 0 else -1
    if n == 5:
        if memcmp(p, b"reads", 5) == 0: return K_READS
        if memcmp(p, b"event", 5) == 0: return K_EVENT
        if memcmp(p, b"group", 5) == 0: return K_GROUP
        if memcmp(p, b"label", 5) == 0: return K_LABEL
        if memcmp(p, b"batch", 5) == 0: return K_BATCH
        return -1
    if n == 6:
        if memcmp(p, b"stream", 6) == 0: return K_STREAM
        if memcmp(p, b"writes", 6) == 0: return K_WRITES
        if memcmp(p, b"buffer", 6) == 0: return K_BUFFER
        if memcmp(p, b"nbytes", 6) == 0: return K_NBYTES
        if memcmp(p, b"handle", 6) == 0: return K_HANDLE
        if memcmp(p, b"inputs", 6) == 0: return K_INPUTS
        if memcmp(p, b"result", 6) == 0: return K_RESULT
        return -1
    if n == 7:
        if memcmp(p, b"tensors", 7) == 0: return K_TENSORS
        if memcmp(p, b"outputs", 7) == 0: return K_OUTPUTS
        return -1
    if n == 8:
        if memcmp(p, b"blocking", 8) == 0: return K_BLOCKING
        if memcmp(p, b"inferred", 8) == 0: return K_INFERRED
        return -1
    if n == 10:
        return K_ANY_SOURCE if memcmp(p, b"any_source", 10) == 0 else -1
    return -1


cdef Py_ssize_t _lex_int(const char *p, Py_ssize_t i, Py_ssize_t n, long long limit,
                            long long *out) noexcept:
    """The end of the integer at ``i`` (<= ``limit``), its value in ``out``; -1: not one."""
    cdef bint integer
    cdef Py_ssize_t end = _lex_number(p, i, n, &integer), k
    cdef unsigned long long v = 0  # (19 digits fit: below 10**19 < 2**64)
    if end < 0 or not integer or end - i > 19:
        return -1
    for k in range(i, end):
        v = v * 10 + <unsigned long long>(p[k] - 48)
    if v > <unsigned long long>limit:
        return -1
    out[0] = <long long>v
    return end


# 10**0 .. 10**22: each exact in a double (for _lex_float's exact case)
cdef double[23] _POW10 = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                          1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22]


cdef Py_ssize_t _lex_float(const char *p, Py_ssize_t i, Py_ssize_t n, double *out) except? -2:
    """The end of the number at ``i``, its value (as msgspec gives a float field) in ``out``;
    -1: not a number. A number of at most 15 digits whose decimal exponent is within 22 is its
    digits (an integer below 2**53, exact) times or over a power of ten (exact): one rounding,
    the correctly rounded value (Clinger's fast path), as a full conversion gives it; any other
    goes to Python's conversion (``PyOS_string_to_double``, correctly rounded too)."""
    cdef bint integer, neg = False
    cdef Py_ssize_t end = _lex_number(p, i, n, &integer), k = i, digits = 0, scale = 0
    cdef Py_ssize_t exp = 0, exp_digits = 0
    cdef bint exp_neg = False
    cdef unsigned long long m = 0
    cdef char *stop
    if end < 0:
        return -1
    if p[k] == 45:
        neg = True
        k += 1
    while k < end and 48 <= p[k] <= 57:
        m = m * 10 + <unsigned long long>(p[k] - 48)
        digits += 1
        k += 1
        if digits > 15:
            break
    if digits <= 15 and k < end and p[k] == 46:
        k += 1
        while k < end and 48 <= p[k] <= 57 and digits <= 15:
            m = m * 10 + <unsigned long long>(p[k] - 48)
            digits += 1
            scale += 1
            k += 1
    if digits <= 15 and k < end and (p[k] == 101 or p[k] == 69):
        k += 1
        if p[k] == 43 or p[k] == 45:
            exp_neg = p[k] == 45
            k += 1
        while k < end and exp_digits < 4:
            exp = exp * 10 + (p[k] - 48)
            exp_digits += 1
            k += 1
    if k == end and digits <= 15:  # (every digit taken: else the full conversion)
        exp = (-exp if exp_neg else exp) - scale
        if -22 <= exp <= 22:
            out[0] = <double>m * _POW10[exp] if exp >= 0 else <double>m / _POW10[-exp]
            if neg:
                out[0] = -out[0]
            return end
    out[0] = PyOS_string_to_double(p + i, &stop, NULL)
    if stop != p + end:
        return -1
    return end


cdef Py_ssize_t _lex_ints(const char *p, Py_ssize_t i, Py_ssize_t n, list out) except -2:
    """The end of the array of integers at ``i`` (its ``[``), each (0 to the schema's nbytes
    limit, as msgspec's ``RefObj.sizes``) appended to ``out``, at most ``MAX_DIMS`` of them; -1:
    not such an array."""
    cdef Py_ssize_t end
    cdef long long v
    if i >= n or p[i] != 91:  # [
        return -1
    i = _lex_ws(p, i + 1, n)
    if i < n and p[i] == 93:  # ]
        return i + 1
    while True:
        if len(out) >= MAX_DIMS:
            return -1
        end = _lex_int(p, i, n, LIMIT_NBYTES, &v)
        if end < 0:
            return -1
        PyList_Append(out, PyLong_FromLongLong(v))
        i = _lex_ws(p, end, n)
        if i < n and p[i] == 44:  # ,
            i = _lex_ws(p, i + 1, n)
            continue
        if i < n and p[i] == 93:
            return i + 1
        return -1


cdef Py_ssize_t _lex_refs(Lex *lx, const char *p, Py_ssize_t i, Py_ssize_t n, object lst,
                             object refobj) except -2:
    """The end of the list of refs at ``i`` (its ``[``), each appended to ``lst``: a name as its
    ``str``, an object as ``refobj(...)`` (the fast path's ``RefObj``); -1: not such a list."""
    cdef Py_ssize_t end, j, klen
    cdef long long v = 0
    cdef double w0, w1
    cdef unsigned int seen
    cdef PyObject *got
    i = _lex_ws(p, i + 1, n)
    if i < n and p[i] == 93:  # ]
        return i + 1
    while True:
        if i >= n:
            return -1
        if p[i] == 34:
            end = _lex_string(p, i, n)
            if end < 0 or end - i == 2:
                return -1  # (an escape, or an empty name: msgspec refuses it, the checker words it)
            got = lex_str(lx, p + i + 1, end - i - 2)
            if got == NULL:
                return -1
            PyList_Append(lst, <object>got)
            i = end
        elif p[i] == 123:  # {
            kw = {}
            seen = 0
            i = _lex_ws(p, i + 1, n)
            while True:
                if i >= n or p[i] != 34:
                    return -1
                end = _lex_string(p, i, n)
                if end < 0:
                    return -1
                klen = end - i - 2  # (a ref object's keys: 5 to 8 letters)
                j = _lex_ws(p, end, n)
                if j >= n or p[j] != 58:  # :
                    return -1
                j = _lex_ws(p, j + 1, n)
                if klen != 6:  # (a strided ref's: its sizes, strides, item size)
                    if klen == 5 and memcmp(p + i + 1, b"sizes", 5) == 0 and not seen & 16:
                        seen |= 16
                        ints = []
                        end = _lex_ints(p, j, n, ints)
                        kw["sizes"] = ints
                    elif klen == 7 and memcmp(p + i + 1, b"strides", 7) == 0 and not seen & 32:
                        seen |= 32
                        ints = []
                        end = _lex_ints(p, j, n, ints)
                        kw["strides"] = ints
                    elif klen == 8 and memcmp(p + i + 1, b"itemsize", 8) == 0 and not seen & 64:
                        seen |= 64
                        end = _lex_int(p, j, n, LIMIT_NBYTES, &v)
                        if v < 1:  # (msgspec's Meta(ge=1): it refuses 0, the checker words it)
                            return -1
                        kw["itemsize"] = PyLong_FromLongLong(v)
                    else:
                        return -1  # (an unknown key, a key given twice)
                    if end < 0:
                        return -1
                elif memcmp(p + i + 1, b"buffer", 6) == 0 and not seen & 1:
                    seen |= 1
                    if j >= n or p[j] != 34:
                        return -1
                    end = _lex_string(p, j, n)
                    if end < 0 or end - j == 2:
                        return -1
                    got = lex_str(lx, p + j + 1, end - j - 2)
                    if got == NULL:
                        return -1
                    kw["buffer"] = <object>got
                elif memcmp(p + i + 1, b"offset", 6) == 0 and not seen & 2:
                    seen |= 2
                    end = _lex_int(p, j, n, LIMIT_OFFSET, &v)
                    if end < 0:
                        return -1
                    kw["offset"] = PyLong_FromLongLong(v)
                elif memcmp(p + i + 1, b"nbytes", 6) == 0 and not seen & 4:
                    seen |= 4
                    end = _lex_int(p, j, n, LIMIT_NBYTES, &v)
                    if end < 0:
                        return -1
                    kw["nbytes"] = PyLong_FromLongLong(v)
                elif memcmp(p + i + 1, b"window", 6) == 0 and not seen & 8:
                    seen |= 8
                    if j >= n or p[j] != 91:  # [
                        return -1
                    end = _lex_float(p, _lex_ws(p, j + 1, n), n, &w0)
                    if end < 0:
                        return -1
                    end = _lex_ws(p, end, n)
                    if end >= n or p[end] != 44:
                        return -1
                    end = _lex_float(p, _lex_ws(p, end + 1, n), n, &w1)
                    if end < 0:
                        return -1
                    end = _lex_ws(p, end, n)
                    if end >= n or p[end] != 93:
                        return -1
                    end += 1
                    kw["window"] = (PyFloat_FromDouble(w0), PyFloat_FromDouble(w1))
                else:
                    return -1  # (an unknown key, a key given twice)
                i = _lex_ws(p, end, n)
                if i < n and p[i] == 44:  # ,
                    i = _lex_ws(p, i + 1, n)
                    continue
                if i < n and p[i] == 125:  # }
                    i += 1
                    break
                return -1
            if not seen & 1:
                return -1  # (no buffer: the checker words it)
            PyList_Append(lst, refobj(**kw))
        else:
            return -1
        i = _lex_ws(p, i, n)
        if i < n and p[i] == 44:
            i = _lex_ws(p, i + 1, n)
            continue
        if i < n and p[i] == 93:
            return i + 1
        return -1


cdef int lex_chunk(Lex *lx, object chunk, object refobj) except -1:
    """:func:`lex_line` of a line as split from the file: its bytes, or a ``str`` as UTF-8 (an
    ASCII one's characters are its bytes); 0 for a ``str`` with a lone surrogate (which has no
    UTF-8: the checker words it)."""
    cdef const char *p
    cdef Py_ssize_t n
    if type(chunk) is bytes:
        return lex_line(lx, PyBytes_AS_STRING(chunk), PyBytes_GET_SIZE(chunk), refobj)
    if PyUnicode_IS_ASCII(chunk):
        return lex_line(lx, <const char *>PyUnicode_DATA(<PyObject *>chunk),
                        PyUnicode_GET_LENGTH(<PyObject *>chunk), refobj)
    try:
        p = PyUnicode_AsUTF8AndSize(chunk, &n)
    except UnicodeEncodeError:
        return 0
    return lex_line(lx, p, n, refobj)


cdef inline int _lex_op(PyObject *s) noexcept:
    """Which of OP_NAMES ``s`` (a string of the table) is (their objects: put in first); -1:
    none."""
    cdef int o
    for o in range(N_OPS):
        if OP_NAMES[o] is <object>s:
            return o
    return -1


cdef int lex_line(Lex *lx, const char *p, Py_ssize_t n, object refobj) except -1:
    """Lex the line ``p[:n]`` into ``lx`` (its op, keys and values): 1, or 0 where it is not a
    line this lexer takes (then ``lx`` holds nothing)."""
    cdef Py_ssize_t i, end, start
    cdef int k, t, o = -1
    cdef bint integer
    lex_clear(lx)
    lx.foreign_op = False
    i = _lex_ws(p, 0, n)
    if i >= n or p[i] != 123:  # {
        return 0
    i = _lex_ws(p, i + 1, n)
    while True:
        if i >= n or p[i] != 34:
            lex_clear(lx)
            return 0
        end = _lex_string(p, i, n)
        if end < 0:
            lex_clear(lx)
            return 0
        k = _lex_key(p + i + 1, end - i - 2)
        if k < 0 or lx.seen & (1u << k):
            lex_clear(lx)
            return 0  # (an unknown key, or one given twice)
        i = _lex_ws(p, end, n)
        if i >= n or p[i] != 58:  # :
            lex_clear(lx)
            return 0
        i = _lex_ws(p, i + 1, n)
        if i >= n:
            lex_clear(lx)
            return 0
        t = TYPE_OF[k]
        if t == T_STR or t == T_STR_ANY:
            if p[i] != 34:
                lex_clear(lx)
                return 0
            end = _lex_string(p, i, n)
            if end < 0 or (end - i == 2 and t == T_STR):
                lex_clear(lx)
                return 0
            lx.obj[k] = lex_str(lx, p + i + 1, end - i - 2)
            if lx.obj[k] == NULL:
                lex_clear(lx)
                return 0
            if k == K_OP:
                o = _lex_op(lx.obj[k])
                if o < 0:
                    lex_clear(lx)
                    lx.foreign_op = True
                    return 0  # (another op: the checker's)
        elif t == T_INT:
            end = _lex_int(p, i, n, LIMIT_OF[k], &lx.num[k])
        elif t == T_FLOAT:
            end = _lex_float(p, i, n, &lx.real[k])
            if end >= 0 and not 0.0 <= lx.real[k] <= MAX_FLOAT:
                end = -1
        elif t == T_BOOL:
            if n - i >= 4 and memcmp(p + i, b"true", 4) == 0:
                lx.num[k], end = 1, i + 4
            elif n - i >= 5 and memcmp(p + i, b"false", 5) == 0:
                lx.num[k], end = 0, i + 5
            else:
                end = -1
        else:  # T_REFS
            if p[i] != 91:  # [
                end = -1
            else:
                lst = []
                Py_INCREF(lst)  # (lx's reference, dropped by lex_clear)
                lx.obj[k] = <PyObject *>lst
                lx.seen |= 1u << k
                end = _lex_refs(lx, p, i, n, lst, refobj)
        if end < 0:
            lex_clear(lx)
            return 0
        lx.seen |= 1u << k
        i = _lex_ws(p, end, n)
        if i < n and p[i] == 44:  # ,
            i = _lex_ws(p, i + 1, n)
            continue
        if i < n and p[i] == 125:  # }
            break
        lex_clear(lx)
        return 0
    if _lex_ws(p, i + 1, n) != n or not lx.seen & (1u << K_OP):
        lex_clear(lx)
        return 0  # (something after the object; no op)
    # (o: the op's place in OP_NAMES, found when its value was read)
    if lx.seen & ~KEYS_OF[o] or REQUIRED_OF[o] & ~lx.seen:
        lex_clear(lx)
        return 0  # (a key its op does not take; a key it needs is missing)
    lx.op = o
    return 1
