# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The two large tables of the JSON report (version 4), written in C: :func:`op_rows` and
:func:`hazard_entries`.

The reference is streamsim/report/jsonv4.py: a block of ``ops.rows`` is
``repaired(b",".join(b'\\n      "%d":%s' % (i, encode_compact(op_row(op))) ...))`` and a block of
``hazards`` ``repaired(b",".join(b"\\n    " + encode_compact(hazard_v4(h)) ...))``, the text
``json.dumps(value, separators=(",", ":"))`` writes (streamsim/report/jsontext.py: orjson's bytes
made json's). Here the same text is written straight from the ops and hazards, without the lists
and dicts in between: a str as json escapes it with ``ensure_ascii`` (``\\"``, ``\\\\``, the
short escapes of ``\\b \\f \\n \\r \\t``, any other character outside ``' '..'~'`` as ``\\u00e9``,
above U+FFFF as a surrogate pair), an int as ``str`` writes it, a float as ``repr`` (a NaN or an
infinity as ``null``, as the reference writes them), None, True and False as ``null``, ``true``,
``false``. A value of any other type (or an op, hazard, fix or agent of another class than the ones
bound) makes the function return None, and the reference writes the block.

On the 200,000-line random program (148,055 op rows, 59,912 hazards) the two tables took 0.16-0.17 s
CPU here against the reference's 0.30-0.32 s. A string's leading plain run is copied in one
``memcpy``, and a row read from columns writes its location and times without making them:
the whole JSON report's text 0.270-0.275 -> 0.217-0.242 s (three alternating pairs, the twenty-first
session). Most of what is left is Python's float repr (dtoa, ~18% of the tables' profile).
Tests: tests/native/test_jsonv4.py.
"""
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.object cimport PyObject
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.unicode cimport (PyUnicode_GET_LENGTH, PyUnicode_READ, PyUnicode_KIND, PyUnicode_DATA,
                              PyUnicode_1BYTE_KIND)
from libc.math cimport isfinite

from streamsim.native._cols cimport (OpSource, op_source, source_op, source_field, kept_of,
                                     KEPT_PATH)
from streamsim.native._slots cimport (slot_set, op_offsets, hazard_offsets, fix_offsets, N_FIELDS,
                                      F_ID, F_AGENT, F_KIND, F_NAME, F_START, F_END, F_LOCATION,
                                      F_STEP, F_LINE, F_ATTRS, H_KIND, H_RANK, H_BUFFER, H_RANGE,
                                      H_FIRST, H_SECOND, H_FIRST_MODE, H_SECOND_MODE, H_MANIFEST,
                                      H_FIX, N_HAZARD_FIELDS, X_KIND, X_TEXT, X_BEFORE,
                                      X_HANDLE_OP, X_RECORD_AFTER, X_EVENT_STREAM, X_WAIT_STREAM,
                                      N_FIX_FIELDS)

from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdio cimport snprintf
from libc.string cimport memcpy, memset, strlen

DEF FLOAT_CACHE_BITS = 12  # recent floats' texts kept (4,096)

cdef extern from "Python.h":
    char *PyOS_double_to_string(double val, char format_code, int precision, int flags,
                                int *type) except NULL
    int Py_DTSF_ADD_DOT_0

cdef object Op = None, Agent = None, Hazard = None, Fix = None
cdef extern from *:
    """
    /* repr(x) of a double without dtoa, where that is certain (streamsim/native/_jsonv4.pyx,
       _short_decimal's docstring says why each step is exact). -1: dtoa must say it. */
    #include <string.h>
    #include <stdint.h>
    #ifdef __SIZEOF_INT128__
    typedef unsigned __int128 streamsim_u128;
    /* Whether the decimal v / 10**k rounds (to nearest, ties to even) to m * 2**-E:
       (4m - c) * 10**k <= v * 2**(E+2) <= (4m + 2) * 10**k, c = 1 at a binade's bottom, else 2,
       an equality only for an even m. */
    static int streamsim_reads_back(uint64_t v, streamsim_u128 p, uint64_t m, int E) {
        streamsim_u128 a = ((streamsim_u128)v) << (E + 2);
        streamsim_u128 lo = ((streamsim_u128)(4 * m - (m == (1ULL << 52) ? 1 : 2))) * p;
        streamsim_u128 hi = ((streamsim_u128)(4 * m + 2)) * p;
        if (m & 1) return lo < a && a < hi;
        return lo <= a && a <= hi;
    }
    static int streamsim_short_repr(double x, char *out) {
        uint64_t bits, m, v;
        int ex, E, k, n = 0, nd, j;
        char digits[24];
        double ax = x < 0 ? -x : x;
        streamsim_u128 p = 1;
        if (!(ax >= 1e-4 && ax < 1e15)) return -1;
        memcpy(&bits, &ax, 8);
        ex = (int)((bits >> 52) & 0x7FF);
        m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
        E = 1075 - ex;  /* ax = m * 2**-E, 3 <= E <= 66 in this range */
        for (k = 0; k <= 21; k++, p *= 10) {
            v = (uint64_t)((((streamsim_u128)m) * p + (((streamsim_u128)1) << (E - 1))) >> E);
            if (v >= 100000000000000000ULL) return -1;  /* 18 digits: more than repr's 17 */
            if (!streamsim_reads_back(v, p, m, E)) continue;
            if (k > 0 && v % 10 == 0) return -1;  /* a shorter decimal reads back too */
            /* v is the nearest to |x| * 10**k: repr's of several that read back, unless |x| *
               10**k lies half-way between two (dtoa's tie) */
            if (((((streamsim_u128)m) * p) & ((((streamsim_u128)1) << E) - 1))
                    == (((streamsim_u128)1) << (E - 1))
                    && ((v > 0 && streamsim_reads_back(v - 1, p, m, E))
                        || streamsim_reads_back(v + 1, p, m, E)))
                return -1;
            nd = 0;
            do { digits[nd++] = (char)('0' + v % 10); v /= 10; } while (v);
            if (x < 0) out[n++] = '-';
            if (nd <= k) {  /* 0.00ddd */
                out[n++] = '0'; out[n++] = '.';
                for (j = 0; j < k - nd; j++) out[n++] = '0';
                for (j = nd - 1; j >= 0; j--) out[n++] = digits[j];
            } else {
                for (j = nd - 1; j >= k; j--) out[n++] = digits[j];
                out[n++] = '.';
                if (k == 0) out[n++] = '0';
                for (j = k - 1; j >= 0; j--) out[n++] = digits[j];
            }
            return n;
        }
        return -1;
    }
    #else
    static int streamsim_short_repr(double x, char *out) { (void)x; (void)out; return -1; }
    #endif
    """
    int _short_repr "streamsim_short_repr" (double x, char *out) noexcept


cdef int _short_decimal(double x, char *out) noexcept:
    """``repr(x)`` into ``out`` (32 bytes), without dtoa, where ``x`` is one a report holds in
    fixed notation (1e-4 <= |x| < 1e15): a program's times and durations, sums of microseconds
    to a few decimals, whose dtoa (bignum steps) took half of the JSON op rows' time. Returns the
    length, or -1 where dtoa must say it (and always, where the C compiler has no 128-bit ints).

    With ``|x| = m * 2**-E`` exactly, for k = 0, 1, ... decimal places the nearest integer
    v to ``|x| * 10**k`` is found in 128-bit integers, and the decimal ``v`` e-k reads back as
    ``x`` exactly when it lies within the half-ulps around it (ties to an even m): one
    comparison of integers, no rounding. ``repr`` writes the shortest decimal that reads back,
    the closest of them if several; so the first k at which v reads back is taken only where
    no decimal of fewer places does (v ends in no zero: else the shorter one would be among
    those of k places), and v, the nearest, is the closest unless ``|x| * 10**k`` lies exactly
    half-way between two integers that both read back (a tie: dtoa's to break). Every other
    case, and 18 digits, leaves ``x`` to dtoa. tests/native/test_jsonv4.py holds this to
    ``repr`` on a million floats."""
    return _short_repr(x, out)


def float_texts(list xs) -> str:
    """The texts the JSON writer gives floats ``xs`` (``repr``, or ``null`` for a NaN or an
    infinity), one a line, as one writer writes them in turn (:meth:`_Out.number`): what
    tests/native/test_jsonv4.py compares with ``repr``."""
    cdef _Out out = _Out()
    cdef Py_ssize_t k
    for k in range(len(xs)):
        if k:
            out.lit(b"\n")
        out.number(<double?>xs[k])
    return out.text()
cdef Py_ssize_t _op[<int>N_FIELDS]
cdef Py_ssize_t _hz[<int>N_HAZARD_FIELDS]
cdef Py_ssize_t _fx[<int>N_FIX_FIELDS]
# hazard_v4's and fix_v4's keys in order, each with its field; -1: written apart (the range, a
# list; the fix, an object; its streams, an agent's text or null)
cdef char _SHORT[128]  # the characters json escapes as a backslash and one letter: that letter
memset(_SHORT, 0, 128)
for _c, _letter in ((34, 34), (92, 92), (10, 110), (13, 114), (9, 116), (8, 98), (12, 102)):
    _SHORT[_c] = _letter
cdef const char *_HAZARD_KEYS[10]
cdef int _HAZARD_FIELD[10]
cdef const char *_FIX_KEYS[7]
cdef int _FIX_FIELD[7]
_HAZARD_KEYS[:] = [b'{"kind":', b',"buffer":', b',"rank":', b',"range":', b',"first":',
                   b',"second":', b',"first_mode":', b',"second_mode":', b',"manifest":',
                   b',"fix":']
_HAZARD_FIELD[:] = [H_KIND, H_BUFFER, H_RANK, -1, H_FIRST, H_SECOND, H_FIRST_MODE, H_SECOND_MODE,
                    H_MANIFEST, -1]
_FIX_KEYS[:] = [b'{"kind":', b',"text":', b',"before":', b',"handle_op":', b',"record_after":',
                b',"event_stream":', b',"wait_stream":']
_FIX_FIELD[:] = [X_KIND, X_TEXT, X_BEFORE, X_HANDLE_OP, X_RECORD_AFTER, -1, -1]


cdef object _words = None  # the type of a fix's words made when read (findings._FixText)


cdef inline object _unmade():
    """The type of the words ``Fix.text`` makes when read (``_fixes.Words``, once the compiled
    fixes are bound; None before)."""
    global _words
    if _words is None:
        _words = Fix.__dict__["text"].unmade
    return _words


def bind(op, agent, hazard, fix):
    """The trace's ``Op`` and ``Agent``, the findings' ``Hazard`` and ``Fix``."""
    global Op, Agent, Hazard, Fix
    Op, Agent, Hazard, Fix = op, agent, hazard, fix
    op_offsets(Op, _op)
    hazard_offsets(Hazard, _hz)
    fix_offsets(Fix, _fx)


class _Refused(Exception):
    """A value the reference writes differently or not at all: it writes the block."""


cdef class _Out:
    """The text being written, ASCII, in a growing C buffer; with the text of each agent made
    once (``str(agent)``: ``rank{rank}/{name}``)."""
    cdef char *buf
    cdef Py_ssize_t n, cap
    cdef dict agents  # id(agent) -> its text
    cdef dict agent_rows  # id(agent) -> its text and rank as an op row has them
    cdef unsigned long long float_bits[1 << FLOAT_CACHE_BITS]
    cdef char float_text[1 << FLOAT_CACHE_BITS][32]
    cdef unsigned char float_len[1 << FLOAT_CACHE_BITS]
    cdef unsigned char float_used[1 << FLOAT_CACHE_BITS]
    cdef void *last_agent  # the agent of the row before, and its text and rank as a row has them
    cdef bytes last_agent_row

    def __cinit__(self):
        self.cap = 1 << 16
        self.buf = <char *>PyMem_Malloc(self.cap)
        if self.buf == NULL:
            raise MemoryError()
        self.n = 0
        self.agents = {}
        self.agent_rows = {}
        memset(self.float_used, 0, sizeof(self.float_used))
        self.last_agent = NULL

    def __dealloc__(self):
        PyMem_Free(self.buf)

    cdef inline int room(self, Py_ssize_t more) except -1:
        """At least ``more`` bytes free at the end."""
        cdef char *grown
        if self.n + more <= self.cap:
            return 0
        while self.n + more > self.cap:
            self.cap *= 2
        grown = <char *>PyMem_Realloc(self.buf, self.cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        return 0

    cdef inline int raw(self, const char *s, Py_ssize_t k) except -1:
        self.room(k)
        memcpy(self.buf + self.n, s, k)
        self.n += k
        return 0

    cdef inline int lit(self, const char *s) except -1:
        return self.raw(s, strlen(s))

    cdef int string(self, str s) except -1:
        """``s`` as json writes it (``ensure_ascii``)."""
        self.room(1)
        self.buf[self.n] = 34
        self.n += 1
        self.chars(s)
        self.room(1)
        self.buf[self.n] = 34
        self.n += 1
        return 0

    cdef int chars(self, str s) except -1:
        """The characters of ``s`` as json escapes them, without the quotes. Its leading run of
        characters written as they are (a name, a location, a kind: most strings are one) is
        copied in one ``memcpy`` (the character loop was 16% of writing the random program's
        tables)."""
        cdef Py_ssize_t i, j = 0, n = PyUnicode_GET_LENGTH(s)
        cdef int kind = PyUnicode_KIND(s)
        cdef void *data = PyUnicode_DATA(s)
        cdef const unsigned char *b
        cdef Py_UCS4 c
        cdef unsigned int u
        cdef char esc[16]
        self.room(n)
        if kind == PyUnicode_1BYTE_KIND:
            b = <const unsigned char *>data
            while j < n and 0x20 <= b[j] <= 0x7e and b[j] != 34 and b[j] != 92:
                j += 1
            memcpy(self.buf + self.n, b, j)
            self.n += j
        for i in range(j, n):
            c = PyUnicode_READ(kind, data, i)
            if 0x20 <= c <= 0x7e and c != 34 and c != 92:
                self.room(1)
                self.buf[self.n] = <char>c
                self.n += 1
            elif c < 128 and _SHORT[c]:  # json's two-character escapes
                esc[0], esc[1] = 92, _SHORT[c]
                self.raw(esc, 2)
            elif c > 0xFFFF:
                u = <unsigned int>c - 0x10000
                snprintf(esc, 16, "\\u%04x\\u%04x", 0xD800 | (u >> 10), 0xDC00 | (u & 0x3FF))
                self.raw(esc, 12)
            else:
                snprintf(esc, 16, "\\u%04x", <unsigned int>c)
                self.raw(esc, 6)
        return 0

    cdef int location(self, object path, long long lineno) except -1:
        """``f"{path}:{lineno}"`` as a JSON string, written without making it where ``path``
        is a str (a column's op, whose line is its number in the columns: 148,055 strings made
        and freed for the random program's rows)."""
        if type(path) is not str:
            return self.string(f"{path}:{lineno}")
        self.lit(b'"')
        self.chars(<str>path)
        self.lit(b":")
        self.integer(lineno)
        return self.lit(b'"')

    cdef int number(self, double x) except -1:
        """A float as :meth:`value` writes it: ``repr``, or ``null`` for a NaN or an
        infinity."""
        if not isfinite(x):
            return self.raw(b"null", 4)
        return self.double(x)

    cdef int integer(self, long long v) except -1:
        """``str(v)``."""
        cdef char num[24]
        cdef int k = 24
        cdef unsigned long long u = (0ULL - <unsigned long long>v) if v < 0 else \
            <unsigned long long>v  # (unsigned: -v of the least long long would overflow)
        while True:
            k -= 1
            num[k] = <char>(48 + u % 10)
            u //= 10
            if u == 0:
                break
        if v < 0:
            k -= 1
            num[k] = 45
        self.raw(num + k, 24 - k)
        return 0

    cdef int double(self, double x) except -1:
        """``repr(x)`` of a finite float: Python's shortest round-trip digits (a decimal of
        few digits without dtoa, :func:`_short_decimal`; else dtoa), made
        once for each of the recent values (a direct-mapped cache by the value's bits: a
        stream's ops start as the ones before them end, so the same times recur)."""
        cdef unsigned long long bits
        memcpy(&bits, &x, 8)
        cdef Py_ssize_t slot = <Py_ssize_t>((bits * 0x9E3779B97F4A7C15ULL) >> (64 - FLOAT_CACHE_BITS))
        cdef char *s
        cdef Py_ssize_t k
        if self.float_used[slot] and self.float_bits[slot] == bits:
            return self.raw(self.float_text[slot], self.float_len[slot])
        cdef char buf[32]
        k = _short_decimal(x, buf)  # (most times: no dtoa)
        if k >= 0:
            memcpy(self.float_text[slot], buf, k)
            self.float_len[slot] = k
            self.float_bits[slot] = bits
            self.float_used[slot] = 1
            return self.raw(buf, k)
        s = PyOS_double_to_string(x, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
        try:
            k = strlen(s)
            if k < 32:
                memcpy(self.float_text[slot], s, k)
                self.float_len[slot] = k
                self.float_bits[slot] = bits
                self.float_used[slot] = 1
            self.raw(s, k)
        finally:
            PyMem_Free(s)
        return 0

    cdef int value(self, object v) except -1:
        """One JSON value (see the module's docstring), or _Refused."""
        cdef double x
        cdef char *s
        cdef int overflow = 0
        cdef long long i
        t = type(v)
        if t is str:
            self.string(<str>v)
        elif v is None:
            self.raw(b"null", 4)
        elif t is int:
            i = PyLong_AsLongLongAndOverflow(v, &overflow)
            if overflow:
                b = str(v).encode()
                self.raw(b, len(b))
            else:
                self.integer(i)
        elif t is float:
            self.number(PyFloat_AS_DOUBLE(v))
        elif v is True:
            self.raw(b"true", 4)
        elif v is False:
            self.raw(b"false", 5)
        else:
            raise _Refused()
        return 0

    cdef int item(self, object v) except -1:
        """One value of a row, and the comma after it."""
        self.value(v)
        return self.lit(b",")

    cdef int agent(self, object a) except -1:
        """``str(a)`` of an Agent, as a JSON string."""
        if type(a) is not Agent:
            raise _Refused()
        text = self.agents.get(id(a))
        if text is None:
            text = self.agents[id(a)] = f"rank{a.rank}/{a.name}"
        self.string(text)
        return 0

    cdef int agent_row(self, object a) except -1:
        """An op row's ``"str(agent)",rank,`` (the agent's text and rank made once per agent)."""
        cdef bytes row
        if <void *>a != self.last_agent:
            row = self.agent_rows.get(id(a))
            if row is None:
                if type(a) is not Agent:
                    raise _Refused()
                mark = self.n
                self.agent(a)
                self.lit(b",")
                self.value(a.rank)
                self.lit(b",")
                row = self.agent_rows[id(a)] = self.buf[mark:self.n]
                self.n = mark
            self.last_agent, self.last_agent_row = <void *>a, row
        return self.raw(self.last_agent_row, len(self.last_agent_row))

    cdef int fields(self, object rec, Py_ssize_t *offsets, const char **keys, int *field,
                    int n) except -2:
        """A hazard's or a fix's keys and values, in the order of ``keys`` (``field``: each
        value's slot, or -1 for the range, the fix and the fix's streams); -1 where the
        reference must write it."""
        cdef int j
        for j in range(n):
            self.lit(keys[j])
            if field[j] == X_TEXT and keys == _FIX_KEYS:  # (its text: maybe made when read)
                v = slot_set(rec, offsets[X_TEXT])
                self.value(v if type(v) is str or type(v) is not _unmade() else str(v))
            elif field[j] >= 0:
                self.value(slot_set(rec, offsets[field[j]]))
            elif keys == _FIX_KEYS:  # (event_stream, wait_stream: an agent's text, or null)
                v = slot_set(rec, offsets[X_EVENT_STREAM if j == 5 else X_WAIT_STREAM])
                if v is None:
                    self.lit(b"null")
                else:
                    self.agent(v)
            elif j == 3:  # the range: [lo, hi]
                rng = slot_set(rec, offsets[H_RANGE])
                if type(rng) is not tuple or len(<tuple>rng) != 2:
                    return -1
                self.lit(b"[")
                self.value((<tuple>rng)[0])
                self.lit(b",")
                self.value((<tuple>rng)[1])
                self.lit(b"]")
            else:  # the fix
                fix = slot_set(rec, offsets[H_FIX])
                if fix is None:
                    self.lit(b"null")
                elif type(fix) is not Fix or self.fields(fix, _fx, _FIX_KEYS, _FIX_FIELD, 7) < 0:
                    return -1
                else:
                    self.lit(b"}")
        return 0

    cdef str text(self):
        return PyUnicode_DecodeASCII(self.buf, self.n, NULL)


def op_rows(ops, list ids, columns=None):
    """``ops.rows``' entries of ``ids`` (``ops``: the trace's ops, by id; or ``columns``, a run
    kept as columns, ``native._columns_of``: read from them, no op made), as jsonv4 writes a
    block of them; None where the reference must write it (or the columns do not serve:
    ``_cols.op_fields_kept``)."""
    cdef _Out out = _Out()
    cdef Py_ssize_t k
    cdef int field
    cdef OpSource src
    held = op_source(&src, columns, None if ops is None else lambda: ops,
                     PY_SSIZE_T_MAX)  # (``ops`` by id, however many: any id it has)
    if held is None:
        return None  # (columns that do not serve)
    try:
        for k in range(len(ids)):
            i = ids[k]
            o = source_op(&src, i, Op, _op)
            if o is None:
                return None
            if k:
                out.lit(b",")
            out.lit(b'\n      "')
            out.value(i)  # (an int's %d is its str)
            out.lit(b'":[')
            for field in (F_NAME, F_KIND):
                out.item(source_field(&src, o, field, _op))
            out.agent_row(source_field(&src, o, F_AGENT, _op))
            out.item(source_field(&src, o, F_STEP, _op))
            if src.c != NULL:  # (from columns: the location and times written, not made)
                out.location(<object>kept_of(src.c, i, KEPT_PATH), src.c.line[<Py_ssize_t>i])
                out.lit(b",")
                out.number(src.c.start[<Py_ssize_t>i])
                out.lit(b",")
                out.number(src.c.end[<Py_ssize_t>i])
                out.lit(b",")
            else:
                for field in (F_LOCATION, F_START, F_END):
                    out.item(source_field(&src, o, field, _op))
            attrs = source_field(&src, o, F_ATTRS, _op)
            if type(attrs) is not dict:
                return None
            out.item((<dict>attrs).get("microbatch"))
            out.value(source_field(&src, o, F_LINE, _op))
            out.lit(b"]")
    except (_Refused, AttributeError):  # (AttributeError: a field never set)
        return None
    return out.text()


def hazard_entries(list hazards):
    """``hazards``' entries, as jsonv4 writes a block of them (``hazard_v4``, compact, one a
    line); None where the reference must write it."""
    cdef _Out out = _Out()
    cdef Py_ssize_t k
    try:
        for k in range(len(hazards)):
            h = hazards[k]
            if type(h) is not Hazard:
                return None
            out.lit(b",\n    " if k else b"\n    ")
            if out.fields(h, _hz, _HAZARD_KEYS, _HAZARD_FIELD, 10) < 0:
                return None
            out.lit(b"}")
    except (_Refused, AttributeError):  # (AttributeError: a field never set)
        return None
    return out.text()


def hazard_op_ids(hazards, Py_ssize_t nops):
    """The ids the hazards name (their two ops, their fixes' places that are ints), ascending
    (``jsonv4.named_ops``' loop over the hazards, its ``sorted``): a flag per op id instead of a
    set; None when the reference must collect them (a hazard or fix of another class or with a
    field never set, an id that is not an int in ``[0, nops)``)."""
    flags = hazard_op_flags(hazards, nops)
    if flags is None:
        return None
    got, _ = flagged_ids(flags, 0, nops)
    return got


def hazard_op_flags(hazards, Py_ssize_t nops):
    """:func:`hazard_op_ids` as a flag an op (a ``bytearray`` of ``nops``, 1 where named), which
    :func:`flagged_ids` reads a block at a time: the JSON writer's ids of a large report are
    never a list of them all (at 1,000,000 lines of the random program 742,258 int objects and
    their list, 27 MB, and a set of them, 32 MB, to add a warning's ops); None as there."""
    try:
        return _hazard_op_flags(hazards, nops)
    except AttributeError:  # (slot_set: a field never set, which the reference may not read)
        return None


def flagged_ids(bytearray flags, Py_ssize_t start, Py_ssize_t most):
    """``(ids, next)``: the ids flagged in ``flags`` from ``start``, ascending, at most ``most``
    of them, and where the next block starts (``len(flags)``: none left)."""
    cdef const unsigned char *flag = flags
    cdef Py_ssize_t n = len(flags), i = start
    cdef list out = []
    while i < n and len(out) < most:
        if flag[i]:
            out.append(i)
        i += 1
    return out, i


cdef object _hazard_op_flags(hazards, Py_ssize_t nops):
    cdef bytearray seen = bytearray(nops)
    cdef unsigned char *flag = seen
    cdef Py_ssize_t i
    cdef int f
    for h in hazards:
        if type(h) is not Hazard:
            return None
        for f in (H_FIRST, H_SECOND):
            i = _op_id(slot_set(h, _hz[f]), nops, True)
            if i < 0:
                return None
            flag[i] = 1
        fix = slot_set(h, _hz[H_FIX])
        if fix is None:
            continue
        if type(fix) is not Fix:
            return None
        for f in (X_BEFORE, X_HANDLE_OP, X_RECORD_AFTER):
            i = _op_id(slot_set(fix, _fx[f]), nops, False)
            if i == -2:
                return None
            if i >= 0:
                flag[i] = 1
    return seen


cdef Py_ssize_t _op_id(object x, Py_ssize_t nops, bint always) except -3:
    """The op id ``x`` as an index: -1 where it is no place (a fix's place that is not an int:
    keyed, or None), -2 where the reference must look (an int of another type, or outside
    ``[0, nops)``; ``always``: not an int either, a hazard's op)."""
    if type(x) is not int:
        return -2 if always or isinstance(x, int) else -1
    cdef Py_ssize_t i = x
    return i if 0 <= i < nops else -2
