# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled replay of an op log: the simpy engine's schedule, event for event, in C.

The reference is the simpy replay (streamsim/oplog/replay.py driving streamsim/sim/engine.py,
host.py and comm.py through the modelling API). This module replays the op logs whose lines are of
the kinds of :data:`KINDS`: kernels, host work, events, host syncs, allocations, frees,
``record_stream``, NCCL and gloo sends and receives (batched or not), the collectives, handle waits
and queries, gloo object sends, ``put``/``get`` hand-offs; a rank may have several host threads,
which keep the reference's line order between them (streamsim/oplog/issueorder.py: each thread
settles its clock and waits for the lines of other threads its line must follow; a line waited for
is taken once its call returns, a blocking one as it starts); and fix costing's re-runs with event,
event-sync, ``record_stream``, handle-wait and hand-off fixes (streamsim/sim/inject.py; not a sync
that blocks the host between two members of a batch): on a thread of a rank of several, each sync
settles as its calls do, after the settles of the call it comes before, the syncs after an action
run before the thread waits for another's line (Engine.flush_post_injections), outside the call's
stream, a wait whose record or handle is another thread's waits until it is issued
(inject._wait_event, _wait_handle), and a hand-off's get waits for its put as a program's get
does; the syncs of a batch run before, between and after its members as Host.batch_p2p issues
them. For those, it runs the same discrete-event schedule as simpy does for the engine: a heap of (time, priority, insertion number) entries, each resuming one process (a host
thread or a stream's loop) at the point it yielded, with the same entries pushed in the same order
(a process's start: urgent; a timeout, a stream's wake-up, an op's end waking its waiters, a
transfer's receive starting or its data arriving, a collective's last member: normal), so that ties
at equal times break the same way and every op gets the same id, times, sequence positions, edges,
attrs and notes as the reference gives it. (A simpy event with several waiters, a collective's
start, resumes them in one step; here each is an entry of its own, pushed in the same order with
consecutive numbers: nothing a resumed stream schedules can come between them, as it schedules only
normal entries. A line's signal that host threads wait on is one entry that resumes them all in one
step, in the order they began waiting: a resumed host may start a stream, an urgent entry.) It
makes the ops the engine's records become (``Op``, the slots of its ``Rec``, handed over by
:func:`bind`; their ``after`` and ``joins`` op ids already, as the engine's ``build_trace`` makes
its records before it freezes them) and leaves the trace to ``finish.trace_of``, with which the
engine's own ``build_trace`` ends: the two traces are built by one function.

What it keeps in C: the log's lines, as rows (``_lines.pxd``: the compiled reader's, or made
here of the ``Line`` s it is given) that each thread reads by their places; each op's times,
sequence positions, agent, index and issuer; its accesses, as places in one list of the run's
``Access`` objects (each distinct one once); each stream's queue; the heap; the waiters of each
op. What stays Python: each op's attrs and edges (tuples it hands to the records), the notes,
the seeded ``random.Random`` whose draws scale the durations (drawn in the reference's order:
each op as it is made).

:func:`replay` returns None, having made nothing the caller sees, whenever the reference would do
something this module does not: a duration the reference refuses or that jitter overflows, a ref
that is not a plain ``Ref``, a kind or a stream it does not cover, a run that stalls (a process
still waiting when no entry is left: the reference's deadlock report), a fix re-run's syncs that
pass a bound. The caller then runs the reference, which words the error. A bound passed
(``max_ops``, ``max_time``) it raises itself, where the reference would, as a
``streamsim.native.BoundPassed`` that the caller words: the reference would take as long as
the run to say so (at 10,000,000 lines and the default ``max_ops``, 58 s and 6.4 GiB). Held
equal to the reference op by op, and bound by bound, by tests/native/test_replay.py.
"""
cimport cython
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.math cimport exp, isfinite
from libc.string cimport memcmp, memcpy, memset

from streamsim.native._slots cimport (F_ID, F_AGENT, F_INDEX, F_KIND, F_NAME, F_ENQUEUED, F_START,
    F_END, F_START_SEQ, F_END_SEQ, F_ACCESSES, F_ISSUER, F_AFTER, F_JOINS, F_LOCATION, F_STEP,
    F_LINE, F_HANDLE, F_ATTRS, N_FIELDS, op_offsets, put_slot, slot, L_LINENO,
    new_record, check_generic_alloc, class_offsets, view_offsets, view_record, N_VIEW_FIELDS,
    L_OP, L_PATH, L_RANK, L_HOST, L_STREAM, L_NAME, L_DUR, L_STEP, L_READS, L_WRITES, L_EVENT,
    L_PEER, L_GROUP, L_HANDLE, L_NBYTES, L_BUFFER, L_TARGET, L_SITE, L_T, L_RESULT, L_RARE,
    N_LINE, R_BLOCKING, R_BATCH, R_LABEL, R_CHANNEL, R_ROOT, R_ANY_SOURCE, R_INFERRED, N_RARE,
    line_number_at)
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.sequence cimport PySequence_Fast_ITEMS
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport uintptr_t
from libc.limits cimport INT_MAX
from streamsim.native._addrmap cimport AddrMap, addrmap_free, addrmap_get, addrmap_init, addrmap_put
from streamsim.native._cols cimport (OpCols, OPCOLS, col_kind, col_naft, col_aft, col_attrs,
                                     KEPT_OP, KEPT_NAME, KEPT_PATH, KEPT_STEP,
                                     KEPT_EVENT, KEPT_FIELDS,
                                     site_t_attrs, kept_site_t)
from cpython.pycapsule cimport PyCapsule_New
from streamsim.native._row cimport (LRow, LRef, _l, _o_of, NO_T, NO_DUR, RO_PATH, RO_OP,
                                    RO_STEP, RO_SITE)
from streamsim.native._lines cimport Rows
from streamsim.native import _lines

KINDS = frozenset({"launch", "host", "record", "wait_event", "sync_event", "sync_stream",
                   "sync_device", "alloc", "free", "record_stream", "isend", "irecv", "wait",
                   "all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all",
                   "send_object", "recv_object", "isend_object", "reduce", "gather", "scatter",
                   "barrier", "query", "put", "get"})
# (streamsim.sim.comm: SIZED_BY_INPUTS, SIZED_BY_SHARE, _MATCHED, joined_members' flows)
_SIZED_BY_INPUTS = frozenset({"reduce_scatter", "all_to_all", "reduce"})
_MATCHED = frozenset({"reduce", "gather", "scatter", "barrier"})
_TO_ROOT = frozenset({"reduce", "gather"})
_TRANSFER_START = "transfer_start"  # (streamsim.trace.TRANSFER_START)

cdef object Op = None, Rec = None, Agent = None, Access = None, View = None, Note = None, Ref = None
cdef object Line = None
cdef object is_comm = None

cdef Py_ssize_t _offset[<int>N_FIELDS]  # an op's slots (F_X) by their offsets in the object
cdef Py_ssize_t _rec_offset[<int>N_FIELDS]


def bind(**objects):
    """The engine's and the trace's classes (this module imports nothing above it)."""
    global Op, Rec, Agent, Access, View, Note, Ref, is_comm, Line
    Op, Rec, Agent = objects["Op"], objects["Rec"], objects["Agent"]
    Access, View, Note, Ref = objects["Access"], objects["View"], objects["Note"], objects["Ref"]
    is_comm = objects["is_comm"]
    Line = objects["Line"]
    _lines.bind(Line)
    check_generic_alloc(Op)
    class_offsets(Access, ("view", "mode", "window"), _access_offset)
    view_offsets(View, _view_offset)
    check_generic_alloc(Access)
    check_generic_alloc(View)
    op_offsets(Op, _offset)  # (an Op and a Rec: the same slots at the same offsets, as their
    op_offsets(Rec, _rec_offset)  # class swap in build_trace relies on)
    for i in range(N_FIELDS):
        if _rec_offset[i] != _offset[i]:
            raise AssertionError(f"Rec.{Op.__slots__[i]} is not where Op's is")


cdef Py_ssize_t _access_offset[3]  # Access's slots (view, mode, window)
cdef Py_ssize_t _view_offset[<int>N_VIEW_FIELDS]  # View's slots (_slots.view_offsets)
cdef tuple _WHOLE = (0.0, 1.0)  # (Access's default window)


cdef object _access_of(object view, str mode, object window):
    """``Access(view, mode, window)``, made by its slots (no dataclass ``__init__`` call: a
    recorded log makes one at every alloc)."""
    acc = new_record(Access)
    put_slot(acc, _access_offset[0], view)
    put_slot(acc, _access_offset[1], mode)
    put_slot(acc, _access_offset[2], window)
    return acc


cdef inline object _lr(LRef ln, int item):
    """Item ``item`` (R_X) of a line's rarely set fields (``Line.rare``, a tuple of
    ``schema.RARE_FIELDS``): its default where the line has none (False for ``blocking`` and
    ``any_source``, else None). A ``rare`` that is not such a tuple: the reference runs."""
    cdef object r = _l(ln, L_RARE)
    if r is None:
        return False if item == R_BLOCKING or item == R_ANY_SOURCE else None
    if type(r) is not tuple or len(<tuple>r) != N_RARE:
        raise _Fallback()
    return (<tuple>r)[item]


cdef inline double _dur(LRef ln) except? -1.0:
    """A kernel's or host work's ``dur``, as the double its row holds (no float made); None
    (which neither reader gives these kinds) is the reference's to word."""
    if ln.row.flags & NO_DUR:
        raise _Fallback()
    return ln.row.dur


cdef inline str _location(LRef ln):
    """A line's ``location`` (``schema.Line.location``: ``FILE:LINE``), made of its row."""
    return f"{_l(ln, L_PATH)}:{ln.row.lineno}"


cdef inline void _put(object obj, int field, object value) noexcept:
    """Set slot ``field`` (F_X) of a record just made (_slots.pxd's put_slot)."""
    put_slot(obj, _offset[field], value)


cdef int _KEPT[KEPT_FIELDS]  # what an op reads of its line (_Run.kept_line), in _cols.pxd's order
_KEPT[KEPT_OP], _KEPT[KEPT_NAME], _KEPT[KEPT_PATH] = L_OP, L_NAME, L_PATH  # (its location made
_KEPT[KEPT_STEP], _KEPT[KEPT_EVENT] = L_STEP, L_EVENT  # of the path and its number, its index)


DEF FLOAT_CACHE = 4096  # recent floats records() shares (a power of 2)


cdef object _shared_float(list cache, double x):
    """A float object of ``x``'s bits: the cache's (a recent time, made for another op) or a new
    one, which the cache then keeps. Compared by bits: a -0.0 stays a -0.0."""
    cdef unsigned long long bits, other
    cdef double y
    memcpy(&bits, &x, sizeof(double))
    cdef Py_ssize_t k = <Py_ssize_t>((bits ^ (bits >> 31) ^ (bits >> 47)) & (FLOAT_CACHE - 1))
    o = cache[k]
    if o is not None:
        y = <double>o
        memcpy(&other, &y, sizeof(double))
        if other == bits:
            return o
    o = x
    cache[k] = o
    return o


cdef enum:  # how an op's enqueued time is kept once the run is over (_Run.compact_enq)
    ENQ_START, ENQ_ISSUER_START, ENQ_OWN


cdef inline bint _same_bits(double a, double b) noexcept:
    """Whether ``a`` and ``b`` are the same double, bit for bit (a -0.0 is not a 0.0)."""
    cdef unsigned long long x, y
    memcpy(&x, &a, sizeof(double))
    memcpy(&y, &b, sizeof(double))
    return x == y


cdef tuple _ids(list ids, tuple ops):
    """``ops`` (op ids) as the run's id objects (``ids``; None: ints of their own)."""
    if not ops or ids is None:
        return ops
    return tuple([ids[<Py_ssize_t>x] for x in ops])


cdef inline object _id(list ids, Py_ssize_t nids, long long q):
    """Op id or sequence position ``q`` as the run's id object (``ids``, of ``nids``; None, or
    past them: an int of its own)."""
    return ids[q] if ids is not None and 0 <= q < nids else q


class _Fallback(Exception):
    """The reference must run instead (see the module's docstring)."""


cdef enum:
    URGENT = 0
    NORMAL = 1

# a stream loop's states (streamsim/sim/engine.py, Engine._stream_loop)
cdef enum:
    S_TOP = 0      # at the top of its loop (its start; woken after an enqueue)
    S_ENQUEUED = 1  # waited until the op's enqueue time
    S_DEP = 2      # waited for the end of after[cur][dep]
    S_RUNNING = 3  # waited for the op's duration
    S_RENDEZVOUS = 4  # a send: waited for its receive to start (streamsim/sim/comm.py, _run_p2p)
    S_SENDING = 5  # a send: waited for its duration
    S_RECEIVING = 6  # a receive: waited for its send's data
    S_JOINING = 7  # a collective: waited for every rank to join (_run_collective)
    S_REDUCING = 8  # a collective: waited for its end
    S_BATCH_ENQUEUED = 9  # a batch: waited until its last member's enqueue time (_run_batch)
    S_BATCH_DEP = 10  # a batch: waited for the end of a member's dependency
    S_BATCH = 11  # a batch: waited for every member's lane to end
    L_ENDED = 12  # a batch member's lane (a process of its own): its op ended

# a host thread's states (oplog/replay.py's program; host.py's blocking calls)
cdef enum:
    H_LINE = 0     # before its next line
    H_CLOCKED = 1  # a blocking line: waited for simulated time to reach its clock (sync_clock)
    H_DEPS = 2     # a blocking line: next dependency to wait for (wait_recs)
    H_WOKEN = 3    # a blocking line: a dependency it waited for ended
    H_INJECT = 4   # running a fix's syncs before a line's action (or after the last line)
    H_ACTION = 5   # the line's own action, its fixes' syncs done
    H_OBJ_WAIT = 6  # send_object: waited for its receive to start; recv_object: for its data
    H_OBJ_SENT = 7  # send_object: waited for its duration
    # a thread of a rank of several threads (replay._Replay.in_line_order, sim/handoff.py):
    H_SETTLED = 8  # before a line: waited for simulated time to reach its clock (Host.settle)
    H_GATED = 9    # before a line: waited for an earlier line of another thread to take effect
    H_PREP = 10    # before a line, its line order kept: its call begins (use_stream), fixes
    H_HANDOFF = 11  # get: waited for its channel's matching put to be issued (Channels.get)
    H_CALL_SETTLED = 12  # the call's own first settle waited (Engine.host_op's, or
    # wait_event's, free's, a comm op's: after use_stream made its stream; after the line's own
    # settle it waits only when that one's timeout fell short of the clock by a rounding)
    H_SETTLED2 = 13  # wait_event, free, isend/irecv, a collective: its enqueue's own settle
    # waited (only after a first settle's timeout short of the clock by a rounding)
    H_DONE = -1    # its program ended

# a fix's sync (streamsim/sim/inject.py: _record, _wait_event, _record_stream, _wait_handle,
# _handoff), as the caller names them in ``pre``/``post`` (see :func:`replay`)
cpdef enum:
    R_RECORD = 0
    R_WAIT = 1
    R_RECORD_STREAM = 2
    R_WAIT_HANDLE = 3  # (its "name": the rest of the handle's issuing action's key)
    R_PUT = 4  # (a hand-off fix's put and get: its "name", the fix's own channel)
    R_GET = 5

cdef enum:
    K_LAUNCH = 0
    K_HOST = 1
    K_RECORD = 2
    K_WAIT_EVENT = 3
    K_SYNC_EVENT = 4
    K_SYNC_STREAM = 5
    K_SYNC_DEVICE = 6
    K_ALLOC = 7
    K_FREE = 8
    K_RECORD_STREAM = 9
    K_ISEND = 10
    K_IRECV = 11
    K_COLLECTIVE = 12
    K_WAIT = 13
    K_SEND_OBJECT = 14  # (blocking host ops of a gloo group)
    K_RECV_OBJECT = 15
    K_ISEND_OBJECT = 16  # (a comm op, on the group's gloo channel)
    K_QUERY = 17
    K_PUT = 18  # (hand-offs between the host threads of a rank: a host action, a blocking get)
    K_GET = 19

cdef dict _KIND_CODE = {"launch": K_LAUNCH, "host": K_HOST, "record": K_RECORD,
                        "wait_event": K_WAIT_EVENT, "sync_event": K_SYNC_EVENT,
                        "sync_stream": K_SYNC_STREAM, "sync_device": K_SYNC_DEVICE,
                        "alloc": K_ALLOC, "free": K_FREE, "record_stream": K_RECORD_STREAM,
                        "isend": K_ISEND, "irecv": K_IRECV, "wait": K_WAIT,
                        "all_reduce": K_COLLECTIVE, "all_gather": K_COLLECTIVE,
                        "broadcast": K_COLLECTIVE, "reduce_scatter": K_COLLECTIVE,
                        "all_to_all": K_COLLECTIVE, "send_object": K_SEND_OBJECT,
                        "recv_object": K_RECV_OBJECT, "isend_object": K_ISEND_OBJECT,
                        "reduce": K_COLLECTIVE, "gather": K_COLLECTIVE,
                        "scatter": K_COLLECTIVE, "barrier": K_COLLECTIVE, "query": K_QUERY,
                        "put": K_PUT, "get": K_GET}


cdef inline size_t _combo_hash(const int *vals) noexcept:
    """The hash of a combination of what lines read (KEPT_FIELDS ints: ``_Run.combo``)."""
    cdef unsigned long long h = 0
    cdef int f
    for f in range(KEPT_FIELDS):
        h = (h ^ <unsigned int>vals[f]) * 0x9E3779B97F4A7C15ULL
    return <size_t>(h ^ (h >> 31))


cdef struct Waiting:  # an op that processes wait for: its first and last waiter (_Run.wait_for)
    int op
    int head
    int tail


cdef inline unsigned int _wslot(int op, unsigned int mask) noexcept:
    """Where op ``op`` goes in a table of ``mask + 1`` entries (``_Run.waiting``)."""
    return <unsigned int>((<unsigned long long><unsigned int>op * 0x9E3779B97F4A7C15ULL)
                          >> 40) & mask


cdef struct Entry:
    double t
    int prio
    long long eid
    int proc


cdef inline bint _before(Entry* a, Entry* b) noexcept nogil:
    if a.t != b.t:
        return a.t < b.t
    if a.prio != b.prio:
        return a.prio < b.prio
    return a.eid < b.eid


cdef class Columns
cdef class FixSyncs


@cython.final
cdef class _Run:
    """One replay: the heap, the processes, the ops (see the module's docstring)."""

    # heap
    cdef Entry* heap
    cdef int nheap, capheap
    cdef long long eid
    cdef double now
    # ops
    cdef int nops, capops, max_ops
    cdef int going  # the host thread whose program runs (host_go), -1 between them
    cdef double* enq  # NULL once the columns are made: then enq_rule and its exceptions
    # (compact_enq; an op's enqueued time is read only to make its Op by then)
    cdef unsigned char *enq_rule  # ENQ_START, ENQ_ISSUER_START or ENQ_OWN, an op
    cdef int *enq_xid  # the ops of ENQ_OWN, in id order, and their times
    cdef double *enq_xval
    cdef Py_ssize_t nenqx
    cdef double* start
    cdef double* end  # an op's scaled duration until it ends (the reference's Rec.end slot)
    cdef int* sseq  # (positions in the run's sequence: at most 2 an op, so an int each until a
    cdef int* eseq  # run past INT_MAX of them, which replay() leaves to the engine)
    cdef int* agent
    # (an op's index among its agent's ops, Op.index, is not kept: counted when an op is made,
    # index_of; an int an op until the thirtieth session)
    cdef int *idx_ck  # index_of's counts: each agent's ops before every ck_every-th op
    cdef int ck_every, ck_nag
    cdef int* issuer
    cdef int* lineof
    cdef unsigned char* kinds  # an op's K_ code
    # an op's attrs: its place in ``attr_objs``, each dict there once (the few most ops share,
    # then each op's own: own_attrs), where a list held a pointer an op (8 bytes an op)
    cdef int *attr_at
    cdef list attr_objs
    cdef dict attr_place  # id() of a shared dict -> its place
    cdef object last_attrs  # (attr_place_of's last shared dict, and its place)
    cdef int last_place
    cdef bint attrs_frozen  # the columns point into attr_objs: no place may be added
    # an op's accesses as ints (_cols.pxd: acc_at, acc_pool): acc_pool[acc_at[op]] how many, then
    # their places in ``acc_objs``; a tuple of Access objects an op before (48 MB at 1,000,000
    # lines of the random program)
    cdef int *acc_at
    cdef int *acc_pool
    cdef Py_ssize_t npool, cappool
    # an op's after edges as ints too: its place in ``acc_pool`` (how many, then each op id; 0:
    # none), where a list held a tuple an op (``()`` for most), an int object an edge: 8 bytes
    # an op, and 80 an op with an edge, more
    cdef int *aft_at
    # waiters: per op a FIFO list of processes (nodes in a pool), its first and last node kept
    # in a table of the ops that have waiters now (an array each an op until the thirtieth
    # session: 16 MB at 1,000,000 lines of the random program, at the replay's peak)
    cdef Waiting *wtab  # by the op's hash, open addressing (op -1: empty); at most half full
    cdef int wmask, nwaiting
    cdef int* wproc
    cdef int* wnext
    cdef int nw, capw
    # processes and agents: one index for both (hosts first, then streams as made)
    cdef int nag, capag
    cdef char* is_host
    cdef int* count
    cdef int* state
    cdef int* cur
    cdef int* pos  # host: next line; stream: queue head
    cdef int* depj
    cdef char* lend
    cdef char* wake  # stream: a wake-up is due when an op is enqueued (Engine: s.wake)
    cdef int* last  # stream: its last op enqueued, -1: none
    cdef double* clock
    cdef int** queue
    cdef int* qlen
    cdef int* qcap
    cdef list agent_obj, agent_rank, agent_name, host_deps, host_after
    cdef dict stream_at, events, freed, recorded
    cdef list notes
    cdef long long seq
    cdef bint seq_holes
    cdef object rng, rng_random
    cdef double jitter, launch_overhead, max_time
    # an interned Ref's address -> its Access's place in ``acc_objs``, one map a mode
    # (Host._accesses; the lines keep the refs alive): no int made for id(ref) per ref
    cdef AddrMap read_at, write_at
    cdef tuple last_reads, last_writes  # (access_list's last, and its place in acc_pool)
    cdef int last_acc
    cdef int tuple_at  # (accesses_of's last: its place, and the tuple made of it)
    cdef tuple acc_tuple
    cdef list acc_objs  # each distinct Access once (the ops' ints are places in it)
    cdef bint odd_view  # an access's view is not exactly a View (a hand-built log's Ref)
    cdef dict stream_of_name  # a stream's name -> {rank: its agent}: stream_at without a tuple
    cdef Rows rows  # the log's lines (_lines.pxd), None once released (kept)
    cdef int *row_of  # line number -> its row, -1: no line has the number (_by_lineno)
    cdef Py_ssize_t nlineno  # the numbers row_of has room for: past the greatest
    cdef list host_lines  # per host: its thread's rows (a _RowList), in line order
    cdef int *kept  # once released, an int a line number: what its ops read of it (kept_line),
    # as its number in ``combos`` (0: no op of the line), where KEPT_FIELDS objects a line were
    # until the twenty-ninth session, then KEPT_FIELDS ints (16 bytes a line more)
    cdef Py_ssize_t nkept
    cdef int *combos  # KEPT_FIELDS ints a combination of what lines read: each its number in
    # ``kept_vals`` (0, None; combination 0: all 0, no line; an op's kind is never None). Lines
    # share few: the random program's 1,000,000 have a few dozen
    cdef int ncombos, capcombos
    cdef int *combo_slots  # while lines are kept: the combinations by hash (0: empty)
    cdef size_t combo_mask
    cdef list kept_vals  # the values kept (None first), each once: those of the rows' table
    # (Rows.vals) the kept lines name, not the whole table (its refs' tuples, one a line)
    cdef int *kept_at  # while lines are kept: a value's number in the rows' table -> in kept_vals
    # once released, where some host action's attrs are ``from_line``: each line number's site
    # (its number in ``kept_vals``) and t (a C double; ``kept_tnone``: 1 where it is None),
    # what those attrs are made of (line_attrs): a float object a line before
    cdef int *kept_site
    cdef double *kept_t
    cdef unsigned char *kept_tnone
    # fix injection (a fix costing re-run): per host, line index -> its syncs before it, line
    # index -> the syncs after the line before it (run as that line is issued, or before a
    # thread of a rank of several waits for another's line: Engine.flush_post_injections), and
    # the syncs after its last line; the sync being run; the state a thread's injection returns
    # to (-1: its line's action); the settles left before a shared thread's sync (-1: not
    # begun); each injected op's (kind, name)
    cdef list inj_before, inj_post, inj_end, host_specs, inj_ret, inj_settles
    cdef int* injk  # the sync being run, of host_specs[h]
    cdef int *fix_rec  # fix i's record: 2 ints, its op and its rank (op -1: not recorded yet)
    cdef Py_ssize_t nfixes  # how many fix numbers ``fix_rec`` has room for
    cdef dict empty, of_stream  # the attrs ops share (own_attrs): none; a current stream's
    # the attrs of the host actions whose attrs are their line's site and t alone (host_attrs):
    # one dict that stands for them, each op's made of its line only when the op is made
    cdef dict from_line
    cdef bint from_line_used
    cdef dict injected  # the attrs a fix's host actions share (own_attrs): {"injected": True}
    cdef list special  # op -> (kind, name) of a fix's sync (not its line's), else None; made
    # (one slot an op of the run's capacity) when a fix's first sync is: a list, not a dict
    # (a re-run's 240,000 syncs were 4% of it in dict inserts and their resizes)
    cdef bint injecting
    # comm (streamsim/sim/comm.py): the groups; per comm op its group and its match (a p2p
    # transfer's or a collective's index); the transfers' and collectives' state
    cdef dict groups
    cdef dict opgroup, opmatch, ophandle, opjoins, opdur
    cdef dict p2p_at, p2p_issued, coll_at, coll_issued, works
    cdef list m_send, m_recv, m_started, m_started_waiter, m_arrived, m_arrived_waiter
    cdef list c_members, c_expected, c_started, c_waiters, c_end
    cdef list host_handles
    cdef set gloo_sends_waited
    cdef list barrier_last  # per host: a barrier wait's current stream's last op, -1: none
    cdef list line_barrier  # per host: the same for its line's own wait (taken before any fix's)
    # batches: per stream its batch being run (members, member and dependency positions, lanes
    # left); per lane its stream; per op of a batch its Work's ops and, when it is not the first
    # line's, the step it takes (the first line's)
    cdef dict batch_of, lanes_left, lane_parent, workrecs, opstep
    cdef list host_batches  # per host: line index -> its batch's lines, or () (issued with it)
    cdef int *key_at  # a re-run's: per line number, its host thread and its index among that
    # thread's lines (line_at: where a fix's key names a line), -1 -1 for a number no line has
    cdef list wait_target  # per host: the comm op its blocking wait is on
    cdef list host_kind  # per host: the kind of the line it is at (looked up once a line)
    # the line order between the threads of a rank (oplog/issueorder.py, replay._Replay): per
    # line the earlier lines of other threads it waits for; the lines some line waits for, those
    # taken (in effect), and per line not yet taken the hosts blocked on it (its Signal's
    # waiters, in the order they began waiting); the kinds taken as they start
    cdef char* shared  # host: a thread of a rank of several threads (HostState.shared)
    cdef int* gatej  # host: the position in host_gates of the gate it waits for
    cdef list host_gates  # per host: the gates of the line (or batch) it is at
    cdef list host_s2  # per host: what its call read before its second settle waited, or None
    cdef dict gates, sig_waiters
    cdef int work_sig  # a handle's signal: work_sig + its line (fix_sig + i: a fix's record's)
    cdef bint handle_waits  # a fix waits on a handle another thread issues
    cdef dict host_of  # a host thread's Agent -> its number
    cdef set flushed  # the hosts that ran a fix's syncs in Host.wait_signal, then wait
    cdef dict batch_inner  # host -> a fix's syncs between the members of its batch (batch_syncs)
    cdef int fix_sig  # the signal of fix i's record is fix_sig + i (past every line number)
    cdef object awaited, on_start
    cdef unsigned char *taken  # by signal (a line, fix_sig + i, work_sig + a line): set, or 0
    cdef Py_ssize_t ntaken  # how many signals ``taken`` has room for
    # hand-offs (sim/handoff.py, Channels): per (rank, channel) its puts so far and its gets;
    # per (rank, channel, k) the host whose get waits for the k-th put
    cdef dict ch_puts, ch_gets, ch_waiting

    def __cinit__(self):
        self.heap = NULL
        self.enq = self.start = self.end = NULL
        self.sseq = self.eseq = NULL
        self.agent = self.issuer = self.lineof = NULL
        self.idx_ck = NULL
        self.wtab = NULL
        self.wproc = self.wnext = NULL
        self.is_host = self.lend = self.wake = NULL
        self.count = self.state = self.cur = self.pos = self.depj = self.last = NULL
        self.clock = NULL
        self.injk = NULL
        self.shared = NULL
        self.gatej = self.key_at = NULL
        self.row_of = NULL
        self.acc_at = self.acc_pool = NULL
        self.tuple_at = -1
        self.queue = NULL
        self.qlen = self.qcap = NULL
        self.nag = 0

    def __dealloc__(self):
        cdef int i
        addrmap_free(&self.read_at)
        addrmap_free(&self.write_at)
        if self.queue != NULL:
            for i in range(self.nag):
                free(self.queue[i])
        free(self.heap); free(self.enq); free(self.start); free(self.end)
        free(self.enq_rule); free(self.enq_xid); free(self.enq_xval)
        free(self.sseq); free(self.eseq); free(self.agent); free(self.idx_ck)
        free(self.issuer); free(self.lineof); free(self.wtab)
        free(self.wproc); free(self.wnext); free(self.is_host); free(self.lend)
        free(self.wake); free(self.count); free(self.state); free(self.cur)
        free(self.pos); free(self.depj); free(self.last); free(self.clock)
        free(self.queue); free(self.qlen); free(self.qcap); free(self.injk)
        free(self.shared); free(self.gatej); free(self.key_at); free(self.taken)
        free(self.acc_at); free(self.acc_pool); free(self.aft_at)
        free(self.attr_at)
        free(self.fix_rec); free(self.kinds); free(self.row_of)
        self.drop_kept()

    cdef void drop_kept(self) noexcept:
        free(self.kept_at)
        self.kept_at = NULL
        free(self.kept)
        free(self.combos)
        free(self.combo_slots)
        self.combos = self.combo_slots = NULL
        free(self.kept_site)
        free(self.kept_t)
        free(self.kept_tnone)
        self.kept = self.kept_site = NULL
        self.kept_t = NULL
        self.kept_tnone = NULL

    cdef void release_lines(self) except *:
        """Let go of the log's lines (rows, 96 bytes each, which a check without fix costing
        then frees), once the run is kept as columns: what the ops read of their lines is kept,
        KEPT_FIELDS objects a line number in one C array (:meth:`kept_line`).
        :meth:`columns` keeps it as it reads them (:meth:`keep_line`); else it is kept here."""
        cdef int i, lo
        if self.kept == NULL:
            self.new_kept()
            for i in range(self.nops):
                lo = self.lineof[i]
                if self.kept[lo] == 0:
                    self.keep_line(lo, self.ln_at(lo))
        self.rows = None
        free(self.kept_at)  # (no line is kept after this)
        self.kept_at = NULL
        free(self.combo_slots)
        self.combo_slots = NULL
        free(self.row_of)
        self.row_of = NULL

    cdef inline LRef ln_at(self, int lo) noexcept:
        """The row of line number ``lo`` (a line's: the run's ops' lineof, a target)."""
        return self.rows.ref(self.row_of[lo])

    cdef void release_schedule(self) except *:
        """Let go of what only the schedule needed, once the run is over: the heap, the
        waiters, the queues, the ops' kind codes, the comm, hand-off, batch, line-order and fix
        state. Done before :meth:`columns` makes its arrays, so that they take the memory this
        frees (a run's peak is at that moment: the lines, the ops and the columns together).
        What :meth:`records`, :meth:`columns` and the columns' readers read stays (the ops'
        arrays and lists, the agents, the notes, the attrs, handles, joins, steps and fix
        syncs of the ops, the lines)."""
        cdef int i
        addrmap_free(&self.read_at)
        addrmap_free(&self.write_at)
        if self.queue != NULL:
            for i in range(self.nag):
                free(self.queue[i])
        free(self.heap); free(self.wtab); free(self.wproc); free(self.wnext)
        free(self.queue)
        self.heap = NULL
        self.wtab = NULL
        self.wproc = self.wnext = NULL
        self.queue = NULL
        free(self.kinds)
        self.kinds = NULL
        self.host_lines = self.host_deps = self.host_after = None  # (acc_objs: the ops')
        self.stream_at = self.events = self.freed = self.recorded = self.stream_of_name = None
        self.inj_before = self.inj_post = self.inj_end = self.host_specs = None
        self.inj_ret = self.inj_settles = self.groups = None
        self.opgroup = self.opmatch = self.opdur = self.p2p_at = self.p2p_issued = None
        self.coll_at = self.coll_issued = self.works = None
        self.m_send = self.m_recv = self.m_started = self.m_started_waiter = None
        self.m_arrived = self.m_arrived_waiter = None
        self.c_members = self.c_expected = self.c_started = self.c_waiters = self.c_end = None
        self.host_handles = self.gloo_sends_waited = self.barrier_last = None
        self.line_barrier = self.batch_of = self.lanes_left = self.lane_parent = None
        self.workrecs = self.host_batches = self.wait_target = None
        free(self.key_at); free(self.taken); free(self.fix_rec)
        self.key_at = NULL
        self.taken = NULL
        self.fix_rec = NULL
        self.host_kind = self.host_gates = self.host_s2 = self.gates = self.sig_waiters = None
        self.host_of = self.flushed = self.batch_inner = None
        self.ch_puts = self.ch_gets = self.ch_waiting = None

    cdef void new_kept(self) except *:
        """The empty arrays of what the ops read of their lines (:meth:`keep_line`), a line
        number's room in each."""
        cdef Py_ssize_t n = self.nlineno
        self.drop_kept()
        self.kept = <int *>calloc(n + 1, sizeof(int))
        self.capcombos = 64
        self.combos = <int *>calloc(self.capcombos * KEPT_FIELDS, sizeof(int))
        self.combo_mask = 127
        self.combo_slots = <int *>calloc(self.combo_mask + 1, sizeof(int))
        if self.kept == NULL or self.combos == NULL or self.combo_slots == NULL:
            raise MemoryError()
        self.ncombos = 1  # (combination 0: none)
        self.nkept = n
        self.kept_vals = [None]
        self.kept_at = <int *>calloc(len(self.rows.vals) + 1, sizeof(int))  # (0: not yet)
        if self.kept_at == NULL:
            raise MemoryError()
        if self.from_line_used:  # (the site and t that host actions' attrs are made of)
            self.kept_site = <int *>calloc(n + 1, sizeof(int))
            self.kept_t = <double *>calloc(n + 1, sizeof(double))
            self.kept_tnone = <unsigned char *>calloc(n + 1, 1)
            if self.kept_site == NULL or self.kept_t == NULL or self.kept_tnone == NULL:
                raise MemoryError()

    cdef void keep_line(self, int lo, LRef ln) except *:
        """Keep what the ops of line ``lo`` (``ln``) read of it: its KEPT_FIELDS values as one
        combination (:meth:`combo`), and its site and t where host actions' attrs are made of
        them (:meth:`release`)."""
        cdef int f
        cdef int vals[<int>KEPT_FIELDS]
        for f in range(KEPT_FIELDS):
            vals[f] = self.kept_value(ln, ln.row.o[_o_of(_KEPT[f])])
        self.kept[lo] = self.combo(vals)
        if self.kept_site != NULL:
            self.kept_site[lo] = self.kept_value(ln, ln.row.o[RO_SITE])
            self.kept_t[lo] = ln.row.t
            self.kept_tnone[lo] = (ln.row.flags & NO_T) != 0

    cdef int combo(self, const int *vals) except -1:
        """The number in ``combos`` of ``vals`` (KEPT_FIELDS ints), added on first use."""
        cdef int k
        cdef int *grown
        cdef size_t at = _combo_hash(vals) & self.combo_mask
        while True:
            k = self.combo_slots[at]
            if k == 0:
                break
            if memcmp(self.combos + k * KEPT_FIELDS, vals, KEPT_FIELDS * sizeof(int)) == 0:
                return k
            at = (at + 1) & self.combo_mask
        k = self.ncombos
        if k == self.capcombos:
            grown = <int *>realloc(self.combos, 2 * k * KEPT_FIELDS * sizeof(int))
            if grown == NULL:
                raise MemoryError()
            self.combos, self.capcombos = grown, 2 * k
        memcpy(self.combos + k * KEPT_FIELDS, vals, KEPT_FIELDS * sizeof(int))
        self.ncombos = k + 1
        self.combo_slots[at] = k
        if 2 * <size_t>self.ncombos > self.combo_mask:
            self.rehash_combos()
        return k

    cdef void rehash_combos(self) except *:
        """Double the combinations' hash table (:meth:`combo`)."""
        cdef size_t mask = 2 * self.combo_mask + 1, at
        cdef int *slots = <int *>calloc(mask + 1, sizeof(int))
        cdef int k
        if slots == NULL:
            raise MemoryError()
        for k in range(1, self.ncombos):
            at = _combo_hash(self.combos + k * KEPT_FIELDS) & mask
            while slots[at] != 0:
                at = (at + 1) & mask
            slots[at] = k
        free(self.combo_slots)
        self.combo_slots, self.combo_mask = slots, mask

    cdef int kept_value(self, LRef ln, int v) except -1:
        """The number in ``kept_vals`` of value ``v`` of the rows' table, added on first use."""
        cdef int k = self.kept_at[v]
        if k == 0 and v != 0:
            k = <int>len(self.kept_vals)
            self.kept_vals.append(<object>ln.vals[v])
            self.kept_at[v] = k
        return k

    # -- set-up ----------------------------------------------------------------------------------
    cdef void _ops(self, int cap) except *:
        cdef int i
        self.capops = cap
        self.enq = <double*>malloc(cap * sizeof(double))
        self.start = <double*>malloc(cap * sizeof(double))
        self.end = <double*>malloc(cap * sizeof(double))
        self.sseq = <int*>malloc(cap * sizeof(int))
        self.eseq = <int*>malloc(cap * sizeof(int))
        self.agent = <int*>malloc(cap * sizeof(int))
        self.issuer = <int*>malloc(cap * sizeof(int))
        self.lineof = <int*>malloc(cap * sizeof(int))
        self.wmask, self.nwaiting = 63, 0
        self.wtab = <Waiting *>malloc(64 * sizeof(Waiting))
        if (self.enq == NULL or self.start == NULL or self.end == NULL or self.sseq == NULL or
                self.eseq == NULL or self.agent == NULL or
                self.issuer == NULL or self.lineof == NULL or self.wtab == NULL):
            raise MemoryError()
        for i in range(64):
            self.wtab[i].op = -1
        # (made at their full size: grown an append at a time, each list, as they were, moved
        # as it grew, and the holes those moves left in the heap made a 1,000,000-line check's
        # peak 805 MB where it was then 766)
        self.kinds = <unsigned char*>malloc(cap)
        if self.kinds == NULL:
            raise MemoryError()
        self.attr_at = <int*>malloc(cap * sizeof(int))
        if self.attr_at == NULL:
            raise MemoryError()
        self.attr_objs, self.attr_place, self.last_attrs = [], {}, None
        self.acc_at = <int*>malloc(cap * sizeof(int))
        self.aft_at = <int*>malloc(cap * sizeof(int))
        self.cappool = 1024
        self.acc_pool = <int*>malloc(self.cappool * sizeof(int))
        if self.acc_at == NULL or self.acc_pool == NULL or self.aft_at == NULL:
            raise MemoryError()
        self.acc_pool[0] = 0  # (place 0: no access, no after edge)
        self.npool = 1
        self.last_acc = 0
        self.nops = 0

    cdef int _new_agent(self, int rank, str name, bint host) except -1:
        cdef int a = self.nag
        cdef int cap
        if a == self.capag:
            cap = 8 if self.capag == 0 else 2 * self.capag
            self.is_host = <char*>realloc(self.is_host, cap)
            self.lend = <char*>realloc(self.lend, cap)
            self.wake = <char*>realloc(self.wake, cap)
            self.count = <int*>realloc(self.count, cap * sizeof(int))
            self.state = <int*>realloc(self.state, cap * sizeof(int))
            self.cur = <int*>realloc(self.cur, cap * sizeof(int))
            self.pos = <int*>realloc(self.pos, cap * sizeof(int))
            self.depj = <int*>realloc(self.depj, cap * sizeof(int))
            self.last = <int*>realloc(self.last, cap * sizeof(int))
            self.clock = <double*>realloc(self.clock, cap * sizeof(double))
            self.queue = <int**>realloc(self.queue, cap * sizeof(int*))
            self.qlen = <int*>realloc(self.qlen, cap * sizeof(int))
            self.qcap = <int*>realloc(self.qcap, cap * sizeof(int))
            self.injk = <int*>realloc(self.injk, cap * sizeof(int))
            self.shared = <char*>realloc(self.shared, cap)
            self.gatej = <int*>realloc(self.gatej, cap * sizeof(int))
            if (self.is_host == NULL or self.lend == NULL or self.wake == NULL or
                    self.count == NULL or self.state == NULL or self.cur == NULL or
                    self.pos == NULL or self.depj == NULL or self.last == NULL or
                    self.clock == NULL or self.queue == NULL or self.qlen == NULL or
                    self.qcap == NULL or self.injk == NULL or self.shared == NULL or
                    self.gatej == NULL):
                raise MemoryError()
            self.capag = cap
        self.nag = a + 1
        self.is_host[a] = host
        self.lend[a] = 0
        self.wake[a] = 0
        self.count[a] = 0
        self.state[a] = H_LINE if host else S_TOP
        self.cur[a] = -1
        self.pos[a] = 0
        self.depj[a] = 0
        self.last[a] = -1
        self.clock[a] = 0.0
        self.queue[a] = NULL
        self.qlen[a] = 0
        self.qcap[a] = 0
        self.injk[a] = -1
        self.shared[a] = 0
        self.gatej[a] = 0
        self.agent_obj.append(Agent(rank, "host" if host else "stream", name))
        self.agent_rank.append(rank)
        self.agent_name.append(name)
        self.host_lines.append(None)
        self.host_deps.append(None)
        self.host_after.append(None)
        self.inj_before.append(None)
        self.inj_post.append(None)
        self.inj_end.append(None)
        self.inj_ret.append(-1)
        self.inj_settles.append(-1)
        self.host_specs.append(None)
        self.host_handles.append(0)
        self.barrier_last.append(-1)
        self.line_barrier.append(-1)
        self.host_batches.append(None)
        self.wait_target.append(-1)
        self.host_kind.append(-1)
        self.host_gates.append(None)
        self.host_s2.append(None)
        return a

    cdef int stream(self, int rank, str name, bint comm=False) except -1:
        """The stream ``name`` of ``rank``, made (and its loop started) on first use; ``comm``:
        a group's own (a comm op's), else a comm stream's name gives up."""
        by_rank = self.stream_of_name.get(name)
        if by_rank is not None:
            s = (<dict>by_rank).get(rank)
            if s is not None:
                return <int>s
        key = (rank, name)
        s = self.stream_at.get(key)
        if s is not None:
            return <int>s
        if not comm and is_comm(name):
            raise _Fallback()  # (no group: the reference's ModelError names the stream)
        cdef int a = self._new_agent(rank, name, False)
        self.stream_at[key] = a
        self.stream_of_name.setdefault(name, {})[rank] = a
        self.push(0.0, URGENT, a)  # env.process(_stream_loop(s)): its Initialize
        return a

    # -- the heap (simpy's Environment.schedule / step) ----------------------------------------
    cdef void push(self, double delay, int prio, int proc) except *:
        cdef int i, parent
        cdef Entry e
        if self.nheap == self.capheap:
            self.capheap = 64 if self.capheap == 0 else 2 * self.capheap
            self.heap = <Entry*>realloc(self.heap, self.capheap * sizeof(Entry))
            if self.heap == NULL:
                raise MemoryError()
        e.t = self.now + delay
        e.prio = prio
        e.eid = self.eid
        e.proc = proc
        self.eid += 1
        i = self.nheap
        self.nheap += 1
        while i > 0:
            parent = (i - 1) >> 1
            if _before(&e, &self.heap[parent]):
                self.heap[i] = self.heap[parent]
                i = parent
            else:
                break
        self.heap[i] = e

    cdef Entry pop(self) noexcept:
        cdef Entry top = self.heap[0]
        cdef Entry x
        cdef int i = 0, c, n
        self.nheap -= 1
        n = self.nheap
        if n > 0:
            x = self.heap[n]
            while True:
                c = 2 * i + 1
                if c >= n:
                    break
                if c + 1 < n and _before(&self.heap[c + 1], &self.heap[c]):
                    c += 1
                if _before(&self.heap[c], &x):
                    self.heap[i] = self.heap[c]
                    i = c
                else:
                    break
            self.heap[i] = x
        return top

    # -- ops (Engine.new_rec, scaled, mark_end) -------------------------------------------------
    cdef int new_op(self, int a, int kind, double dur, double enqueued, int line, dict attrs,
                    int acc) except -1:
        cdef int n = self.nops
        if n >= self.max_ops:
            raise self.passed("max_ops", self.going, True)
        if n >= self.capops:
            raise _Fallback()
        self.nops = n + 1
        self.agent[n] = a
        self.count[a] += 1
        self.enq[n] = enqueued
        self.start[n] = 0.0
        self.end[n] = self.scaled(dur) if dur != 0.0 else 0.0
        self.sseq[n] = -1
        self.eseq[n] = -1
        self.issuer[n] = -1
        self.lineof[n] = line
        self.kinds[n] = <unsigned char>kind  # (a K_ code: 0-19)
        self.attr_at[n] = self.attr_place_of(attrs)
        self.acc_at[n] = acc
        self.aft_at[n] = 0
        return n

    cdef void compact_enq(self) except *:
        """Keep the ops' enqueued times as a rule a byte (``enq_rule``), where one holds, and
        the rest as exceptions: a host action is most often enqueued when it starts, and a
        stream op when the host action that issued it starts (``Columns.enq_kept`` says how many
        are not). Read only to make an op's ``Op`` once the run is over (:meth:`enq_of`): a
        double an op was 16 MB at 1,000,000 lines of the random program. Compared by bits (a
        -0.0 stays one)."""
        if self.enq == NULL:  # (kept so already)
            return
        cdef Py_ssize_t n = self.nops, i, k = 0
        cdef int iss
        cdef unsigned char *rule = <unsigned char *>malloc(n + 1)
        if rule == NULL:
            raise MemoryError()
        for i in range(n):
            iss = self.issuer[i]
            if _same_bits(self.enq[i], self.start[i]):
                rule[i] = ENQ_START
            elif iss >= 0 and _same_bits(self.enq[i], self.start[iss]):
                rule[i] = ENQ_ISSUER_START
            else:
                rule[i] = ENQ_OWN
                k += 1
        self.enq_xid = <int *>malloc((k + 1) * sizeof(int))
        self.enq_xval = <double *>malloc((k + 1) * sizeof(double))
        if self.enq_xid == NULL or self.enq_xval == NULL:
            free(rule)
            raise MemoryError()
        k = 0
        for i in range(n):
            if rule[i] == ENQ_OWN:
                self.enq_xid[k], self.enq_xval[k] = <int>i, self.enq[i]
                k += 1
        self.nenqx = k
        self.enq_rule = rule
        free(self.enq)
        self.enq = NULL

    cdef double enq_of(self, int i) except? -1.0:
        """Op ``i``'s enqueued time (:meth:`compact_enq`)."""
        if self.enq != NULL:
            return self.enq[i]
        cdef unsigned char r = self.enq_rule[i]
        if r == ENQ_START:
            return self.start[i]
        if r == ENQ_ISSUER_START:
            return self.start[self.issuer[i]]
        cdef Py_ssize_t lo = 0, hi = self.nenqx, mid
        while lo < hi:  # (the first exception at or after op i: it is op i)
            mid = (lo + hi) // 2
            if self.enq_xid[mid] < i:
                lo = mid + 1
            else:
                hi = mid
        if lo >= self.nenqx or self.enq_xid[lo] != i:
            raise RuntimeError(f"op {i}'s enqueued time was not kept")
        return self.enq_xval[lo]

    cdef int attr_place_of(self, dict d) except -1:
        """The place in ``attr_objs`` of the attrs ``d`` a new op is given: a shared dict's one
        place (the run's empty, ``injected``, ``from_line`` and current-stream dicts,
        :meth:`host_attrs`, :meth:`op_attrs`), a dict of the op's own a new place."""
        if d is self.last_attrs:
            return self.last_place
        cdef int k
        if d is self.empty or d is self.injected or d is self.from_line or (
                len(d) == 1 and self.of_stream.get(d.get("current_stream")) is d):
            got = self.attr_place.get(id(d))
            if got is None:
                k = self.new_place(d)
                self.attr_place[id(d)] = k
            else:
                k = got
            self.last_attrs, self.last_place = d, k
            return k
        return self.new_place(d)

    cdef int new_place(self, dict d) except -1:
        """A new place in ``attr_objs``, holding ``d``."""
        if self.attrs_frozen:
            raise RuntimeError("an op's attrs changed after the run's columns were made")
        self.attr_objs.append(d)
        return <int>len(self.attr_objs) - 1

    cdef inline dict attrs_of(self, int op):
        """Op ``op``'s attrs (shared with other ops, or its own: :meth:`own_attrs`)."""
        return <dict>self.attr_objs[self.attr_at[op]]

    cdef double scaled(self, double dur) except? -1.0:
        cdef double x, f
        if not (0.0 <= dur and isfinite(dur)):
            raise _Fallback()  # (the reference's ModelError)
        if self.jitter != 0.0 and dur > 0.0:
            x = self.jitter * (2.0 * <double>self.rng_random() - 1.0)
            f = exp(x)
            if not isfinite(f):
                raise _Fallback()  # (the reference's OverflowError message)
            dur *= f
            if not isfinite(dur):
                raise _Fallback()
        return dur

    cdef void wait_for(self, int op, int proc) except *:
        """Engine.done_event: ``proc`` resumes when ``op`` ends."""
        cdef int w = self.nw
        if w == self.capw:
            self.capw = 64 if self.capw == 0 else 2 * self.capw
            self.wproc = <int*>realloc(self.wproc, self.capw * sizeof(int))
            self.wnext = <int*>realloc(self.wnext, self.capw * sizeof(int))
            if self.wproc == NULL or self.wnext == NULL:
                raise MemoryError()
        self.nw = w + 1
        self.wproc[w] = proc
        self.wnext[w] = -1
        cdef Waiting *at = self.waiting(op, True)
        if at.head < 0:
            at.head = w
        else:
            self.wnext[at.tail] = w
        at.tail = w

    cdef void ended(self, int op) except *:
        """Engine._wake_waiters: each waiter of ``op`` resumes, in the order they began waiting."""
        cdef Waiting *at = self.waiting(op, False)
        if at == NULL:
            return
        cdef int w = at.head
        self.unwait(at)
        while w >= 0:
            self.push(0.0, NORMAL, self.wproc[w])
            w = self.wnext[w]

    cdef Waiting *waiting(self, int op, bint add) except? NULL:
        """``op``'s entry in the table of ops with waiters (added, with none, where ``add``);
        NULL: none."""
        cdef unsigned int i = _wslot(op, self.wmask)
        while self.wtab[i].op != op:
            if self.wtab[i].op < 0:
                if not add:
                    return NULL
                if 2 * (self.nwaiting + 1) > self.wmask + 1:
                    self.regrow_waiting()
                    return self.waiting(op, True)
                self.wtab[i].op, self.wtab[i].head, self.wtab[i].tail = op, -1, -1
                self.nwaiting += 1
                return &self.wtab[i]
            i = (i + 1) & self.wmask
        return &self.wtab[i]

    cdef void unwait(self, Waiting *at) noexcept:
        """Take ``at`` out of the table (a backward shift: each later entry of its run moves up
        where its home allows)."""
        cdef unsigned int i = at - self.wtab, j = i, k, mask = self.wmask
        self.wtab[i].op = -1
        self.nwaiting -= 1
        while True:
            j = (j + 1) & mask
            if self.wtab[j].op < 0:
                return
            k = _wslot(self.wtab[j].op, mask)
            if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):
                self.wtab[i] = self.wtab[j]
                self.wtab[j].op = -1
                i = j

    cdef void regrow_waiting(self) except *:
        """Double the table of ops with waiters."""
        cdef Waiting *old = self.wtab
        cdef int oldcap = self.wmask + 1, x
        cdef unsigned int i
        cdef Waiting *grown = <Waiting *>malloc(2 * oldcap * sizeof(Waiting))
        if grown == NULL:
            raise MemoryError()
        for x in range(2 * oldcap):
            grown[x].op = -1
        self.wtab, self.wmask = grown, 2 * oldcap - 1
        for x in range(oldcap):
            if old[x].op >= 0:
                i = _wslot(old[x].op, self.wmask)
                while grown[i].op >= 0:
                    i = (i + 1) & self.wmask
                grown[i] = old[x]
        free(old)

    # -- a line's labels (replay._Replay.origin, sim.origins.tag) -------------------------------
    cdef dict host_attrs(self, LRef ln):
        """A host action's attrs; the run's one empty dict where it has none, its one
        ``from_line`` where they are the line's site and t alone (a recorded log's every host
        action: each op's made of its line as the op is made, :meth:`line_attrs`; a dict of its
        own an op was ~200 bytes a line), both copied to change (:meth:`own_attrs`)."""
        if _l(ln, L_RESULT) is None and _lr(ln, R_INFERRED) is None and \
                not _lr(ln, R_ANY_SOURCE):
            if _l(ln, L_SITE) is None and ln.row.flags & NO_T:
                return self.empty
            self.from_line_used = True
            return self.from_line
        cdef dict d = site_t_attrs(_l(ln, L_SITE), _l(ln, L_T))
        if _l(ln, L_RESULT) is not None:
            d["observed"] = True  # (the query's result is the program's)
        return _provenance(d, ln)

    cdef dict op_attrs(self, LRef ln, str current):
        """An enqueued op's attrs; the run's one dict of ``current`` where it has no other."""
        if _l(ln, L_SITE) is None and _lr(ln, R_INFERRED) is None and not _lr(ln, R_ANY_SOURCE):
            return self.stream_attrs(current)
        cdef dict d = {"current_stream": current}
        if _l(ln, L_SITE) is not None:
            d["site"] = _l(ln, L_SITE)
        return _provenance(d, ln)

    cdef dict stream_attrs(self, str current):
        """The run's one dict of ``current`` alone: the attrs of an enqueued op that has no
        other (a line's with no label, a fix's sync's: :meth:`own_attrs` copies it to change)."""
        shared = self.of_stream.get(current)
        if shared is None:
            shared = self.of_stream[current] = {"current_stream": current}
        return shared

    cdef dict own_attrs(self, int op):
        """Op ``op``'s attrs, to change: its own dict, a copy made now where it had one shared
        with other ops (:meth:`host_attrs`, :meth:`op_attrs`: most ops' attrs are equal, a dict
        of no entry or of its current stream alone, and stay so; one dict for them all was ~240
        bytes a line less at the replay's peak; a fix's host actions share ``{"injected":
        True}``, 184 bytes a sync less), made of its line where it is ``from_line``. Every
        change to an op's attrs goes through here (the ops' records share what is left shared:
        trace.Op's attrs are read-only)."""
        d = self.attrs_of(op)
        if d is self.from_line:
            d = self.line_attrs(self.lineof[op])
            self.attr_at[op] = self.new_place(d)
            return d
        if d is self.empty or d is self.injected or (len(<dict>d) == 1 and
                               self.of_stream.get((<dict>d).get("current_stream")) is d):
            d = dict(<dict>d)
            self.attr_at[op] = self.new_place(d)
        return d

    cdef dict line_attrs(self, int lo):
        """The attrs of a host action of line ``lo`` that holds ``from_line`` (:meth:`host_attrs`):
        its line's site, then its t, where the line gives each; from the line, or once the
        lines are let go, from what is kept of them (:meth:`release`)."""
        if self.kept_site != NULL:
            return kept_site_t(self.kept_site, self.kept_t, self.kept_tnone,
                               PySequence_Fast_ITEMS(self.kept_vals), lo)
        ln = self.ln_at(lo)
        return site_t_attrs(_l(ln, L_SITE), _l(ln, L_T))

    cdef int access_list(self, tuple reads, tuple writes) except -1:
        """Host._accesses for an op log's refs (interned ``Ref`` objects): reads, then writes,
        as their place in ``acc_pool`` (how many, then each one's place in ``acc_objs``; 0: none).
        The last op's place again where its reads and writes were these very tuples (the
        readers intern a lone buffer's, so a run of a recorded log's ops on one tensor shares
        its ints: the refs are the same, so are the accesses)."""
        cdef Py_ssize_t nr = len(reads), nw = len(writes), i
        if not nr and not nw:
            return 0
        if reads is self.last_reads and writes is self.last_writes:
            return self.last_acc
        cdef int at = self.pool_room(1 + nr + nw)
        self.acc_pool[at] = <int>(nr + nw)
        for i in range(nr):
            self.acc_pool[at + 1 + i] = self.access(reads[i], "read", &self.read_at)
        for i in range(nw):
            self.acc_pool[at + 1 + nr + i] = self.access(writes[i], "write", &self.write_at)
        self.last_reads, self.last_writes, self.last_acc = reads, writes, at
        return at

    cdef int one_access(self, object acc) except -1:
        """The place in ``acc_pool`` of an op's one access ``acc`` (an Access made for it: a
        free's write of its whole buffer)."""
        cdef int at = self.pool_room(2)
        self.acc_pool[at] = 1
        self.acc_pool[at + 1] = self.acc_obj(acc)
        return at

    cdef void set_after(self, int op, object ids) except *:
        """Op ``op``'s after edges: ``ids``, a sequence of op ids (its place in ``acc_pool``,
        ``aft_at``; an empty one: none)."""
        cdef Py_ssize_t n = len(ids), i
        if n == 0:
            self.aft_at[op] = 0
            return
        cdef int at = self.pool_room(1 + n)
        self.acc_pool[at] = <int>n
        for i in range(n):
            self.acc_pool[at + 1 + i] = <int>ids[i]
        self.aft_at[op] = at

    cdef tuple after_of(self, int op):
        """Op ``op``'s after edges as its ``Op`` holds them: a tuple of op ids, made now."""
        cdef int at = self.aft_at[op], k
        cdef int n = self.acc_pool[at]
        if n == 0:
            return ()
        return tuple([self.acc_pool[at + 1 + k] for k in range(n)])

    cdef int pool_room(self, Py_ssize_t k) except -1:
        """The place of ``k`` ints added to ``acc_pool`` (grown as a list grows)."""
        cdef Py_ssize_t at = self.npool, cap
        cdef int *grown
        if at + k > self.cappool:
            cap = max(2 * self.cappool, at + k)
            if cap >= INT_MAX:
                raise _Fallback()  # (places are C ints: the engine runs such a log)
            grown = <int*>realloc(self.acc_pool, cap * sizeof(int))
            if grown == NULL:
                raise MemoryError()
            self.acc_pool, self.cappool = grown, cap
        self.npool = at + k
        return <int>at

    cdef int acc_obj(self, object acc) except -1:
        """The place in ``acc_objs`` of ``acc``, added to it."""
        cdef Py_ssize_t k = len(self.acc_objs)
        if k >= INT_MAX:
            raise _Fallback()
        self.acc_objs.append(acc)
        return <int>k

    cdef int access(self, object t, str mode, AddrMap *at) except -1:
        """The place in ``acc_objs`` of the Access of ref ``t`` in ``mode``, one a ref (the
        lines keep the refs alive)."""
        if type(t) is not Ref:
            raise _Fallback()
        cdef Py_ssize_t k = addrmap_get(at, <uintptr_t><PyObject *>t)
        if k >= 0:
            return <int>k
        view = t.view
        if type(view) is not View:
            self.odd_view = True  # (the columns then say their accesses need a check)
        k = self.acc_obj(_access_of(view, mode, t.window))
        addrmap_put(at, <uintptr_t><PyObject *>t, k)
        return <int>k

    cdef tuple accesses_of(self, int op):
        """Op ``op``'s accesses as its ``Op`` holds them: a tuple of Access objects, made now
        (the last one made again where the op shares its ints: a run of ops on one tensor)."""
        cdef int at = self.acc_at[op], n = self.acc_pool[at], k
        if not n:
            return ()
        if at == self.tuple_at:
            return self.acc_tuple
        cdef tuple out = PyTuple_New(n)
        for k in range(n):
            acc = self.acc_objs[self.acc_pool[at + 1 + k]]
            Py_INCREF(acc)
            PyTuple_SET_ITEM(out, k, acc)
        self.tuple_at, self.acc_tuple = at, out
        return out

    cdef void note_freed_use(self, int op, LRef ln) except *:
        """Engine.note_freed_use: each buffer ``op`` touches after a free (no alloc since), its
        line ``ln``'s name and location in the note (the location made only for a note: most
        accesses of a log that frees touch no freed buffer)."""
        named = {}
        for acc in self.accesses_of(op):
            view = acc.view
            key = (view.rank, view.buffer)
            f = self.freed.get(key)
            if f is not None and key not in named:
                named[key] = None
                fl = self.ln_at(self.lineof[<int>f])
                self.notes.append(Note("use-after-free", f"{_l(ln, L_NAME)} at "
                                       f"{_location(ln)} uses "
                                       f"{view.buffer!r} on rank{key[0]} after {_l(fl, L_NAME)} at "
                                       f"{_location(fl)} freed it (no alloc since)", op))
        if named:
            self.own_attrs(op)["after_free"] = tuple([k[1] for k in named])

    # -- the host thread (Engine.host_op, enqueue; Host's calls) --------------------------------
    cdef int host_op(self, int h, int kind, double dur, int line, LRef ln, int acc,
                     bint injected=False) except -1:
        """Engine.host_op: a host action of ``dur``, made ended (``injected``: a fix's, which
        takes no label of the line's and is marked, as Engine._note_issue marks it)."""
        cdef int op = self.new_op(h, kind, dur, self.clock[h], line,
                                  self.injected if injected else self.host_attrs(ln), acc)
        self.start[op] = self.enq[op]
        self.sseq[op] = self.seq
        self.clock[h] += self.end[op]
        if self.clock[h] > self.max_time:
            raise self.passed("max_time", h, True)
        self.end[op] = self.clock[h]
        self.eseq[op] = self.seq + 1
        if self.acc_pool[acc] and self.freed:
            self.note_freed_use(op, ln)
        self.seq += 2
        return op

    cdef int enqueue(self, int h, str stream, int kind, double dur, int line, LRef ln,
                     int acc, tuple after, bint injected=False,
                     str current="compute") except -1:
        """Engine.enqueue: the issuing host action, then the stream op (``current``: the host's
        current stream, which a line's ``with host.use_stream`` set)."""
        cdef int issue = self.host_op(h, kind, self.launch_overhead, line, ln, 0, injected)
        cdef int rank = self.agent_rank[h]
        cdef int c
        if kind == K_FREE:  # (its recorded streams: read after the issue, made if new)
            after = self.recorded_work(rank, _l(ln, L_BUFFER))
        elif kind == K_ISEND or kind == K_IRECV or kind == K_COLLECTIVE:
            c = self.stream(rank, current)  # (Host._nccl_enqueue_edge: after the issue)
            after = (self.last[c],) if self.last[c] >= 0 else ()
        cdef int s = self.stream(rank, stream, kind == K_ISEND or kind == K_IRECV or
                                 kind == K_COLLECTIVE or kind == K_ISEND_OBJECT)
        cdef int op = self.new_op(s, kind, dur, self.clock[h], line,
                                  self.stream_attrs(current) if injected else
                                  self.op_attrs(ln, current), acc)
        self.issuer[op] = issue
        if after:
            self.set_after(op, after)
        if self.acc_pool[acc] and self.freed:
            self.note_freed_use(op, ln)
        self.last[s] = op
        self.enqueue_op(s, op)
        if self.wake[s]:
            self.wake[s] = 0
            self.push(0.0, NORMAL, s)
        return op

    cdef void enqueue_op(self, int s, int op) except *:
        cdef int n = self.qlen[s]
        if n == self.qcap[s]:
            self.qcap[s] = 16 if self.qcap[s] == 0 else 2 * self.qcap[s]
            self.queue[s] = <int*>realloc(self.queue[s], self.qcap[s] * sizeof(int))
            if self.queue[s] == NULL:
                raise MemoryError()
        self.queue[s][n] = op
        self.qlen[s] = n + 1

    cdef tuple recorded_work(self, int rank, object buffer):
        """Host.free's recorded_work: the last op of each stream record_stream named."""
        got = self.recorded.pop((rank, buffer), ())
        out = []
        for name in got:
            s = self.stream(rank, name)
            if self.last[s] >= 0:
                out.append(self.last[s])
        return tuple(out)

    cdef int host_go(self, int h) except -1:
        """Run host ``h``'s program until it blocks (an entry for it is then on the heap, or it
        waits for an op's end) or ends (returns 1)."""
        cdef _RowList lines = self.host_lines[h]
        cdef int nlines = lines.n, lead
        cdef LRef ln
        cdef int op, kind, j, s, k, rank = self.agent_rank[h]
        cdef double t
        cdef tuple deps
        cdef int st
        while True:
            st = self.state[h]
            if st == H_LINE:  # a line begins: its labels and clock (replay._Replay.program)
                j = self.pos[h]
                if j >= nlines:
                    end = self.inj_end[h] if self.injecting else None
                    if end:  # (the driver runs the fixes' syncs after the last action)
                        self.inj_end[h] = None
                        self.host_specs[h] = end
                        self.injk[h] = 0
                        self.state[h] = H_INJECT
                        continue
                    return 1
                ln = self.rows.ref(lines.a[j])
                if not ln.row.flags & NO_T:  # (its t, read as a double: no float made)
                    t = ln.row.t
                    if t > self.clock[h]:
                        self.clock[h] = t
                code = _KIND_CODE.get(_l(ln, L_OP))
                if code is None:
                    raise _Fallback()
                kind = code
                self.host_kind[h] = kind
                if self.host_batches[h] is not None and self.host_batches[h].get(j) == ():
                    self.pos[h] += 1  # (issued with its batch's first line)
                    continue
                if self.shared[h] and self.gates:  # (in_line_order: Host.settle, its gates)
                    self.state[h] = H_SETTLED
                    if self.clock[h] > self.now:  # (Engine.sync_clock)
                        if self.clock[h] > self.max_time:  # (before the line's call)
                            raise self.passed("max_time", h, False)
                        self.push(self.clock[h] - self.now, NORMAL, h)
                        return 0
                    continue
                self.state[h] = H_PREP
            elif st == H_SETTLED:  # simulated time reached the clock (or, by a rounding, fell
                j = self.pos[h]  # short of it: the call's own settle waits again): its gates
                batch = self.host_batches[h].get(j) if self.host_batches[h] is not None \
                    else None
                if batch:
                    self.host_gates[h] = tuple([p for x in batch
                                                for p in self.gates.get(
                                                    self.rows.ref(<int>x).row.lineno, ())])
                else:
                    self.host_gates[h] = self.gates.get(self.rows.ref(lines.a[j]).row.lineno, ())
                self.gatej[h] = -1
                self.state[h] = H_GATED
            elif st == H_GATED:  # in_line_order: each gate not yet taken, waited for in turn
                gated = self.host_gates[h]
                k = self.gatej[h] + 1
                while k < len(gated):
                    p = gated[k]
                    if h in self.flushed:  # (Host.wait_signal, its flush done: it blocks on the
                        self.flushed.discard(h)  # Signal, which may have been set meanwhile:
                        waiting = self.sig_waiters.get(p)  # it goes on once that is processed)
                        if waiting is None:
                            k += 1
                            continue
                        self.gatej[h] = k
                        waiting.append(h)
                        return 0
                    if not self.is_taken(p):  # (its Signal: one event, its waiters in order)
                        waiting = self.sig_waiters.get(p)
                        if waiting is None:  # (_Replay.taking: the Signal made, then the flush)
                            waiting = self.sig_waiters[p] = []
                        if self.injecting and self.flush_posts(h):
                            self.flushed.add(h)
                            self.gatej[h] = k - 1  # (then back to this gate)
                            break  # (Host.wait_signal: the syncs after its last action first)
                        self.gatej[h] = k
                        waiting.append(h)
                        return 0
                    k += 1
                if self.state[h] == H_INJECT:
                    continue
                self.host_gates[h] = None
                self.state[h] = H_PREP
            elif st == H_PREP:  # the line's call begins (its line order kept)
                j = self.pos[h]
                ln = self.rows.ref(lines.a[j])
                kind = self.host_kind[h]
                if K_ISEND <= kind <= K_WAIT:  # (its call runs under `with host.use_stream`,
                    s = self.stream(rank, _l(ln, L_STREAM))  # which makes the stream before any fix's sync)
                    if kind == K_WAIT:  # (an NCCL barrier's wait: taken before them too)
                        target = self.works.get(_l(ln, L_TARGET))
                        self.line_barrier[h] = -1
                        if target is not None and \
                                _l(self.ln_at(self.lineof[<int>target]), L_OP) == "barrier" and \
                                self.opgroup[<int>target].backend != "gloo":
                            self.line_barrier[h] = self.last[s]
                if self.injecting and self.host_batches[h] is not None and \
                        self.host_batches[h].get(j):
                    self.batch_syncs(h, j)
                if self.shared[h] and not self.blocking_call(h, kind, ln):
                    # (the call's first settle: without gates the program does not call
                    # in_line_order; with them it waits only after a timeout short of the clock)
                    self.state[h] = H_CALL_SETTLED
                    if self.clock[h] > self.now:
                        if self.clock[h] > self.max_time:
                            raise self.passed("max_time", h, True)
                        self.push(self.clock[h] - self.now, NORMAL, h)
                        return 0
                    continue
                self.state[h] = H_ACTION
                if self.injecting and not self.injects_in_call(h, kind):
                    self.inject_before(h, j)
            elif st == H_CALL_SETTLED:  # (Engine.host_op: its settle, then _before_issue)
                self.state[h] = H_ACTION
                if self.injecting and not self.injects_in_call(h, self.host_kind[h]):
                    self.inject_before(h, self.pos[h])
            elif st == H_SETTLED2:
                self.state[h] = H_ACTION  # (a second settle: the action goes on from it)
            elif st == H_INJECT:
                specs = self.host_specs[h]
                k = self.injk[h]
                if k >= len(specs):
                    self.injk[h] = -1
                    if self.inj_ret[h] >= 0:  # (syncs run before a wait for another thread)
                        self.state[h] = self.inj_ret[h]
                        self.inj_ret[h] = -1
                    else:
                        self.state[h] = H_ACTION if self.pos[h] < nlines else H_LINE
                    continue
                if self.pos[h] < nlines:
                    ln = self.rows.ref(lines.a[self.pos[h]])  # (a line under `with host.use_stream`: its stream;
                    # not yet for syncs run before its call waits for another thread's line)
                    current = _l(ln, L_STREAM) if K_ISEND <= self.host_kind[h] <= K_WAIT and \
                        self.inj_ret[h] < 0 else "compute"
                else:  # (the driver's end, outside any line)
                    ln = self.rows.ref(lines.a[nlines - 1])
                    current = "compute"
                if self.shared[h] and self.waits_for_issue(h, specs[k]):
                    return 0  # (its record or handle another thread's, not issued yet)
                members = self.batch_call(h)
                if members is not None:  # (Host.batch_p2p: the thread not shared, no settle)
                    if self.inj_settles[h] == -2:
                        self.inj_settles[h] = -1  # (its wait for another thread's record ran)
                elif self.shared[h] and self.sync_settles(h, specs[k], current):
                    return 0  # (a shared thread's sync settles first: Engine.host_op)
                lead = self.issued_first(members)
                if self.inject(h, specs[k], ln, current) if lead < 0 else \
                        self.inject_as(h, specs[k], self.rows.ref(lead), current, _l(ln, L_STEP)):
                    return 0  # (a sync that blocks: it goes on in H_CLOCKED)
                if self.state[h] == H_INJECT:
                    self.injk[h] = k + 1
            elif st == H_ACTION:
                ln = self.rows.ref(lines.a[self.pos[h]])
                if self.action(h, ln):
                    return 0
            elif st == H_CLOCKED:  # Engine.mark_start; the sync's own call
                op = self.cur[h]
                self.start[op] = self.clock[h]
                self.sseq[op] = self.seq
                self.seq += 1
                kind = self.kinds[op]
                if kind == K_WAIT:  # a handle's blocking wait (Host.wait_work), or a fix's
                    deps = self.blocking_wait(h, op, lines, nlines)
                elif self.injk[h] >= 0 and kind != K_GET:  # a fix's event.synchronize()
                    spec = self.host_specs[h][self.injk[h]]
                    name = spec[1]
                    lead = self.issued_first(self.batch_call(h))
                    ln = self.rows.ref(lead if lead >= 0 else
                                       lines.a[self.pos[h] if self.pos[h] < nlines else nlines - 1])
                    a = self.own_attrs(op)
                    a["injected"] = True
                    a["event"] = name
                    rec = self.fix_record(rank, spec[4])
                    if rec is None:
                        self.note_unrecorded(op, f"{name}.synchronize()", _location(ln), name)
                        deps = None
                    else:
                        deps = (rec,)
                elif kind == K_SYNC_EVENT:
                    ln = self.rows.ref(lines.a[self.pos[h]])
                    self.own_attrs(op)["event"] = _l(ln, L_EVENT)
                    rec = self.events.get((rank, _l(ln, L_EVENT)))
                    if rec is None:
                        self.note_unrecorded(op, _l(ln, L_NAME), _location(ln), _l(ln, L_EVENT))
                        deps = None  # (wait_recs is not called: after stays ())
                    else:
                        deps = (rec,)
                elif kind == K_QUERY:  # Host.query_work
                    ln = self.rows.ref(lines.a[self.pos[h]])
                    target = <int>self.works[_l(ln, L_TARGET)]
                    recs = self.workrecs.get(target, (target,))
                    finished = all([self.eseq[<int>x] >= 0 for x in recs])
                    observed = _l(ln, L_RESULT)
                    done = finished if observed is None else observed
                    a = self.own_attrs(op)
                    a["handle"] = self.ophandle[target]
                    a["result"] = done
                    if not done:  # (no edge names the op it asked about: its id, for the writer)
                        a["queried"] = target
                    deps = None
                    if observed and not finished:  # (seen done: it was done by then)
                        deps = recs
                    elif done:
                        self.set_after(op, recs)
                elif kind == K_SEND_OBJECT or kind == K_RECV_OBJECT:
                    if self.object_go(h, op, kind, self.rows.ref(lines.a[self.pos[h]])):
                        return 0
                    continue
                elif kind == K_GET:  # sim/handoff.get: Channels.get, then wait_recs on the put
                    a = self.own_attrs(op)
                    if self.injk[h] >= 0:  # (a hand-off fix's get, on its own channel)
                        a["injected"] = True
                        channel = self.host_specs[h][self.injk[h]][1]
                    else:
                        channel = _lr(self.rows.ref(lines.a[self.pos[h]]), R_CHANNEL)
                    a["channel"] = channel
                    key = (rank, channel)
                    k = self.ch_gets.get(key, 0)
                    self.ch_gets[key] = k + 1
                    puts = self.ch_puts.get(key)
                    if puts is None or len(puts) <= k:  # (its put not issued yet: wait for it)
                        self.ch_waiting[(key, k)] = h
                        self.wait_target[h] = k
                        self.lend[h] = self.sseq[op] == self.seq - 1
                        if self.lend[h]:
                            self.seq -= 1
                        self.state[h] = H_HANDOFF
                        return 0
                    deps = (puts[k],)
                elif kind == K_SYNC_STREAM:
                    ln = self.rows.ref(lines.a[self.pos[h]])
                    self.own_attrs(op)["stream"] = _l(ln, L_STREAM)
                    s = self.stream(rank, _l(ln, L_STREAM))
                    deps = (self.last[s],) if self.last[s] >= 0 else ()
                else:  # sync_device: every stream of the rank, by name (no gloo channel here)
                    deps = tuple([self.last[s] for s in self.rank_streams(rank)
                                  if self.last[s] >= 0])
                self.host_deps[h] = deps
                self.host_after[h] = [] if deps is not None else None
                self.depj[h] = 0
                self.state[h] = H_DEPS
            elif st == H_DEPS:  # Engine.wait_recs
                op = self.cur[h]
                deps = self.host_deps[h]
                if deps is not None:
                    j = self.depj[h]
                    while j < len(deps):
                        d = <int>deps[j]
                        self.host_after[h].append(d)
                        if self.eseq[d] < 0:
                            # (with one thread a rank nothing runs between its start and this
                            # wait: its start is always the latest position, handed back)
                            self.lend[h] = self.sseq[op] == self.seq - 1
                            if self.lend[h]:
                                self.seq -= 1
                            self.depj[h] = j
                            self.wait_for(d, h)
                            self.state[h] = H_WOKEN
                            return 0
                        j += 1
                    self.set_after(op, self.host_after[h])
                self.end_blocking(h, op)
                if self.injk[h] >= 0:  # (a fix's sync: the next one, or the line's action)
                    self.injk[h] += 1
                    self.state[h] = H_INJECT
                else:
                    self.line_done(h)
            elif st == H_OBJ_WAIT or st == H_OBJ_SENT:
                if self.object_go(h, self.cur[h], st, self.rows.ref(lines.a[self.pos[h]])):
                    return 0
            elif st == H_HANDOFF:  # a get's put was issued: its start moves past the put's end
                op = self.cur[h]
                if not self.lend[h]:
                    self.seq_holes = True
                self.sseq[op] = self.seq
                self.seq += 1
                self.host_deps[h] = (self.ch_puts[(rank, self.attrs_of(op)["channel"])][
                    self.wait_target[h]],)
                self.host_after[h] = []
                self.depj[h] = 0
                self.state[h] = H_DEPS
            else:  # H_WOKEN: back in wait_recs after a dependency ended
                op = self.cur[h]
                if not self.lend[h]:
                    self.seq_holes = True
                self.sseq[op] = self.seq
                self.seq += 1
                self.depj[h] += 1
                self.state[h] = H_DEPS

    cdef bint blocking_call(self, int h, int kind, LRef ln) except -1:
        """The line's call is a blocking op (Engine.blocking_op: no settle, its sync_clock
        after the op is made), not a host action or an enqueue (whose first step settles)."""
        if kind == K_WAIT:  # (Host.wait_work: the host blocks for gloo, blocking, a barrier)
            target = self.works.get(_l(ln, L_TARGET))
            if target is None:
                raise _Fallback()  # (another thread's handle not issued: the engine waits)
            return _lr(ln, R_BLOCKING) or self.opgroup[<int>target].backend == "gloo" or \
                _l(self.ln_at(self.lineof[<int>target]), L_OP) == "barrier"
        return kind == K_SYNC_EVENT or kind == K_SYNC_STREAM or kind == K_SYNC_DEVICE or \
            kind == K_QUERY or kind == K_SEND_OBJECT or kind == K_RECV_OBJECT or kind == K_GET

    cdef tuple blocking_wait(self, int h, int op, _RowList lines, int nlines):
        """Host.wait_work's blocking part, after its blocking op started: its attrs, the note of
        a gloo send waited twice, and what it waits for (the Work's ops; an NCCL barrier's, then
        its current stream's last op, taken as the wait was called)."""
        cdef int target = self.wait_target[h]
        ln = self.rows.ref(lines.a[self.pos[h] if self.pos[h] < nlines else nlines - 1])
        a = self.own_attrs(op)
        if self.injk[h] >= 0:  # (a fix's: Engine._note_issue marks it first)
            a["injected"] = True
            name = f"{self.ophandle[target]}.wait()"
        else:
            name = _l(ln, L_NAME)
        a["handle"] = self.ophandle[target]
        a["blocking"] = True
        if self.opgroup[target].backend == "gloo" and self.kinds[target] == K_ISEND:
            if target in self.gloo_sends_waited:
                tl = self.ln_at(self.lineof[target])
                self.notes.append(Note(
                    "gloo-send-waited-twice", f"{name} at {_location(ln)} waits the handle of "
                    f"{_l(tl, L_NAME)} (issued at {_location(tl)}) a second time: under gloo a second "
                    "wait() on an isend's handle hangs (seen with torch 2.13: it waits for a "
                    "send never made); the simulation takes it as satisfied", op))
            self.gloo_sends_waited.add(target)
        deps = self.workrecs.get(target, (target,))  # (a batch's: all of it)
        if self.barrier_last[h] >= 0 and self.barrier_last[h] != target:
            deps = (target, self.barrier_last[h])  # (then the current stream)
        return deps

    cdef bint block_sync(self, int h, int kind, int line, dict attrs) except -1:
        """Engine.blocking_op up to its sync_clock: the sync's host op is made; True when the
        host then waits for simulated time to reach its clock (it goes on in H_CLOCKED)."""
        cdef int op = self.new_op(h, kind, 0.0, self.clock[h], line, attrs, 0)
        self.cur[h] = op
        if self.awaited and self.injk[h] < 0 and line in self.awaited and \
                not self.is_taken(line) and _l(self.ln_at(line), L_OP) in self.on_start:
            self.take(line)  # (Origin.on_start: as its host action is made, before it waits)
        self.state[h] = H_CLOCKED
        if self.clock[h] > self.now:
            if self.clock[h] > self.max_time:
                raise self.passed("max_time", h, True)
            self.push(self.clock[h] - self.now, NORMAL, h)
            return True
        return False

    cdef bint action(self, int h, LRef ln) except -1:
        """The line's own call (its kind's ``OpKind.replay``); True when it blocks."""
        cdef int op, kind = self.host_kind[h], rank = self.agent_rank[h]
        cdef int line = ln.row.lineno
        if kind == K_LAUNCH:
            self.enqueue(h, _l(ln, L_STREAM), kind, _dur(ln), line, ln,
                         self.access_list(_l(ln, L_READS), _l(ln, L_WRITES)), ())
        elif kind == K_HOST:
            self.host_op(h, kind, _dur(ln), line, ln, self.access_list(_l(ln, L_READS), _l(ln, L_WRITES)))
        elif kind == K_RECORD:
            op = self.enqueue(h, _l(ln, L_STREAM), kind, 0.0, line, ln, 0, ())  # (its attrs
            self.events[(rank, _l(ln, L_EVENT))] = op  # name the event as it is made: record())
        elif kind == K_WAIT_EVENT:
            got = self.host_s2[h]
            if got is None:
                rec = self.events.get((rank, _l(ln, L_EVENT)))  # (read before its enqueue settles)
                if self.shared[h] and self.clock[h] > self.now:
                    return self.settle2(h, (rec,))
            else:
                rec = got[0]
                self.host_s2[h] = None
            if self.injecting and self.shared[h] and self.inject_before(h, self.pos[h]):
                self.host_s2[h] = (rec,)  # (its fixes' syncs first: then this again)
                return False
            op = self.enqueue(h, _l(ln, L_STREAM), kind, 0.0, line, ln, 0,
                              () if rec is None else (rec,))  # (its attrs' event: record())
            if rec is None:
                self.note_unrecorded(op, _l(ln, L_NAME), _location(ln), _l(ln, L_EVENT))
        elif kind == K_ALLOC:
            op = self.host_op(h, kind, 0.0, line, ln, 0)
            a = self.own_attrs(op)
            a["buffer"] = _l(ln, L_BUFFER)
            a["nbytes"] = _l(ln, L_NBYTES)
            a["stream"] = _l(ln, L_STREAM)
            if _lr(ln, R_LABEL) is not None:
                a["label"] = _lr(ln, R_LABEL)
            self.freed.pop((rank, _l(ln, L_BUFFER)), None)
        elif kind == K_FREE:
            if _l(ln, L_NBYTES) is None:
                raise _Fallback()
            key = (rank, _l(ln, L_BUFFER))
            got = self.host_s2[h]
            if got is None:
                earlier = self.freed.pop(key, None)  # (taken before its enqueue settles)
                if self.shared[h] and self.clock[h] > self.now:
                    return self.settle2(h, (earlier,))
            else:
                earlier = got[0]
                self.host_s2[h] = None
            if self.injecting and self.shared[h] and self.inject_before(h, self.pos[h]):
                self.host_s2[h] = (earlier,)  # (its fixes' syncs first: then this again)
                return False
            view = view_record(View, _view_offset, rank, _l(ln, L_BUFFER), 0,
                               int(_l(ln, L_NBYTES)), None)
            op = self.enqueue(h, _l(ln, L_STREAM), kind, 0.0, line, ln,
                              self.one_access(_access_of(view, "write", _WHOLE)), ())
            a = self.own_attrs(op)
            a["buffer"] = _l(ln, L_BUFFER)
            if earlier is not None:
                a["after_free"] = (_l(ln, L_BUFFER),)
                el = self.ln_at(self.lineof[<int>earlier])
                self.notes.append(Note(
                    "double-free", f"{_l(ln, L_NAME)} at {_location(ln)} frees {_l(ln, L_BUFFER)!r} on "
                    f"rank{rank} again: {_l(el, L_NAME)} at {_location(el)} already freed it (no "
                    "alloc since)", op))
            self.freed[key] = op
        elif kind == K_RECORD_STREAM:
            if _l(ln, L_NBYTES) is None or is_comm(_l(ln, L_STREAM)):
                raise _Fallback()
            op = self.host_op(h, kind, 0.0, line, ln, 0)
            a = self.own_attrs(op)
            a["buffer"] = _l(ln, L_BUFFER)
            a["stream"] = _l(ln, L_STREAM)
            self.recorded.setdefault((rank, _l(ln, L_BUFFER)), []).append(_l(ln, L_STREAM))
        elif (kind == K_ISEND or kind == K_IRECV) and _lr(ln, R_BATCH) is not None:
            if self.injecting and self.shared[h] and self.inject_before(h, self.pos[h]):
                return False  # (after Host.batch_p2p's settle: then the batch again)
            self.batch(h, ln, self.host_batches[h][self.pos[h]])
        elif kind == K_ISEND or kind == K_IRECV or kind == K_COLLECTIVE:
            if self.shared[h]:  # (its enqueue's settle: nothing it reads comes before)
                if self.host_s2[h] is None:
                    if self.clock[h] > self.now:
                        return self.settle2(h, ())
                else:
                    self.host_s2[h] = None
                if self.injecting and self.inject_before(h, self.pos[h]):
                    self.host_s2[h] = ()  # (its fixes' syncs first: then this again)
                    return False
            if kind == K_COLLECTIVE:
                self.collective(h, line, ln)
            else:
                self.p2p(h, kind, line, ln)
        elif kind == K_ISEND_OBJECT:
            self.isend_object(h, line, ln)
        elif kind == K_QUERY:
            if self.works.get(_l(ln, L_TARGET)) is None:
                raise _Fallback()
            return self.block_sync(h, kind, line, self.host_attrs(ln))
        elif kind == K_WAIT:  # Host.wait_work (NCCL: the current stream waits; or the host)
            target = self.works.get(_l(ln, L_TARGET))
            if target is None:
                raise _Fallback()  # (another thread's handle: the reference waits for its issue)
            if _lr(ln, R_BLOCKING) or self.opgroup[<int>target].backend == "gloo" or \
                    _l(self.ln_at(self.lineof[<int>target]), L_OP) == "barrier":
                self.wait_target[h] = target
                self.barrier_last[h] = self.line_barrier[h]
                return self.block_sync(h, kind, line, self.host_attrs(ln))
            op = self.enqueue(h, _l(ln, L_STREAM), kind, 0.0, line, ln, 0,
                              self.workrecs.get(target, (target,)), False, _l(ln, L_STREAM))
            a = self.own_attrs(op)
            a["handle"] = self.ophandle[<int>target]
            a["blocking"] = False
        elif kind == K_PUT:
            self.put(h, self.host_op(h, kind, 0.0, line, ln, 0), _lr(ln, R_CHANNEL))
        else:  # a host sync, or a get
            return self.block_sync(h, kind, line, self.host_attrs(ln))
        self.line_done(h)
        return False

    cdef void put(self, int h, int op, str channel) except *:
        """sim/handoff.put: host action ``op`` puts on the rank's ``channel``; the get that
        waits for it wakes (Channels.put)."""
        self.own_attrs(op)["channel"] = channel
        key = (self.agent_rank[h], channel)
        puts = self.ch_puts.get(key)
        if puts is None:
            puts = self.ch_puts[key] = []
        puts.append(op)
        if self.ch_waiting:
            w = self.ch_waiting.pop((key, len(puts) - 1), None)
            if w is not None:
                self.push(0.0, NORMAL, <int>w)

    cdef bint settle2(self, int h, tuple got) except -1:
        """A call's second settle (its enqueue's Engine.host_op, after wait_event's, free's or
        a comm op's own) waits: ``got``, what the call read before it, is kept for the action's
        resumption (H_SETTLED2). True: the host waits."""
        if self.clock[h] > self.max_time:
            raise self.passed("max_time", h, True)
        self.host_s2[h] = got
        self.state[h] = H_SETTLED2
        self.push(self.clock[h] - self.now, NORMAL, h)
        return True

    cdef void line_done(self, int h) except *:
        """The line's call returned (replay._Replay.program): the lines of other threads that
        wait for it (or for a line of its batch) may go on (:meth:`take`); the next line."""
        cdef int j = self.pos[h], lineno
        if self.awaited or self.handle_waits:
            batch = self.host_batches[h].get(j) if self.host_batches[h] is not None else None
            lines = batch or ((<_RowList>self.host_lines[h]).a[j],)
            for x in lines:
                lineno = self.rows.ref(<int>x).row.lineno
                if self.work_sig + lineno in self.sig_waiters:  # (its Work made:
                    self.take(self.work_sig + lineno)  # a fix's wait on it wakes)
            for x in lines:
                lineno = self.rows.ref(<int>x).row.lineno
                if lineno in self.awaited and not self.is_taken(lineno):
                    self.take(lineno)
        self.state[h] = H_LINE
        self.pos[h] = j + 1

    cdef inline bint is_taken(self, object signal) except -1:
        """Whether signal ``signal`` (an int: a line, ``fix_sig + i``, ``work_sig + line``) was
        taken (:meth:`take`)."""
        cdef Py_ssize_t k = signal
        if not 0 <= k < self.ntaken:
            raise _Fallback()  # (no signal of this run's: not reached, the engine would run)
        return self.taken[k] != 0

    cdef void take(self, int lineno) except *:
        """replay._Replay.take: line ``lineno`` took effect; its Signal, if one was made (a
        thread waits on it, or runs a fix's syncs before it does), is set: one event, processed
        in its turn, when every waiter resumes in one step, in the order they began waiting, as
        simpy calls an event's callbacks."""
        if not 0 <= lineno < self.ntaken:
            raise _Fallback()  # (not a signal of this run's)
        self.taken[lineno] = 1
        if lineno in self.sig_waiters:
            self.push(0.0, NORMAL, -1 - lineno)

    cdef object group_of(self, int rank, LRef ln):
        """Host.group: the line's group, which holds the rank."""
        cfg = self.groups.get(_l(ln, L_GROUP))
        if cfg is None or rank not in cfg.ranks:
            raise _Fallback()
        return cfg

    cdef str handle(self, int h, LRef ln):
        """Host._new_handle: every comm op counts, named or not."""
        self.host_handles[h] += 1
        return _l(ln, L_HANDLE) or f"{_l(ln, L_OP)}#{self.host_handles[h]}"

    cdef void p2p(self, int h, int kind, int line, LRef ln) except *:
        """Host.p2p: an unbatched isend or irecv."""
        cfg = self.group_of(self.agent_rank[h], ln)
        self.p2p_rec(h, kind, ln, cfg, cfg.p2p_stream(self.agent_rank[h], _l(ln, L_PEER), _l(ln, L_OP)),
                     _l(ln, L_STREAM), -2, 0)

    cdef void batch(self, int h, LRef first, tuple members) except *:
        """replay._Replay.batch, Host.batch_p2p: the lines of one batch_isend_irecv issued by its
        first line's call, sends first, on the group's own stream, each its own line's labels
        (the first line's step); each line's handle completes with the whole batch."""
        cdef int i, op, batch_id = -1
        cdef LRef ln
        cfg = self.group_of(self.agent_rank[h], first)
        if cfg.backend != "nccl":
            raise _Fallback()  # (the reference's ModelError)
        order = _issue_order(self.rows, members)
        inner = self.batch_inner.pop(h, None) if self.injecting else None
        ops = []
        for i in order:
            ln = self.rows.ref(<int>members[i])
            if inner is not None and ops:  # (Engine._before_issue before each member)
                self.inner_syncs(h, inner[len(ops) - 1], ln, first)
            op = self.p2p_rec(h, _KIND_CODE[_l(ln, L_OP)], ln, cfg, f"nccl:{cfg.name}", _l(first, L_STREAM),
                              batch_id, len(members))
            if batch_id < 0:
                batch_id = op
            if _l(ln, L_STEP) != _l(first, L_STEP):
                self.opstep[op] = _l(first, L_STEP)
                self.opstep[self.issuer[op]] = _l(first, L_STEP)
            ops.append(op)
        recs = tuple(ops)
        for op in ops:
            self.workrecs[op] = recs

    cdef void inner_syncs(self, int h, tuple specs, LRef ln, LRef first) except *:
        """A fix's syncs between two members of a batch (:meth:`batch_syncs`), issued as
        member ``ln`` (its location; the batch's step, its current stream). One that blocks the
        host mid-call is the engine's (_Fallback): a host sync, a get, a wait for another
        thread's record or handle not issued yet, a wait on a handle that blocks the host."""
        cdef int code
        for spec in specs:
            code = spec[0]
            if code == R_GET or code == R_WAIT and (
                    spec[2] is None or spec[3] >= 0 and not self.is_taken(self.fix_sig + spec[3])):
                raise _Fallback()
            if code == R_WAIT_HANDLE:
                target = self.fix_handle(h, spec)
                if target is None and spec[3] is not None or \
                        target is not None and self.fix_handle_blocks(target, spec[2]):
                    raise _Fallback()
            if self.inject_as(h, spec, ln, _l(first, L_STREAM), _l(first, L_STEP)):
                raise _Fallback()  # (not reached: blocking syncs were left out)

    cdef bint inject_as(self, int h, tuple spec, LRef ln, str current, object step) except -1:
        """:meth:`inject`, the sync issued as batch member ``ln`` with the step ``step`` of the
        batch's first line (host.step, which the replay set for that line); True when it
        blocks."""
        cdef int op = self.nops
        cdef bint blocked = self.inject(h, spec, ln, current)
        if _l(ln, L_STEP) != step:
            while op < self.nops:
                self.opstep[op] = step
                op += 1
        return blocked

    cdef int p2p_rec(self, int h, int kind, LRef ln, object cfg, str stream, str current,
                     int batch_id, int batch_size) except -1:
        """Host._p2p_rec: enqueue one isend/irecv on ``stream`` and enter it in the p2p
        matching; ``batch_id``: -2 unbatched, -1 a batch's first op, else the batch's id."""
        cdef int rank = self.agent_rank[h]
        cdef int op, m
        cdef bint is_send = kind == K_ISEND
        if _l(ln, L_PEER) not in cfg.ranks:
            raise _Fallback()
        tensors = _l(ln, L_READS) if is_send else _l(ln, L_WRITES)
        size = _nbytes_of(tensors) if _l(ln, L_NBYTES) is None else _l(ln, L_NBYTES)
        dur = (cfg.transfer_time(size) if ln.row.flags & NO_DUR else ln.row.dur) if is_send else 0.0
        acc = self.access_list(tensors, ()) if is_send else self.access_list((), tensors)
        op = self.enqueue(h, stream, kind, dur, ln.row.lineno, ln, acc, (), False, current)
        if batch_id != -2:
            a = self.own_attrs(op)
            a["batch"] = op if batch_id == -1 else batch_id
            a["batch_size"] = batch_size
        m = self.p2p_entry(cfg.name, rank, _l(ln, L_PEER), is_send)
        if is_send:
            self.m_send[m] = op
        else:
            self.m_recv[m] = op
        a = self.comm_issued(h, op, m, cfg, ln)
        a["peer"] = _l(ln, L_PEER)
        a["nbytes"] = size
        a["mode"] = "read" if is_send else "write"
        a["dur"] = self.end[op]
        return op

    cdef dict comm_issued(self, int h, int op, int match, object cfg, LRef ln):
        """What every comm op's issue records (Host._p2p_rec, collective, isend_object): its
        match, its group, its handle (Host._new_handle), the line's Work; its attrs, which start
        with its group's name (the caller adds the rest, in the reference's order)."""
        self.opmatch[op] = match
        self.opgroup[op] = cfg
        self.ophandle[op] = self.handle(h, ln)
        self.works[ln.row.lineno] = op
        a = self.own_attrs(op)
        a["group"] = cfg.name
        return a

    cdef int p2p_entry(self, str group, int rank, int peer, bint is_send) except -1:
        """CommMixin.p2p_entry: the k-th send src -> dst pairs with the k-th receive on dst
        from src (per group): the index of their transfer."""
        cdef int m
        src, dst = (rank, peer) if is_send else (peer, rank)
        side = (group, src, dst, is_send)
        k = self.p2p_issued.get(side, 0)
        self.p2p_issued[side] = k + 1
        key = (group, src, dst, k)
        got = self.p2p_at.get(key)
        if got is not None:
            return got
        m = len(self.m_send)
        self.p2p_at[key] = m
        self.m_send.append(-1)
        self.m_recv.append(-1)
        self.m_started.append(False)
        self.m_started_waiter.append(-1)
        self.m_arrived.append(False)
        self.m_arrived_waiter.append(-1)
        return m

    cdef void started(self, int m) except *:
        """The receive of transfer ``m`` started (``recv_started.succeed()``)."""
        self.succeed(self.m_started, self.m_started_waiter, m)

    cdef void arrived(self, int m) except *:
        """The data of transfer ``m`` arrived (``arrived.succeed()``)."""
        self.succeed(self.m_arrived, self.m_arrived_waiter, m)

    cdef void succeed(self, list triggered, list waiter, int m) except *:
        """One of a transfer's events triggered: its waiter, if one waits, resumes (one
        process at most waits for each: the send for the receive's start, the receive for the
        data)."""
        cdef int w = waiter[m]
        triggered[m] = True
        if w >= 0:
            waiter[m] = -1
            self.push(0.0, NORMAL, w)

    cdef void isend_object(self, int h, int line, LRef ln) except *:
        """Host.isend_object: a gloo object send on the group's channel (no tensor, no edge
        from the current stream)."""
        cdef int rank = self.agent_rank[h]
        cdef int op, m
        cfg = self.group_of(rank, ln)
        nbytes = _l(ln, L_NBYTES) or 0
        dur = cfg.transfer_time(nbytes) if ln.row.flags & NO_DUR else ln.row.dur
        op = self.enqueue(h, f"gloo:{cfg.name}", K_ISEND_OBJECT, dur, line, ln, 0, ())
        m = self.p2p_entry(cfg.name, rank, _l(ln, L_PEER), True)
        self.m_send[m] = op
        a = self.comm_issued(h, op, m, cfg, ln)
        a["peer"] = _l(ln, L_PEER)
        a["nbytes"] = nbytes
        a["dur"] = self.end[op]

    cdef bint object_go(self, int h, int op, int at, LRef ln) except -1:
        """Host.send_object / recv_object after their blocking op started, from ``at`` (the
        op's kind, or the state the host was resumed in); True when the host blocks."""
        cdef int rank = self.agent_rank[h]
        cdef int m
        cdef double dur
        if at == K_SEND_OBJECT:
            cfg = self.group_of(rank, ln)
            nbytes = _l(ln, L_NBYTES) or 0
            dur = self.scaled(cfg.transfer_time(nbytes) if ln.row.flags & NO_DUR else ln.row.dur)
            a = self.own_attrs(op)
            a["group"] = cfg.name
            a["peer"] = _l(ln, L_PEER)
            a["nbytes"] = nbytes
            a["dur"] = dur
            m = self.p2p_entry(cfg.name, rank, _l(ln, L_PEER), True)
            self.m_send[m] = op
            self.opmatch[op] = m
            self.opdur[op] = dur
            if nbytes > cfg.eager_bytes and not self.m_started[m]:
                self.m_started_waiter[m] = h
                self.state[h] = H_OBJ_WAIT
                return True
            at = H_OBJ_WAIT
        if at == H_OBJ_WAIT and self.kinds[op] == K_SEND_OBJECT:  # e.block(timeout(dur))
            self.state[h] = H_OBJ_SENT
            self.push(self.opdur[op], NORMAL, h)
            return True
        if at == H_OBJ_SENT:
            m = self.opmatch[op]
            self.end_blocking(h, op)
            self.arrived(m)
            self.line_done(h)
            return False
        if at == K_RECV_OBJECT:
            cfg = self.group_of(rank, ln)
            a = self.own_attrs(op)
            a["group"] = cfg.name
            a["peer"] = _l(ln, L_PEER)
            m = self.p2p_entry(cfg.name, rank, _l(ln, L_PEER), False)
            self.m_recv[m] = op
            self.opmatch[op] = m
            self.started(m)
            if not self.m_arrived[m]:
                self.m_arrived_waiter[m] = h
                self.state[h] = H_OBJ_WAIT
                return True
        m = self.opmatch[op]  # (recv_object: its data arrived)
        self.opjoins[op] = (self.m_send[m],)
        self.end_blocking(h, op)
        self.line_done(h)
        return False

    cdef void end_blocking(self, int h, int op) except *:
        """Engine.end_blocking: the host's clock catches up with simulated time; the op ends."""
        if self.now > self.clock[h]:
            self.clock[h] = self.now
        self.end[op] = self.clock[h]
        self.eseq[op] = self.seq
        self.seq += 1
        self.ended(op)

    cdef void collective(self, int h, int line, LRef ln) except *:
        """Host.collective: a collective on the group's stream (or channel), entered in the
        group's k-th collective."""
        cdef int rank = self.agent_rank[h]
        cdef int op, c
        cfg = self.group_of(rank, ln)
        root = _lr(ln, R_ROOT)
        if root is not None and root not in cfg.ranks:
            raise _Fallback()
        inputs, outputs = _l(ln, L_READS), _l(ln, L_WRITES)
        if _l(ln, L_NBYTES) is not None:
            size = _l(ln, L_NBYTES)
        elif _l(ln, L_OP) == "barrier":  # (streamsim.sim.comm.wire_bytes)
            size = 0
        elif _l(ln, L_OP) == "gather":
            size = len(cfg.ranks) * _nbytes_of(inputs)
        elif _l(ln, L_OP) == "scatter":
            size = len(cfg.ranks) * _nbytes_of(outputs)
        else:
            size = _nbytes_of(inputs if _l(ln, L_OP) in _SIZED_BY_INPUTS else outputs or inputs)
        dur = cfg.transfer_time(size) if ln.row.flags & NO_DUR else ln.row.dur
        op = self.enqueue(h, f"{cfg.backend}:{cfg.name}", K_COLLECTIVE, dur, line, ln,
                          self.access_list(inputs, outputs), (), False, _l(ln, L_STREAM))
        side = (cfg.name, rank)
        k = self.coll_issued.get(side, 0)
        self.coll_issued[side] = k + 1
        got = self.coll_at.get((cfg.name, k))
        if got is None:
            c = len(self.c_members)
            self.coll_at[(cfg.name, k)] = c
            self.c_members.append([])
            self.c_expected.append(len(cfg.ranks))
            self.c_started.append(False)
            self.c_waiters.append([])
            self.c_end.append(0.0)
        else:
            c = got
        a = self.comm_issued(h, op, c, cfg, ln)
        a["nbytes"] = size
        a["ranks"] = cfg.ranks
        a["dur"] = self.end[op]
        if root is not None:
            a["root"] = root

    cdef bint inject_before(self, int h, int j) except -1:
        """Engine._before_issue, as line ``j``'s action is issued: the syncs after the line
        before it (unless a wait for another thread ran them: :meth:`flush_posts`), then those
        before this one. True: they run (state H_INJECT), and the action is taken up again
        after them."""
        pre = _take(<list>self.inj_before[h], j)
        post = _take(<list>self.inj_post[h], j)
        specs = pre if post is None else post if pre is None else post + pre
        if not specs:
            return False
        self.host_specs[h] = specs
        self.injk[h] = 0
        self.state[h] = H_INJECT
        return True

    cdef object batch_call(self, int h):
        """The lines of the batch whose call the thread's fix syncs run in, else None.
        Host.batch_p2p settles once, then issues its members with the thread not shared
        (Engine.settle does nothing): the syncs before its first issued member (Engine.
        _before_issue) do not settle either. (Syncs run before the batch waits for another
        thread's line are outside the call: Host.wait_signal.)"""
        cdef int j = self.pos[h]
        if self.host_batches[h] is None or self.inj_ret[h] >= 0 or \
                j >= (<_RowList>self.host_lines[h]).n:
            return None
        return self.host_batches[h].get(j) or None

    cdef int issued_first(self, object members) except -2:
        """The row a fix's sync before a batch (``members``, its rows, or None: no batch) is
        issued as, when it is not the batch's first line: its first issued member
        (Host.batch_p2p sets each member's origin before its _before_issue); -1 otherwise."""
        if members is None:
            return -1
        cdef int first = _issue_order(self.rows, members)[0]
        return <int>members[first] if first != 0 else -1

    cdef void batch_syncs(self, int h, int j) except *:
        """Host.batch_p2p issues a batch's members in one call, sends first
        (``batch_issue_order``), each its own action (Engine._before_issue, the thread not
        shared): before each, the syncs after the action issued before it, then its own. The
        fix syncs of the batch at line ``j`` are laid out so: those before its first issued
        member run before the batch (with those after the line before it: :meth:`inject_before`),
        those after its last issued member after it (before the next line, or at the thread's
        end), and those between two members inside :meth:`batch` (``batch_inner``: per issued
        member after the first, its syncs; one that blocks the host is the engine's:
        :meth:`inner_syncs`)."""
        members = self.host_batches[h][j]
        cdef int k, x, n = len(members), last = (<_RowList>self.host_lines[h]).n - 1
        order = _issue_order(self.rows, members)
        pre = <list>self.inj_before[h]
        post = <list>self.inj_post[h]
        pre_of, post_of = {}, {}  # member index -> its syncs before it / after it
        for k in range(n):
            x = j + k
            got = _take(pre, x)
            if got is not None:
                pre_of[k] = got
            if x < last:
                got = _take(post, x + 1)
                if got is not None:
                    post_of[k] = got
            elif self.inj_end[h]:
                post_of[k] = self.inj_end[h]
                self.inj_end[h] = None
        if not pre_of and not post_of:
            return
        if order[0] in pre_of:
            pre[j] = pre_of[order[0]]
        self.batch_inner[h] = [tuple(post_of.get(order[k - 1], ())) +
                               tuple(pre_of.get(order[k], ())) for k in range(1, n)]
        after = post_of.get(order[n - 1])
        if after:
            if j + n - 1 < last:
                post[j + n] = after
            else:
                self.inj_end[h] = after

    cdef bint injects_in_call(self, int h, int kind) except -1:
        """A thread of a rank of several settles inside these calls before their enqueue's
        host_op (wait_event's, free's, a comm op's own settle: Engine.settle), and their fixes'
        syncs run after it (:meth:`action`), not before the call."""
        return self.shared[h] and (kind == K_WAIT_EVENT or kind == K_FREE or kind == K_ISEND
                                   or kind == K_IRECV or kind == K_COLLECTIVE)

    cdef bint flush_posts(self, int h) except -1:
        """Engine.flush_post_injections, as a thread of a rank of several is about to wait for
        another thread's line (Host.wait_signal): the syncs after its last action run now (the
        other thread may be waiting for them). True: they run (state H_INJECT), then the wait
        is taken up again."""
        post = _take(<list>self.inj_post[h], self.pos[h])
        if not post:
            return False
        self.host_specs[h] = post
        self.injk[h] = 0
        self.inj_ret[h] = H_GATED
        self.state[h] = H_INJECT
        return True

    cdef bint waits_for_issue(self, int h, tuple spec) except -1:
        """inject._wait_event: a fix's wait whose record is another thread's first waits, in
        simulated time, until that record is issued (its signal: :meth:`take`), before any of
        its calls (``inj_settles`` -2: it has waited); inject._wait_handle: a wait on a handle
        another thread issues, until that handle's Work is made (Engine.issued_work: the
        signal of its line, :meth:`line_done`). True: the thread waits."""
        cdef int key, lineno
        if self.inj_settles[h] != -1:
            return False
        if spec[0] == R_WAIT and spec[3] >= 0:
            key = self.fix_sig + spec[3]
            if self.is_taken(key):
                return False
        elif spec[0] == R_WAIT_HANDLE and spec[3] is not None:
            lineno = self.handle_line(h, spec)
            if lineno < 0:
                raise _Fallback()  # (an action that never comes: the reference's stall)
            if lineno in self.works:
                return False
            key = self.work_sig + lineno
        else:
            return False
        self.inj_settles[h] = -2
        waiting = self.sig_waiters.get(key)
        if waiting is None:
            self.sig_waiters[key] = [h]
        else:
            waiting.append(h)
        return True

    cdef bint sync_settles(self, int h, tuple spec, str current) except -1:
        """A fix's sync on a thread of a rank of several settles as its calls do (Engine.settle:
        simulated time brought up to the thread's clock) before it touches shared state: a
        record once (its enqueue's host_op), a stream's wait_event twice (Host.wait_event's own,
        then its enqueue's), a record_stream and a handle's non-blocking wait once, a blocking
        sync never (blocking_op does not settle). The stream a sync names is made first, as the
        call's argument is. True: the thread waits (it takes up the same sync again)."""
        cdef int left = self.inj_settles[h]
        cdef int code = spec[0]
        if left < 0:  # (the sync begins)
            left = 0
            if code == R_RECORD or (code == R_WAIT and spec[2] is not None):
                self.stream(self.agent_rank[h], spec[2])
                left = 1 if code == R_RECORD else 2
            elif code == R_RECORD_STREAM or code == R_PUT:
                left = 1
            elif code == R_WAIT_HANDLE:
                target = self.fix_handle(h, spec)
                if target is not None and not self.fix_handle_blocks(target, spec[2]):
                    left = 1
        while left > 0:
            left -= 1
            if self.clock[h] > self.now:
                if self.clock[h] > self.max_time:
                    raise _Fallback()  # (the reference's TimeBoundExceeded)
                self.inj_settles[h] = left
                self.push(self.clock[h] - self.now, NORMAL, h)
                return True
        self.inj_settles[h] = -1
        return False

    cdef void place_syncs(self, FixSyncs syncs, list hosts) except *:
        """Where each host thread's fix syncs run (Engine._before_issue): before the action of
        its line index j, the syncs after the program's previous action, then those before this
        one; after its last action, those after it (the driver's end). Sets ``inj_before[h]``
        (by line index, the syncs before its action, or None), ``inj_post[h]`` (by line index,
        the syncs after the action before it, or None, run first, or earlier when the thread
        waits for another: Engine.flush_post_injections) and ``inj_end[h]`` (the syncs after the
        last action), for each thread ``h`` of ``hosts``; each line's place is in ``key_at``
        already (:func:`_by_lineno`, :meth:`key_line`).

        Each sync's place is an injection key, (host thread, kind, location, n): the n-th action
        of that kind from that location. Its line is found from the location's line number (an
        op log's lines each have a location of their own), its thread by the Agent's equality,
        hashed once per distinct object; a key that names no line of the run, or a thread that
        is not one of the run's, places nothing (as ``inject_fixes``' keys that no action meets).
        The syncs of one place keep the fixes' order (``fix_syncs``)."""
        cdef Py_ssize_t x, n, j, last, count = len(syncs.specs)
        cdef int h
        cdef list lst
        for h in hosts:
            n = (<_RowList>self.host_lines[h]).n
            self.inj_before[h], self.inj_post[h], self.inj_end[h] = [None] * n, [None] * n, ()
        cdef dict host_by_id = {}  # id(an Agent object of the places) -> its thread, or -1
        cdef list places = syncs.places, specs = syncs.specs
        cdef const unsigned char *post = syncs.posts
        for x in range(count):
            place = places[x]
            if len(<tuple>place) != 4:
                continue
            ag = place[0]
            got = host_by_id.get(id(ag))
            if got is None:  # (hashing the Agent dataclass per sync was most of the work)
                got = host_by_id[id(ag)] = self.host_of.get(ag, -1)
            h = got
            if h < 0:
                continue
            n = self.place_line(h, place[1], place[2], place[3])
            if n < 0:
                continue
            j = self.key_at[2 * n + 1]
            spec = specs[x]
            if post[x]:  # (after the action at j: before line j + 1's own, or at the end)
                last = (<_RowList>self.host_lines[h]).n - 1
                if j == last:
                    self.inj_end[h] = <tuple>self.inj_end[h] + (spec,)
                    continue
                lst, j = <list>self.inj_post[h], j + 1
            else:
                lst = <list>self.inj_before[h]
            have = lst[j]
            lst[j] = (spec,) if have is None else <tuple>have + (spec,)

    cdef Py_ssize_t key_line(self, int h, object key) except -2:
        """The number of host ``h``'s line that injection key ``key`` (kind, location, n)
        names (:meth:`place_line`); -1: none."""
        if type(key) is not tuple or len(<tuple>key) != 3:
            return -1
        kind, loc, k = key
        return self.place_line(h, kind, loc, k)

    cdef Py_ssize_t place_line(self, int h, object kind, object loc, object k) except -2:
        """The number of host ``h``'s line that the place (kind, location ``loc``, n ``k``)
        names: the n-th line of that kind at that location, as the reference's dict compares
        its key; -1: none. A line's location is its log's path and its number
        (``schema.Line.location``: ``f"{path}:{lineno}"``), so a location names one line at
        most, found by its number, then compared whole without being made."""
        if self.key_at == NULL or type(loc) is not str:
            return -1  # (key_at: a run with fixes)
        cdef Py_ssize_t colon = (<str>loc).rfind(":")
        if colon < 0:
            return -1
        cdef Py_ssize_t n = line_number_at(<str>loc, colon + 1, self.nlineno)
        if n < 0:
            return -1
        if self.key_at[2 * n] != h:  # (no line of that number, or another thread's)
            return -1
        ln = self.ln_at(n)
        path = _l(ln, L_PATH)
        if type(path) is not str:
            path = f"{path}"
        if len(<str>path) != colon or not (<str>loc).startswith(<str>path):
            return -1
        if not (k == 0 and _l(ln, L_OP) == kind):
            return -1
        return n

    cdef object fix_handle(self, int h, tuple spec):
        """The comm op whose handle a fix's wait (R_WAIT_HANDLE) waits: the one its keyed
        action issued; None when that action was not issued (yet): nothing to wait."""
        cdef int lineno = self.handle_line(h, spec)
        return self.works.get(lineno) if lineno >= 0 else None

    cdef int handle_line(self, int h, tuple spec) except -2:
        """The line of the action a fix's handle wait names (its key: on this thread, or on
        the thread the spec names); -1: none of its thread's lines."""
        got = h if spec[3] is None else self.host_of.get(spec[3])
        if got is None:
            raise _Fallback()  # (no such thread: the reference's error)
        return self.key_line(got, spec[1])

    cdef bint fix_handle_blocks(self, object target, object stream) except -1:
        """Host.wait_work's choice for a fix's wait on ``target``'s handle: the host blocks (a
        wait with no stream, gloo's, a group's ``blocking_wait``, a barrier's), else ``stream``
        waits (an enqueued wait)."""
        cfg = self.opgroup[<int>target]
        return stream is None or cfg.backend == "gloo" or cfg.blocking_wait or \
            _l(self.ln_at(self.lineof[<int>target]), L_OP) == "barrier"

    cdef bint inject(self, int h, tuple spec, LRef ln, str current) except -1:
        """One of a fix's syncs (streamsim/sim/inject.py), issued as the line ``ln`` is (its
        location, step and clock; no label of its own); True when it blocks."""
        cdef int op, code = spec[0], rank = self.agent_rank[h]
        cdef int line = ln.row.lineno
        name, stream = spec[1], spec[2]
        if code == R_RECORD:  # ev.record(host.stream(stream))
            self.stream(rank, stream)
            op = self.enqueue(h, stream, K_RECORD, 0.0, line, ln, 0, (), True, current)
            self.mark_special(op - 1, spec)  # (its issuing host action and the record itself,
            self.mark_special(op, spec)  # whose attrs name the event as it is made: record())
            self.fix_recorded(spec[3], rank, op)
            if not self.is_taken(self.fix_sig + spec[3]):  # (recorded.succeed(): a wait on
                self.take(self.fix_sig + spec[3])  # another thread goes on)
        elif code == R_WAIT and stream is not None:  # host.stream(stream).wait_event(ev)
            self.stream(rank, stream)
            rec = self.fix_record(rank, spec[4])
            op = self.enqueue(h, stream, K_WAIT_EVENT, 0.0, line, ln, 0,
                              () if rec is None else (rec,), True, current)
            self.mark_special(op - 1, spec)
            self.mark_special(op, spec)  # (its attrs' "event" too: record())
            if rec is None:
                self.note_unrecorded(op, f"wait_event({name})", _location(ln), name)
        elif code == R_WAIT:  # ev.synchronize()
            blocked = self.block_sync(h, K_SYNC_EVENT, line, {})
            self.mark_special(self.cur[h], spec)
            return blocked
        elif code == R_WAIT_HANDLE:  # _wait_handle: its work.wait(), if it was issued
            target = self.fix_handle(h, spec)
            if target is None:
                if spec[3] is not None:  # (another thread's: waits_for_issue waited for it)
                    raise _Fallback()
                return False  # (that action was not issued yet: nothing to wait)
            waited_on = current if stream is None else stream
            self.barrier_last[h] = -1
            if _l(self.ln_at(self.lineof[<int>target]), L_OP) == "barrier" and \
                    self.opgroup[<int>target].backend != "gloo":
                self.barrier_last[h] = self.last[self.stream(rank, waited_on)]
            if self.fix_handle_blocks(target, stream):
                self.wait_target[h] = target
                blocked = self.block_sync(h, K_WAIT, line, {})
                self.mark_special(self.cur[h], ("wait", f"{self.ophandle[<int>target]}.wait()"))
                return blocked
            op = self.enqueue(h, waited_on, K_WAIT, 0.0, line, ln, 0,
                              self.workrecs.get(target, (target,)), True, waited_on)
            sp = ("wait", f"{self.ophandle[<int>target]}.wait()")
            self.mark_special(op - 1, sp)
            self.mark_special(op, sp)
            a = self.own_attrs(op)
            a["handle"] = self.ophandle[<int>target]
            a["blocking"] = False
        elif code == R_PUT:  # _handoff's host.put(channel, name=f"put({channel})")
            op = self.host_op(h, K_PUT, 0.0, line, ln, 0, True)
            self.mark_special(op, spec)
            self.put(h, op, name)
        elif code == R_GET:  # host.get(channel): blocks until its put (H_CLOCKED)
            blocked = self.block_sync(h, K_GET, line, {})
            self.mark_special(self.cur[h], spec)
            return blocked
        else:  # R_RECORD_STREAM: host.record_stream(Buffer(rank, buffer, 0), stream)
            if is_comm(stream):
                raise _Fallback()
            op = self.host_op(h, K_RECORD_STREAM, 0.0, line, ln, 0, True)
            self.mark_special(op, spec)
            a = self.own_attrs(op)
            a["buffer"] = name
            a["stream"] = stream
            self.recorded.setdefault((rank, name), []).append(stream)
        return False

    cdef void fix_recorded(self, object i, int rank, int op) except *:
        """Fix ``i``'s record is op ``op``, on ``rank`` (inject.py keeps its Event by (rank,
        name), its name ``fix<i>``: one a fix)."""
        cdef Py_ssize_t k = i
        if not 0 <= k < self.nfixes:
            raise _Fallback()
        self.fix_rec[2 * k] = op
        self.fix_rec[2 * k + 1] = rank

    cdef object fix_record(self, int rank, object i):
        """The op of fix ``i``'s record on ``rank`` (a wait looks its Event up by (rank, name));
        None: not recorded (yet), or on another rank."""
        cdef Py_ssize_t k = i
        if not 0 <= k < self.nfixes:
            raise _Fallback()
        if self.fix_rec[2 * k] < 0 or self.fix_rec[2 * k + 1] != rank:
            return None
        return self.fix_rec[2 * k]

    cdef void mark_special(self, int op, tuple sp) except *:
        """Op ``op`` is a fix's sync, ``sp``: its spec (``fix_syncs``: the op's kind and name
        made of it when the op is made, :func:`_special_kind`, :func:`_special_name`), or its
        ``(kind, name)`` (a handle's wait, named by the handle it found)."""
        if self.special is None:
            self.special = [None] * self.capops
        self.special[op] = sp

    cdef list rank_streams(self, int rank):
        """The rank's streams in the order of their agents (Engine: sorted(e.streams))."""
        got = sorted([(self.agent_name[s], s) for s in self.stream_at.values()
                      if self.agent_rank[s] == rank and
                      not self.agent_name[s].startswith("gloo:")])
        return [s for _, s in got]

    cdef void note_unrecorded(self, int op, str name, str location, str event) except *:
        self.notes.append(Note("event-never-recorded", f"{name} at {location}: event "
                               f"{event!r} was never recorded, so the wait orders nothing", op))

    # -- a stream's loop (Engine._stream_loop) --------------------------------------------------
    cdef void stream_go(self, int s) except *:
        cdef int op, j, d, kind, deps_at
        cdef double dur
        cdef int st
        while True:
            st = self.state[s]
            if st == S_TOP:
                if self.pos[s] >= self.qlen[s]:
                    self.wake[s] = 1
                    return
                op = self.queue[s][self.pos[s]]
                self.pos[s] += 1
                self.cur[s] = op
                self.depj[s] = 0
                self.state[s] = S_ENQUEUED
                if self.enq[op] > self.now:
                    self.push(self.enq[op] - self.now, NORMAL, s)
                    return
            elif st == S_ENQUEUED or st == S_DEP:
                op = self.cur[s]
                deps_at = self.aft_at[op]
                j = self.depj[s]
                if st == S_DEP:
                    j += 1
                while j < self.acc_pool[deps_at]:
                    d = self.acc_pool[deps_at + 1 + j]
                    if self.eseq[d] < 0:
                        self.depj[s] = j
                        self.state[s] = S_DEP
                        self.wait_for(d, s)
                        return
                    j += 1
                kind = self.kinds[op]
                if (kind == K_ISEND or kind == K_IRECV) and "batch" in self.attrs_of(op):
                    if self.batch_go(s, op, S_TOP):
                        return
                    continue
                if kind == K_ISEND or kind == K_IRECV or kind == K_COLLECTIVE or \
                        kind == K_ISEND_OBJECT:
                    self.start[op] = self.now  # (Engine.mark_start)
                    self.sseq[op] = self.seq
                    self.seq += 1
                    if self.comm_go(s, op, K_ISEND if kind == K_ISEND_OBJECT else kind):
                        return
                    continue
                dur = self.end[op]
                self.start[op] = self.now
                self.sseq[op] = self.seq
                self.seq += 1
                if dur > 0:
                    self.state[s] = S_RUNNING
                    self.push(dur, NORMAL, s)
                    return
                self.end[op] = self.start[op]
                self.finish(s, op)
            elif st == S_RUNNING:
                op = self.cur[s]
                self.end[op] = self.start[op] + self.end[op]
                self.finish(s, op)
            elif st == S_BATCH_ENQUEUED or st == S_BATCH_DEP or st == S_BATCH:
                if self.batch_go(s, self.cur[s], st):
                    return
            else:  # a comm op, resumed
                op = self.cur[s]
                if st == S_RENDEZVOUS or st == S_JOINING:
                    self.transfer_from(op, self.now)
                if self.comm_go(s, op, st):
                    return

    cdef bint comm_go(self, int s, int op, int at) except -1:
        """A comm op on its stream (streamsim/sim/comm.py, ``_run_p2p``, ``_run_collective``),
        from ``at``: its kind (it has just started) or the state it was resumed in. True when it
        waits (for its peer, its data, the group, or its duration)."""
        cdef int m, w, c, x
        cdef double dur, longest
        if at == K_ISEND:  # (an isend or an isend_object: gloo's tensor send is a rendezvous)
            m = self.opmatch[op]
            cfg = self.opgroup[op]
            if (self.attrs_of(op)["nbytes"] > cfg.eager_bytes or (
                    self.kinds[op] == K_ISEND and cfg.backend == "gloo")) and \
                    not self.m_started[m]:
                self.m_started_waiter[m] = s  # (a rendezvous: waits for the receive to start)
                self.state[s] = S_RENDEZVOUS
                return True
            at = S_RENDEZVOUS
        if at == S_RENDEZVOUS:
            dur = self.end[op]
            if dur > 0:
                self.state[s] = S_SENDING
                self.push(dur, NORMAL, s)
                return True
            at = S_SENDING
        if at == S_SENDING:  # Engine.mark_end, then the data has arrived
            m = self.opmatch[op]
            self.mark_end(op)
            self.arrived(m)
            self.next_op(s)
            return False
        if at == K_IRECV:
            m = self.opmatch[op]
            self.started(m)
            if not self.m_arrived[m]:
                self.m_arrived_waiter[m] = s
                self.state[s] = S_RECEIVING
                return True
            at = S_RECEIVING
        if at == S_RECEIVING:
            m = self.opmatch[op]
            x = self.m_send[m]
            self.opjoins[op] = (x,)
            self.transfer_from(op, self.attrs_of(x).get(_TRANSFER_START, self.start[x]))
            self.mark_end(op)
            self.next_op(s)
            return False
        if at == K_COLLECTIVE:
            c = self.opmatch[op]
            members = self.c_members[c]
            if members:  # (the k-th collective of the group: the same op, the same root)
                first = _l(self.ln_at(self.lineof[<int>members[0]]), L_OP)
                mine = _l(self.ln_at(self.lineof[op]), L_OP)
                if (first in _MATCHED or mine in _MATCHED) and (first, self.attrs_of(
                        <int>members[0]).get("root")) != (mine, self.attrs_of(op).get("root")):
                    raise _Fallback()  # (the reference's ModelError says which)
            members.append(op)
            if len(members) == self.c_expected[c]:
                longest = self.end[<int>members[0]]
                for x in members:
                    if self.end[x] > longest:
                        longest = self.end[x]
                self.c_end[c] = self.now + longest
                self.c_started[c] = True
                for w in self.c_waiters[c]:  # (one event, its callbacks in order)
                    self.push(0.0, NORMAL, w)
                self.c_waiters[c] = []
            else:
                self.c_waiters[c].append(s)
                self.state[s] = S_JOINING
                return True
            at = S_JOINING
        if at == S_JOINING:
            c = self.opmatch[op]
            if self.c_end[c] > self.now:
                self.state[s] = S_REDUCING
                self.push(self.c_end[c] - self.now, NORMAL, s)
                return True
            at = S_REDUCING
        # S_REDUCING: the collective ends (streamsim.sim.comm.joined_members)
        c = self.opmatch[op]
        kind_name = _l(self.ln_at(self.lineof[op]), L_OP)
        if kind_name in _TO_ROOT or kind_name == "scatter":
            root = self.attrs_of(op)["root"]
            if self.agent_rank[self.agent[op]] == root:
                joins = [x for x in self.c_members[c] if x != op] if kind_name in _TO_ROOT \
                    else []
            else:
                joins = [] if kind_name in _TO_ROOT else \
                    [x for x in self.c_members[c] if self.agent_rank[self.agent[<int>x]] == root]
        else:
            joins = [x for x in self.c_members[c] if x != op]
        self.opjoins[op] = tuple(joins)
        self.mark_end(op)
        self.next_op(s)
        return False

    cdef bint batch_go(self, int s, int first, int at) except -1:
        """CommMixin._run_batch from ``at`` (S_TOP: its first op off the queue, its enqueue
        time and dependencies waited for): its other ops taken off the queue, the latest enqueue
        time and their dependencies waited for, then each op run by a lane of its own (a process
        each, started together), the stream going on when every lane has ended. True when the
        stream waits."""
        cdef int i, j, d, op, n, lane, deps_at
        cdef double latest
        if at == S_TOP:
            n = self.attrs_of(first)["batch_size"]
            members = [first]
            while len(members) < n:
                if self.pos[s] >= self.qlen[s]:
                    raise _Fallback()  # (its ops not all enqueued: another thread's, the engine's)
                op = self.queue[s][self.pos[s]]
                if self.attrs_of(op).get("batch") != self.attrs_of(first)["batch"]:
                    raise _Fallback()  # (the reference's ModelError)
                self.pos[s] += 1
                members.append(op)
            self.batch_of[s] = [members, 1, 0]
            latest = self.enq[<int>members[0]]
            for op in members:
                if self.enq[op] > latest:
                    latest = self.enq[op]
            if latest > self.now:
                self.state[s] = S_BATCH_ENQUEUED
                self.push(latest - self.now, NORMAL, s)
                return True
            at = S_BATCH_ENQUEUED
        state = self.batch_of[s]
        members = state[0]
        if at == S_BATCH_DEP:
            state[2] += 1
        if at == S_BATCH_ENQUEUED or at == S_BATCH_DEP:
            i, j = state[1], state[2]
            while i < len(members):  # (the loop already waited for the first's)
                deps_at = self.aft_at[<int>members[i]]
                while j < self.acc_pool[deps_at]:
                    d = self.acc_pool[deps_at + 1 + j]
                    if self.eseq[d] < 0:
                        state[1], state[2] = i, j
                        self.state[s] = S_BATCH_DEP
                        self.wait_for(d, s)
                        return True
                    j += 1
                i += 1
                j = 0
            for op in members:  # env.all_of([env.process(_run_p2p(lane, op)) ...])
                lane = self._new_agent(self.agent_rank[s], self.agent_name[s], False)
                self.cur[lane] = op
                self.lane_parent[lane] = s
                self.push(0.0, URGENT, lane)
            self.lanes_left[s] = len(members)
            self.state[s] = S_BATCH
            return True
        # S_BATCH: every lane ended
        del self.batch_of[s]
        self.next_op(s)
        return False

    cdef void lane_go(self, int lane) except *:
        """A batch member's lane (CommMixin._run_p2p as a process of its own): started, resumed,
        or ended (the batch's AllOf counts it; the last one resumes the stream)."""
        cdef int op = self.cur[lane], s
        cdef int st = self.state[lane]
        if st == L_ENDED:
            s = self.lane_parent.pop(lane)
            self.state[lane] = S_TOP
            self.lanes_left[s] -= 1
            if self.lanes_left[s] == 0:
                self.push(0.0, NORMAL, s)
            return
        if st == S_TOP:  # its start (Engine.mark_start)
            self.start[op] = self.now
            self.sseq[op] = self.seq
            self.seq += 1
            self.comm_go(lane, op, self.kinds[op])
            return
        if st == S_RENDEZVOUS:
            self.transfer_from(op, self.now)
        self.comm_go(lane, op, st)

    cdef void mark_end(self, int op) except *:
        """Engine.mark_end of a comm op at the time now (its waiters wake)."""
        self.end[op] = self.now
        self.eseq[op] = self.seq
        self.seq += 1
        self.ended(op)

    cdef void transfer_from(self, int op, double t) except *:
        """comm._transfer_from: the op waited for its peers and transferred only from ``t``."""
        if t > self.start[op]:
            self.own_attrs(op)[_TRANSFER_START] = t

    cdef void unmatched_notes(self) except *:
        """CommMixin.unmatched_notes: each send no receive matched (in key order)."""
        for key in sorted(self.p2p_at):
            m = self.p2p_at[key]
            x = self.m_send[m]
            if x >= 0 and self.m_recv[m] < 0:
                group, src, dst, k = key
                self.notes.append(Note("unmatched-send", f"send #{k} from rank{src} to rank{dst} "
                                       f"on group {group!r} ({_l(self.ln_at(self.lineof[x]), L_NAME)}) "
                                       "has no matching receive", x))

    cdef void finish(self, int s, int op) except *:
        self.eseq[op] = self.seq
        self.seq += 1
        self.ended(op)
        self.next_op(s)

    cdef void next_op(self, int s) except *:
        """Back to the top of the stream's loop (its op ended); a batch's lane ends instead
        (its process's end, which the batch's condition counts when it is processed)."""
        if self.lane_parent and s in self.lane_parent:
            self.state[s] = L_ENDED
            self.push(0.0, NORMAL, s)
            return
        self.state[s] = S_TOP
        if self.pos[s] > 4096 and 2 * self.pos[s] > self.qlen[s]:  # (drop what ran)
            self.compact(s)

    cdef void compact(self, int s) except *:
        cdef int k, n = self.qlen[s] - self.pos[s]
        cdef int* q = self.queue[s]
        for k in range(n):
            q[k] = q[self.pos[s] + k]
        self.qlen[s] = n
        self.pos[s] = 0

    cdef object passed(self, str bound, int h, bint in_call):
        """What to raise where the reference raises ``bound``'s error: a :class:`BoundPassed` of
        host thread ``h`` (-1: the run's next event), of the line its program is at when
        ``in_call`` (inside the line's call: replay._Replay.program names that line; before
        it, or in the run's loop, the caller names the file alone). A re-run with a fix's syncs,
        or an op made outside a host's program, is the reference's to word (_Fallback): its syncs
        run in places its line does not name (after a thread's last line, before a wait)."""
        if self.injecting or h < 0 and bound == "max_ops":
            return _Fallback()
        from streamsim.native import BoundPassed  # (the caller's too: a rare path)
        lineno = None
        if in_call:
            lineno = self.rows.ref((<_RowList>self.host_lines[h]).a[self.pos[h]]).row.lineno
        return BoundPassed(bound, lineno, None if bound == "max_ops" or h < 0 else
                           self.agent_obj[h])

    # -- the run (Engine._run) ------------------------------------------------------------------
    cdef run(self):
        cdef Entry e
        cdef int h
        while self.nheap > 0:
            if self.heap[0].t > self.max_time:
                raise self.passed("max_time", -1, False)
            e = self.pop()
            self.now = e.t
            if e.proc < 0:  # a line's Signal set: its waiters resume, in order, in one step
                for h in self.sig_waiters.pop(-1 - e.proc):
                    if self.now > self.clock[h]:
                        self.clock[h] = self.now  # (Engine.block, after the switch back)
                    self.going = h
                    if self.host_go(h):
                        self.state[h] = H_DONE
                    self.going = -1
            elif self.is_host[e.proc]:
                if self.now > self.clock[e.proc]:  # (Engine.block; a start is at 0, no later)
                    self.clock[e.proc] = self.now
                self.going = e.proc
                if self.host_go(e.proc):
                    self.state[e.proc] = H_DONE
                self.going = -1
            elif self.lane_parent and e.proc in self.lane_parent:
                self.lane_go(e.proc)
            else:
                self.stream_go(e.proc)
        for a in range(self.nag):
            if self.is_host[a] and self.state[a] != H_DONE:
                raise _Fallback()  # (a host still blocked: the reference's stall)
            if not self.is_host[a] and self.state[a] != S_TOP and self.state[a] != L_ENDED:
                raise _Fallback()

    cdef tuple kept_line(self, int lo):
        """What the ops of line ``lo`` read of it: ``(op, name, location, step, lineno, event)``, from
        what is kept once the lines are let go (:meth:`release`), else from its row."""
        cdef int *at
        cdef PyObject **vals
        if self.kept != NULL:
            if lo >= self.nkept or self.kept[lo] == 0:
                raise _Fallback()  # (no op of that line: none reads it)
            at = self.combos + self.kept[lo] * KEPT_FIELDS
            vals = PySequence_Fast_ITEMS(self.kept_vals)
            return (<object>vals[at[KEPT_OP]], <object>vals[at[KEPT_NAME]],
                    f"{<object>vals[at[KEPT_PATH]]}:{lo}", <object>vals[at[KEPT_STEP]], lo,
                    <object>vals[at[KEPT_EVENT]])
        ln = self.ln_at(lo)
        return (_l(ln, L_OP), _l(ln, L_NAME), _location(ln), _l(ln, L_STEP),
                ln.row.lineno, _l(ln, L_EVENT))

    cdef list records(self):
        """The ops of the run: the engine's records (``Rec``) as the reference leaves them, made
        ``Op`` s as its ``build_trace`` makes them (``after`` and ``joins`` are tuples of op ids
        here already). A run that left sequence positions unused (which the reference's
        ``build_trace`` renumbers, and no covered log does: test_replay) is left to the
        reference."""
        cdef int i, lo, last_lo = -1
        if self.seq_holes:
            raise _Fallback()
        out = []
        # Objects shared as the engine's are: an op id's int, one object wherever it is named
        # (the op's id, an issuer, an after or joins entry), and equal recent times one float
        # (an op's end, the next one's start, the enqueued time of what it issued): ~80 bytes
        # a line less than an object each (docs/native.md); an op's index and sequence
        # positions are ints of that range too, shared likewise (and most attrs: own_attrs)
        cdef Py_ssize_t nids = max(self.nops, self.seq)
        cdef list ids = list(range(nids))
        cdef list floats = [None] * FLOAT_CACHE
        cdef tuple ln = None
        cdef int *counts = <int *>calloc(self.agents_named() + 1, sizeof(int))  # (Op.index)
        if counts == NULL:
            raise MemoryError()
        try:
            for i in range(self.nops):
                lo = self.lineof[i]
                if ln is None or lo != last_lo:  # (an action and the op it enqueued: one line,
                    ln = self.kept_line(lo)  # looked up once)
                    last_lo = lo
                out.append(self.record(i, ids, nids, floats, ln, counts[self.agent[i]]))
                counts[self.agent[i]] += 1
        finally:
            free(counts)
        return out

    cdef int agents_named(self) noexcept:
        """How many agent numbers the ops' ``agent`` names: past the greatest (the run's own
        numbering, or once :meth:`columns` wrote it over, the places of the trace's agents)."""
        cdef int i, m = 0
        for i in range(self.nops):
            if self.agent[i] >= m:
                m = self.agent[i] + 1
        return m

    cdef int index_of(self, int i) except -1:
        """Op ``i``'s index among its agent's ops (``Op.index``; the engine's count of them when
        it was made, in id order): counted from the checkpoint before it (``idx_ck``: each
        agent's count at every ``ck_every``-th op, made on first use, a few KB; an array of an
        int an op until the thirtieth session, 8 MB at 1,000,000 lines of the random
        program)."""
        cdef int j, a, b, k, m, every
        cdef Py_ssize_t nb
        cdef int *counts
        if self.idx_ck == NULL:
            m = self.agents_named()
            every = max(4096, 64 * m)  # (the table: at most an int every 64 ops)
            nb = self.nops // every + 1
            self.idx_ck = <int *>malloc((nb * m + 1) * sizeof(int))
            counts = <int *>calloc(m + 1, sizeof(int))
            if self.idx_ck == NULL or counts == NULL:
                free(counts)
                free(self.idx_ck)
                self.idx_ck = NULL
                raise MemoryError()
            for j in range(self.nops):
                if j % every == 0:  # (each agent's ops before op j)
                    memcpy(self.idx_ck + (j // every) * m, counts, m * sizeof(int))
                counts[self.agent[j]] += 1
            free(counts)
            self.ck_nag, self.ck_every = m, every
        a = self.agent[i]
        b = i // self.ck_every
        k = self.idx_ck[b * self.ck_nag + a]
        for j in range(b * self.ck_every, i):
            if self.agent[j] == a:
                k += 1
        return k

    cdef inline object record(self, int i, list ids, Py_ssize_t nids, list floats, tuple ln,
                              int index):
        """Op ``i`` of :meth:`records` (``ln``: what it reads of its line, :meth:`kept_line`;
        ``index``: its index among its agent's ops; ``ids``: the id objects it shares, or None;
        ``floats``: the cache of the floats it shares)."""
        cdef int iss
        r = new_record(<type>Op)  # (every slot is set below, in order; frozen once made)
        special, opjoins, ophandle, opstep = self.special, self.opjoins, self.ophandle, self.opstep
        sp = special[i] if special is not None else None
        _put(r, F_ID, _id(ids, nids, i))
        _put(r, F_AGENT, self.agent_obj[self.agent[i]])
        _put(r, F_INDEX, _id(ids, nids, index))
        _put(r, F_KIND, ln[0] if sp is None else _special_kind(sp))
        _put(r, F_NAME, ln[1] if sp is None else _special_name(sp))
        _put(r, F_ENQUEUED, _shared_float(floats, self.enq_of(i)))
        _put(r, F_START, _shared_float(floats, self.start[i]))
        _put(r, F_END, _shared_float(floats, self.end[i]))
        _put(r, F_START_SEQ, _id(ids, nids, self.sseq[i]))
        _put(r, F_END_SEQ, _id(ids, nids, self.eseq[i]))
        _put(r, F_ACCESSES, self.accesses_of(i))
        iss = self.issuer[i]
        _put(r, F_ISSUER, _id(ids, nids, iss) if iss >= 0 else None)
        _put(r, F_AFTER, _ids(ids, self.after_of(i)))
        _put(r, F_JOINS, _ids(ids, opjoins.get(i, ())) if opjoins else ())
        _put(r, F_LOCATION, ln[2])
        _put(r, F_STEP, ln[3] if not opstep or i not in opstep else opstep[i])
        _put(r, F_LINE, ln[4] if sp is None else None)
        _put(r, F_HANDLE, ophandle.get(i) if ophandle else None)
        attrs = self.attrs_of(i)
        if self.is_host[self.agent[i]]:
            if attrs is self.from_line:
                attrs = self.line_attrs(self.lineof[i])
        elif sp is not None:
            attrs = _sync_attrs(attrs, sp)
        elif ln[5] is not None and (ln[0] == "record" or ln[0] == "wait_event"):
            attrs = dict(<dict>attrs)  # (an event's record or wait names its event: added as
            attrs["event"] = ln[5]  # the op is made, not a dict of its own an op as it ran)
        _put(r, F_ATTRS, attrs)
        return r

    cdef Columns columns(self):
        """The ops of the run as columns (``_cols.pxd``), for fix costing's compiled measures:
        the same fields :meth:`records` gives each ``Op``, without making one. Left to the
        reference as :meth:`records` is (sequence positions unused). The agents are the trace's
        set of them, in order: a batch member's lane (an agent of this replay, equal to its
        stream's, with no op of its own) is its stream's; two equal agents that both have ops
        are left to the reference too."""
        if self.seq_holes:
            raise _Fallback()
        self.compact_enq()  # (first: what it frees, the columns' arrays take)
        cdef int n = self.nops, i, a, lo, k = -1
        cdef list order = sorted(range(self.nag), key=self.agent_obj.__getitem__)
        cdef list distinct = []
        cdef int *place = <int*>malloc((self.nag + 1) * sizeof(int))
        if place == NULL:
            raise MemoryError()
        cdef bint with_ops = False  # (an agent equal to the k-th has ops)
        for i in range(self.nag):
            a = order[i]
            if k >= 0 and self.agent_obj[a] == distinct[k]:
                if self.count[a] and with_ops:
                    free(place)
                    raise _Fallback()
            else:
                distinct.append(self.agent_obj[a])
                k += 1
                with_ops = False
            with_ops = with_ops or self.count[a] > 0
            place[a] = k
        cdef tuple agents = tuple(distinct)
        special = self.special
        cdef Columns c = Columns.__new__(Columns)
        c.run = self
        c.agents = agents
        c.c.n = n
        c.c.issuer, c.c.start, c.c.end = self.issuer, self.start, self.end
        free(self.idx_ck)  # (counted by the agents' numbers, which are written over below)
        self.idx_ck = NULL
        # An op's agent: its place in ``agents``, written over the run's own numbering (the
        # ops made after, records(), read the agents and their roles by place too); its line:
        # the run's own where no op is a fix's sync (whose line is 0 here: OpCols.line).
        # Arrays of their own were 8 bytes an op.
        cdef char *hosts = <char*>malloc(len(distinct) + 1)
        if hosts == NULL:
            free(place)
            raise MemoryError()
        for a in range(self.nag):
            hosts[place[a]] = self.is_host[a]
        for i in range(n):
            self.agent[i] = place[self.agent[i]]
        free(place)
        free(self.is_host)
        self.is_host = hosts
        self.agent_obj = distinct
        self.nag = len(distinct)  # (the per-agent state kept past the run, numbered so too;
        # the schedule's was let go: release_schedule)
        c.c.agent = self.agent
        if special is None:
            c.c.line = self.lineof
        else:
            c.own_line = True
            c.c.line = <int*>malloc((n + 1) * sizeof(int))
            if c.c.line == NULL:
                raise MemoryError()
        c.c.kcode = <unsigned char*>malloc(n + 1)
        if c.c.kcode == NULL:
            raise MemoryError()
        c.c.path = NULL
        c.c.step = NULL  # (made once two ops' steps differ: col_step)
        c.c.step_one = NULL
        # an op's attrs: the run's ints, and the items of its list of dicts, to which nothing
        # is added once the columns are made (attrs_frozen); its accesses and after edges: the
        # run's ints, and the items of its list of Access objects
        self.attrs_frozen = True
        c.c.attr_at, c.c.attr_objs = self.attr_at, PySequence_Fast_ITEMS(self.attr_objs)
        c.c.acc_at, c.c.acc_pool, c.c.aft_at = self.acc_at, self.acc_pool, self.aft_at
        c.c.acc_objs = PySequence_Fast_ITEMS(self.acc_objs)
        c.c.joins = c.objects(n) if self.opjoins else NULL  # (none: col_joins)
        c.c.no_joins = <PyObject *>_NO_JOINS
        c.c.readable = not self.odd_view  # (every access made here: access(), an alloc's)
        cdef double end_time = 0.0
        opjoins, opstep = self.opjoins, self.opstep
        cdef LRef ln
        ln.row = NULL
        cdef int last_lo = -1
        cdef PyObject *path
        cdef PyObject *kind
        cdef PyObject *step
        cdef PyObject *last_kind = NULL
        cdef int code = 0
        kinds = []  # (each distinct kind once, by value: the objects c.kcode names)
        codes = {}
        cdef bint one_path = True  # (every line of the log's one path object: OpCols.path)
        self.new_kept()  # (what release_lines() keeps of the lines, kept as they are read here)
        for i in range(n):
            lo = self.lineof[i]
            if ln.row == NULL or lo != last_lo:  # (as records(): an action and its op, one line)
                ln = self.ln_at(lo)
                last_lo = lo
                if self.kept[lo] == 0:
                    self.keep_line(lo, ln)
                path = ln.vals[ln.row.o[RO_PATH]]
                if c.c.path == NULL:
                    c.c.path = path
                elif path != c.c.path:
                    one_path = False
            sp = special[i] if special is not None else None
            if sp is None:
                kind = ln.vals[ln.row.o[RO_OP]]
                if c.own_line:
                    c.c.line[i] = lo
            else:
                x = _special_kind(sp)  # (a constant of this module, or sp's own: it lives)
                kind = <PyObject *>x
                c.c.line[i] = 0
            if opstep and i in opstep:
                x = opstep[i]  # (each borrowed from what holds it: the run's dicts and lists)
                step = <PyObject *>x
            else:
                step = ln.vals[ln.row.o[RO_STEP]]
            if kind == NULL:
                raise _Fallback()  # (not reached: a row's fields are all set, _lines.pxd)
            if kind != last_kind:  # (the kind objects of a log are few: one lookup a change)
                got = codes.get(<object>kind)
                if got is None:
                    got = codes[<object>kind] = len(kinds)
                    if <int>got > 255:
                        raise _Fallback()  # (not reached: a log has a few dozen kinds)
                    kinds.append(<object>kind)
                code, last_kind = got, kind
            c.c.kcode[i] = code
            if i == 0:
                c.c.step_one = step
            elif c.c.step != NULL:
                c.c.step[i] = step
            elif step != c.c.step_one:  # (the first step that differs: every op's from now)
                c.c.step = c.objects(n)
                for k in range(i):
                    c.c.step[k] = c.c.step_one
                c.c.step[i] = step
            if c.c.joins != NULL:
                x = opjoins[i] if i in opjoins else _NO_JOINS
                c.c.joins[i] = <PyObject *>x
            if i == 0 or self.end[i] > end_time:  # (max(): the first of equal values)
                end_time = self.end[i]
        c.end_time = end_time
        c.kinds_held = kinds  # (c.c.kinds: its items, which nothing appends to now)
        c.c.kinds = PySequence_Fast_ITEMS(kinds)
        if not one_path:
            c.c.path = NULL
        return c


cdef tuple _NO_JOINS = ()


@cython.final
cdef class _RowList:
    """A host thread's lines, in line order: their rows' places in the run's ``Rows``."""
    cdef int *a
    cdef int n

    def __dealloc__(self):
        free(self.a)


cdef int _by_lineno(_Run r, dict per_thread, bint *batched, int *key_at) except -1:
    """Each of the run's rows by its line number (``r.row_of``, ``r.nlineno``: 4 bytes a
    number up to the greatest), and each host thread's rows (``per_thread``: (rank, host) ->
    its :class:`_RowList`, every thread there: a line of another raises KeyError, as a lookup
    would, once every line is known to be numbered so). Lines numbered otherwise than a file
    numbers them, from 1 (a hand-built log: a number twice, below one or far past its lines;
    line 0 is the columns' None, _cols.pxd), are left to the reference (``_Fallback``), which
    reads no line by its number. ``batched``: set when some line is a batch's (else no
    thread's lines are looked at again for batches: :func:`_batches`); ``key_at`` (NULL: not
    wanted): room for two ints a number up to the bound, each line's thread (its place in
    ``per_thread``) and its index there, the rest -1 (``_Run.key_at``, whose thread numbers
    :func:`replay` then makes agents'). Two passes over the rows, in C: each line's thread
    and the count of each, then each thread's rows."""
    cdef Rows rows = r.rows
    cdef Py_ssize_t n = rows.n, bound = 2 * n + 1024, top = 0, k, i
    cdef int thread = -1, nthreads = len(per_thread)
    cdef int *thread_of = NULL
    cdef int *count = NULL
    cdef LRef ln
    cdef _RowList mine
    cdef dict place = {t: i for i, t in enumerate(per_thread)}
    cdef list lists = list(per_thread)
    last_rank = last_host = None
    r.row_of = <int *>malloc((bound + 1) * sizeof(int))
    thread_of = <int *>malloc((n + 1) * sizeof(int))
    count = <int *>calloc(nthreads + 1, sizeof(int))
    try:
        if r.row_of == NULL or thread_of == NULL or count == NULL:
            raise MemoryError()
        memset(r.row_of, 0xff, (bound + 1) * sizeof(int))  # (-1: no line's number)
        if key_at != NULL:
            memset(key_at, 0xff, 2 * (bound + 1) * sizeof(int))
        for i in range(n):
            ln = rows.ref(i)
            k = ln.row.lineno
            if k > bound or r.row_of[k] >= 0:
                raise _Fallback()
            r.row_of[k] = <int>i
            if k > top:
                top = k
            if not batched[0] and _lr(ln, R_BATCH) is not None:
                batched[0] = True
            rank, host = _l(ln, L_RANK), _l(ln, L_HOST)
            if rank is not last_rank or host is not last_host:  # (a thread's lines in runs)
                got = place.get((rank, host))
                if got is None:
                    raise KeyError((rank, host))
                thread = got
                last_rank, last_host = rank, host
            thread_of[i] = thread
            count[thread] += 1
        for thread in range(nthreads):
            mine = _RowList.__new__(_RowList)
            mine.a = <int *>malloc((count[thread] + 1) * sizeof(int))
            if mine.a == NULL:
                raise MemoryError()
            mine.n = 0
            per_thread[lists[thread]] = mine
            lists[thread] = mine
        for i in range(n):
            mine = <_RowList>lists[thread_of[i]]
            if key_at != NULL:
                k = rows.rows[i].lineno
                key_at[2 * k] = thread_of[i]
                key_at[2 * k + 1] = mine.n
            mine.a[mine.n] = <int>i
            mine.n += 1
    finally:
        free(thread_of)
        free(count)
    r.nlineno = top + 1
    return 0


cdef class Columns:
    """A run of the compiled replay as columns (``_cols.pxd``): what fix costing measures of a
    re-run without its ``Op`` objects. Holds the run (whose arrays, lines and lists the columns
    point into) until it is freed; :meth:`trace_parts` makes the ops after all, for a measure
    that declined (the reference then measures the trace)."""
    cdef _Run run
    cdef OpCols c
    cdef list held  # the pointer arrays the columns own
    cdef readonly tuple agents  # the trace's agents, sorted (``OpCols.agent`` indexes them)
    cdef readonly double end_time  # the trace's end_time: the latest end (0.0: no op)
    cdef list floats  # the float cache of the ops made alone (op), made at the first
    cdef list kinds_held  # the kinds OpCols.kinds points into
    cdef bint own_line  # c.line is this object's (else the run's lineof, as c.agent is its agent)

    def __dealloc__(self):
        if self.own_line:
            free(self.c.line)
        free(self.c.kcode)

    cdef PyObject **objects(self, int n) except NULL:
        """An array of n borrowed object pointers, freed with this object."""
        if self.held is None:
            self.held = []
        b = bytearray((n + 1) * sizeof(PyObject *))
        self.held.append(b)
        return <PyObject **><char *>b

    def __len__(self):
        return self.c.n

    @property
    def own_bytes(self) -> int:
        """The bytes of the arrays these columns hold of their own, beside the run's (whose
        arrays and lists they point into): a byte an op for its kind, and 8 bytes an op for
        each of the line, step and joins arrays made (a fix's sync among the ops; steps that
        differ; some op that joins). 0 once :meth:`trace_parts` let them go."""
        if self.c.kcode == NULL:
            return 0
        cdef Py_ssize_t n = self.c.n
        return n + sizeof(int) * n * self.own_line + sizeof(PyObject *) * n * (
            (self.c.step != NULL) + (self.c.joins != NULL))

    @property
    def enq_kept(self) -> int:
        """How many ops' enqueued times the run keeps as they are: those no rule gives
        (``_Run.compact_enq``; -1: all, the run's columns not made yet)."""
        return -1 if self.run.enq_rule == NULL else self.run.nenqx

    @property
    def attr_dicts(self) -> int:
        """How many attrs dicts the run holds for its ops, each once: the few most ops share
        (none; a current stream's), then each op's own (an op's attrs is its place among them:
        ``OpCols.attr_at``)."""
        return len(self.run.attr_objs)

    @property
    def kept_combinations(self) -> int:
        """How many distinct combinations of those values the run keeps (the first: none), each
        once (KEPT_FIELDS ints), where each line number has one int, its combination's number:
        0 before the run lets its lines go."""
        return 0 if self.run.combos == NULL else self.run.ncombos

    @property
    def kept_values(self) -> int:
        """How many objects the run keeps of its lines' values once it lets them go (None
        first): the kinds, names, paths, steps, events and sites its kept lines name, each once,
        not the rows' whole table (whose refs' tuples are about one a line)."""
        return 0 if self.run.kept_vals is None else len(self.run.kept_vals)

    @property
    def access_bytes(self) -> int:
        """The bytes the run holds of its ops' accesses, beside the ``Access`` objects: an int
        an op (its place in the pool), and an int a place's count and each access of it (ops on
        the same refs one after another share a place)."""
        return sizeof(int) * (self.c.n + self.run.npool)

    @property
    def accesses_readable(self) -> bool:
        """Whether the replay vouches for every op's accesses (``OpCols.readable``: each an
        ``Access`` of a ``View``, exactly), which a pass then reads without checking each."""
        return self.c.readable

    def capsule(self):
        """The columns for a compiled measure: a capsule of this object's ``OpCols`` (valid
        while this object lives; RuntimeError once :meth:`trace_parts` let them go)."""
        self.alive()
        return PyCapsule_New(&self.c, OPCOLS, NULL)

    cdef int alive(self) except -1:
        """RuntimeError once :meth:`trace_parts` let the columns go (a reader would find NULL)."""
        if self.c.kcode == NULL and self.c.n:
            raise RuntimeError("the columns were let go: the run's ops were made")
        return 0

    def trace_parts(self):
        """``(ops, notes, agents)`` as :func:`replay` returns them without ``lean``: the run's
        ``Op`` objects, made now. The columns' own arrays are let go first (the ops are made
        from the run, and a run whose ops are made is read from them: :attr:`own_bytes`):
        :meth:`op`, :meth:`unwaited_handles` and the capsule read none after it."""
        self.held = None
        if self.own_line:
            free(self.c.line)
        free(self.c.kcode)
        self.own_line = False
        self.c.agent = self.c.line = NULL
        self.c.kcode = NULL
        self.c.kinds = self.c.step = self.c.attr_objs = NULL
        self.c.attr_at = NULL
        self.c.step_one = self.c.no_joins = NULL
        self.kinds_held = None
        self.c.path = NULL
        self.c.aft_at = NULL
        self.c.joins = NULL
        self.c.kept = self.c.combos = NULL
        self.c.acc_at = self.c.acc_pool = NULL
        self.c.acc_objs = NULL
        self.c.handles = self.c.from_line = NULL
        self.c.kept_site = NULL
        self.c.kept_t = NULL
        self.c.kept_tnone = NULL
        self.c.kept_vals = NULL
        return self.run.records(), self.run.notes, set(self.run.agent_obj)

    def op(self, Py_ssize_t i):
        """Op ``i`` of the run (``trace_parts``' i-th, equal field for field), made alone: its
        ints its own rather than shared with the other ops', its times shared with the other
        ops made alone (IndexError: no such op)."""
        return self.ops_of((i,))[0]

    def ops_of(self, ids):
        """:meth:`op` of each of ``ids`` (ints), in one call: a report's named ops, made in a
        block rather than one Python call each (IndexError: no such op)."""
        if self.floats is None:  # (one cache for every op made alone: not 32 KB an op)
            self.floats = [None] * FLOAT_CACHE
        cdef list out = []
        cdef Py_ssize_t i
        for x in ids:
            i = x
            if not 0 <= i < self.c.n:
                raise IndexError(f"op {i} of {self.c.n}")
            out.append(self.run.record(i, None, 0, self.floats,
                                       self.run.kept_line(self.run.lineof[i]),
                                       self.run.index_of(<int>i)))
        return out

    def ids_of(self, str kind):
        """The ids of the run's ops of ``kind``, in order, read without making an op
        (``Trace.ops_of_kind``)."""
        self.alive()
        cdef Py_ssize_t i
        cdef list out = []
        for i in range(self.c.n):
            if <object>col_kind(&self.c, i) is kind or <object>col_kind(&self.c, i) == kind:
                out.append(i)
        return out

    @property
    def notes(self):
        """The run's notes (``trace_parts``' second), read without making an op."""
        return self.run.notes

    def unwaited_handles(self):
        """:func:`streamsim.analysis.liveness.unwaited_handles` of the run, read from the
        columns: the ids of its ops with a handle that no ``wait`` or ``query`` names among the
        ops it waited for (``after``, and a stall's ``waiting_for``, which a run the compiled
        replay keeps never has), in id order. A run with no handle reads no op."""
        ophandle = self.run.ophandle
        if not ophandle:
            return []
        self.alive()
        cdef Py_ssize_t i
        cdef int k
        waited = set()
        for i in range(self.c.n):
            kind = <object>col_kind(&self.c, i)
            if kind == "wait" or kind == "query":
                for k in range(col_naft(&self.c, i)):
                    waited.add(col_aft(&self.c, i, k))
                pending = (<object>col_attrs(&self.c, i)).get("waiting_for")
                if pending:
                    waited.update(pending)
        return [i for i in sorted(ophandle) if ophandle[i] is not None and i not in waited]


def replay(lines, threads, double launch_overhead, seed, double jitter, int max_ops,
           double max_time, rng, FixSyncs syncs=None, dict groups=None, dict gates=None,
           on_start=frozenset(), bint lean=False):
    """Replay ``lines`` (an OpLog's, every kind in :data:`KINDS`: the compiled reader's rows, or
    ``Line`` s, made rows here; ``threads`` its (rank, host thread)s in spawn order) as the
    reference does; returns ``(ops, notes, agents)`` for
    ``finish.trace_of`` (with ``lean``: the run's :class:`Columns`, no ``Op`` made, for fix
    costing's compiled measures), or None when the reference must run instead. ``rng``: the seeded
    ``random.Random`` the reference would make. ``syncs``: a fix costing re-run's syncs, each
    with the program action it is issued before or after (:func:`fix_syncs`, as
    streamsim/sim/inject.py registers them; the caller leaves any other fix to the reference);
    read, not changed. ``gates``: the line order between the threads of a rank of
    several threads (streamsim.oplog.issueorder.issue_gates: line -> the earlier lines of other
    threads it waits for); ``on_start``: the kinds of line taken as they start when another
    thread waits for them (replay._TAKEN_AS_THEY_START), the others once their call returns."""
    cdef _Run r = _Run()
    cdef int h
    cdef Py_ssize_t ix
    cdef Columns columns
    if type(lines) is Rows:  # (the compiled reader's; else Lines, made rows here)
        r.rows = <Rows>lines
    else:
        try:
            r.rows = _lines.rows_of(lines)
        except TypeError:  # (a Line a row does not hold as it is: _lines.pyx)
            return None
    per_thread = {t: None for t in threads}
    cdef bint batched = False
    r.injecting = syncs is not None and len(syncs.specs) > 0
    if r.injecting:  # (each line's place: its thread and index, filled in _by_lineno's pass)
        r.key_at = <int *>malloc(2 * (2 * r.rows.n + 1025) * sizeof(int))
        if r.key_at == NULL:
            raise MemoryError()
    try:
        _by_lineno(r, per_thread, &batched, r.key_at)
    except _Fallback:
        return None
    r.max_ops, r.max_time, r.jitter = max_ops, max_time, jitter
    r.going = -1
    r.launch_overhead = launch_overhead
    r.rng, r.rng_random = rng, rng.random
    r.agent_obj, r.agent_rank, r.agent_name = [], [], []
    r.host_lines, r.host_deps, r.host_after = [], [], []
    r.inj_before, r.inj_post, r.inj_end, r.host_specs = [], [], [], []
    r.inj_ret, r.inj_settles = [], []
    r.stream_at, r.events, r.freed, r.recorded = {}, {}, {}, {}
    r.special = None
    r.empty, r.of_stream, r.injected = {}, {}, {"injected": True}
    r.from_line, r.from_line_used = {}, False
    r.groups = groups or {}
    r.opgroup, r.opmatch, r.ophandle, r.opjoins, r.opdur = {}, {}, {}, {}, {}
    r.gloo_sends_waited = set()
    r.barrier_last, r.line_barrier = [], []
    r.batch_of, r.lanes_left, r.lane_parent, r.workrecs, r.opstep = {}, {}, {}, {}, {}
    r.host_batches, r.wait_target, r.host_kind = [], [], []
    r.p2p_at, r.p2p_issued, r.coll_at, r.coll_issued, r.works = {}, {}, {}, {}, {}
    r.m_send, r.m_recv, r.m_started, r.m_started_waiter = [], [], [], []
    r.m_arrived, r.m_arrived_waiter = [], []
    r.c_members, r.c_expected, r.c_started, r.c_waiters, r.c_end = [], [], [], [], []
    r.host_handles = []
    r.host_gates, r.host_s2 = [], []
    r.gates = gates or {}
    r.awaited = frozenset([p for deps in r.gates.values() for p in deps])
    r.on_start = on_start
    r.sig_waiters, r.flushed, r.batch_inner = {}, set(), {}
    r.fix_sig = r.nlineno  # (past the greatest line number: row_of ends there)
    r.ch_puts, r.ch_gets, r.ch_waiting = {}, {}, {}
    r.notes, r.acc_objs, r.stream_of_name = [], [], {}
    addrmap_init(&r.read_at)
    addrmap_init(&r.write_at)
    r.seq, r.seq_holes, r.eid, r.now = 0, False, 0, 0.0
    n_fix = len(syncs.specs) if r.injecting else 0  # (its syncs: more than its fixes)
    r._ops(2 * r.rows.n + 2 * n_fix + 1)
    r.work_sig = r.fix_sig + n_fix + 1
    r.ntaken = r.work_sig + r.nlineno  # (every signal: a line, a fix's record, a line's Work)
    r.taken = <unsigned char *>calloc(r.ntaken, 1)
    r.nfixes = n_fix  # (fix numbers count fixes, fewer than their syncs)
    r.fix_rec = <int *>malloc((2 * n_fix + 2) * sizeof(int))
    if r.taken == NULL or r.fix_rec == NULL:
        raise MemoryError()
    memset(r.fix_rec, 0xff, (2 * n_fix + 2) * sizeof(int))  # (-1: not recorded)
    r.host_of = {}
    r.handle_waits = r.injecting and syncs.handle_waits  # (a fix waits on a handle another
    # thread issues)
    cdef list thread_host = []  # a thread's place in per_thread -> its agent
    try:
        for (rank, host), mine in per_thread.items():  # Simulation.spawn, in thread order
            h = r._new_agent(rank, host, True)
            thread_host.append(h)
            r.host_of[r.agent_obj[h]] = h
            r.host_lines[h] = mine
            r.host_batches[h] = _batches(r.rows, mine) if batched else None
            r.stream(rank, "compute")
            r.push(0.0, URGENT, h)  # env.process(_host_driver): its Initialize
        if r.injecting:  # (each line's thread as its agent; then each thread's syncs)
            for ix in range(r.nlineno):
                if r.key_at[2 * ix] >= 0:
                    r.key_at[2 * ix] = <int>thread_host[r.key_at[2 * ix]]
            r.place_syncs(syncs, thread_host)
        per_rank = {}
        for rank, _ in per_thread:
            per_rank[rank] = per_rank.get(rank, 0) + 1
        for h in range(r.nag):  # (Engine.add_host: the threads of a rank of several share)
            if r.is_host[h] and per_rank[r.agent_rank[h]] > 1:
                r.shared[h] = 1
        r.run()
        if r.seq > INT_MAX:  # (a position past an int: sseq and eseq cut it, and decisions
            raise _Fallback()  # read them; below it, every one stored was exact)
        r.unmatched_notes()
        if lean:  # (the columns keep the run: not its schedule's state)
            r.release_schedule()
            columns = r.columns()
            r.release_lines()
            columns.c.kept, columns.c.nkept = r.kept, r.nkept  # (what its ops read of their
            columns.c.kept_vals = PySequence_Fast_ITEMS(r.kept_vals)  # lines: op_field)
            columns.c.combos = r.combos
            columns.c.handles = <PyObject *>r.ophandle if r.ophandle else NULL
            columns.c.special = r.special is not None
            columns.c.from_line = <PyObject *>r.from_line if r.from_line_used else NULL
            columns.c.kept_site, columns.c.kept_t = r.kept_site, r.kept_t
            columns.c.kept_tnone = r.kept_tnone
            return columns
        ops = r.records()
    except _Fallback:
        return None
    return ops, r.notes, set(r.agent_obj)


cdef class FixSyncs:
    """The syncs of a re-run's fixes (:func:`fix_syncs`), in the fixes' order, each with the
    place it is issued at: ``places[x]`` the injection key (host thread, kind, location, n) of
    the program action that sync ``x`` goes before (``posts[x]`` 0) or after (1), ``specs[x]`` the
    sync (``(R_RECORD | R_WAIT | R_RECORD_STREAM | ..., name, stream, ...)``, as
    streamsim/sim/inject.py issues it). Flat lists, not a dict by thread and key: the run finds
    each place's line once (:meth:`_Run.place_syncs`), and making a dict, a key and a list per
    fix was most of the work of a re-run with every fix."""
    cdef list places, specs
    cdef bytearray posts  # sync x: 1 after its place's action, 0 before it
    cdef bint handle_waits  # a wait on a handle another thread issues (inject._wait_handle)


cdef inline void _add_sync(FixSyncs out, object place, tuple spec, bint post) except *:
    out.places.append(place)
    out.specs.append(spec)
    out.posts.append(post)


NOT_KEYED = object()  # fix_syncs' answer when a fix names its places by op id, not keyed


def fix_syncs(list fixes):
    """The syncs of ``fixes`` for :func:`replay` (a :class:`FixSyncs`), registered as
    ``inject.inject_fixes`` registers them with the engine: the syncs to issue before an
    action (its fix's ``before``) and after one (an event's record, a hand-off's put: its
    ``record_after``). None when a fix is not one this replay covers; :data:`NOT_KEYED` when a
    fix's places are not keyed (``inject.is_keyed``: the caller keys them first).
    A fix's record and wait carry its number (a wait's last item: its record, ``_Run.fix_record``;
    its fourth, when the record is another thread's): a wait on another thread's record first
    waits for it to be issued (inject._wait_event), with the number telling the record's signal;
    a wait on a handle carries the thread that issues it, when another (inject._wait_handle
    waits for its issue). A hand-off's put and get name the fix's own channel,
    ``streamsim fix <number>``."""
    cdef FixSyncs out = FixSyncs.__new__(FixSyncs)
    out.places, out.specs, out.posts, out.handle_waits = [], [], bytearray(), False
    cdef Py_ssize_t i = 0
    for fix in fixes:
        if not isinstance(fix.before, tuple):
            return NOT_KEYED
    for fix in fixes:
        kind = fix.kind
        place = fix.before
        ag = place[0]
        wait_stream = fix.wait_stream
        if wait_stream is not None:
            wait_stream = wait_stream.name
        if kind == "event" or kind == "event_sync":
            after = fix.record_after
            other = after[0]
            across = other is not ag and other != ag
            name = f"fix{i}"
            _add_sync(out, after, (R_RECORD, name, fix.event_stream.name, i), True)
            _add_sync(out, place, (R_WAIT, name, wait_stream if kind == "event" else None,
                                   i if across else -1, i), False)
        elif kind == "record_stream":
            _add_sync(out, place, (R_RECORD_STREAM, fix.buffer, fix.event_stream.name), False)
        elif kind == "wait_handle":  # (the thread that issues the handle, when another)
            handle = fix.handle_op
            issuer = None if handle[0] is ag or handle[0] == ag else handle[0]
            _add_sync(out, place, (R_WAIT_HANDLE, handle[1:], wait_stream, issuer), False)
            if issuer is not None:
                out.handle_waits = True
        elif kind == "handoff":  # (a channel of the fix's own: one put, one get)
            channel = f"streamsim fix {i}"
            _add_sync(out, fix.record_after, (R_PUT, channel, None), True)
            _add_sync(out, place, (R_GET, channel, None), False)
        else:
            return None
        i += 1
    return out


cdef dict _provenance(dict d, LRef ln):
    """The last attrs a line's label gives both its ops (replay._Replay.origin): a wait's
    ``inferred``, else an irecv's ``any_source``."""
    if _lr(ln, R_INFERRED) is not None:
        d["inferred"] = _lr(ln, R_INFERRED)
    elif _lr(ln, R_ANY_SOURCE):
        d["any_source"] = True
    return d


cdef object _special_kind(tuple sp):
    """The kind of a fix's sync op marked ``sp`` (``_Run.mark_special``): a string constant of
    this module, or the one ``sp`` holds."""
    code = sp[0]
    if type(code) is str:
        return code
    if code == R_RECORD:
        return "record"
    if code == R_WAIT:
        return "wait_event" if sp[2] is not None else "sync_event"
    if code == R_PUT:
        return "put"
    if code == R_GET:
        return "get"
    return "record_stream"


cdef object _sync_attrs(object attrs, tuple sp):
    """The attrs of the stream op of a fix's sync marked ``sp`` (``attrs``: the enqueue's,
    shared): an event's record or wait names its event (inject.py's ``ev.record``,
    ``wait_event``), added as the op is made rather than a dict of its own an op as it ran
    (60,000 fixes: 120,000 dicts, 22 MB, which no compiled measure reads)."""
    code = sp[0]
    if type(code) is str or not (code == R_RECORD or code == R_WAIT and sp[2] is not None):
        return attrs
    d = dict(<dict>attrs)
    d["event"] = sp[1]
    return d


cdef object _special_name(tuple sp):
    """The name of a fix's sync op marked ``sp``, as inject.py's syncs name theirs: made only
    when its op is (120,000 strings a 60,000-fix re-run made and freed, unread, before)."""
    code = sp[0]
    if type(code) is str:
        return sp[1]
    if code == R_RECORD:
        return f"record({sp[1]})"
    if code == R_WAIT:
        return f"wait_event({sp[1]})" if sp[2] is not None else f"{sp[1]}.synchronize()"
    if code == R_PUT:
        return f"put({sp[1]})"
    if code == R_GET:
        return f"get({sp[1]})"
    return f"record_stream({sp[1]}, {sp[2]})"


cdef inline object _take(list slots, Py_ssize_t j):
    """``slots[j]``, left None (a line's syncs, run once); None past the list."""
    if not 0 <= j < len(slots):
        return None
    got = slots[j]
    if got is not None:
        slots[j] = None
    return got


cdef object _batches(Rows rows, _RowList mine):
    """streamsim.oplog.batches.batches: a batch's first line index -> its lines' rows, each of
    its other lines -> () (issued with the first); None when the thread has no batch."""
    out = None
    cdef int i = 0, j, n = mine.n
    while i < n:
        b = _lr(rows.ref(mine.a[i]), R_BATCH)
        if b is None:
            i += 1
            continue
        if out is None:
            out = {}
        j = i + 1
        while j < n and _lr(rows.ref(mine.a[j]), R_BATCH) == b:
            out[j] = ()
            j += 1
        out[i] = tuple([mine.a[k] for k in range(i, j)])
        i = j
    return out


cdef list _issue_order(Rows rows, tuple members):
    """comm.batch_issue_order: the order in which Host.batch_p2p issues a batch's lines (indices
    into ``members``, their rows): sends first, each kind in line order."""
    keys = [_l(rows.ref(<int>m), L_OP) != "isend" for m in members]
    return sorted(range(len(members)), key=keys.__getitem__)


cdef object _nbytes_of(tuple tensors):
    """streamsim.sim.memory.nbytes_of of a line's refs: the bytes each view touches."""
    total = 0
    for t in tensors:
        v = t.view
        total += v.nbytes if v.pattern is None else v.pattern.touched
    return total
