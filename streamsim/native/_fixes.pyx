# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Each hazard's proposed fix, compiled: :func:`with_fixes`.

The reference is streamsim/analysis/fixes.py (``with_fix``, ``propose_fix``) with the trace's
``Op.describe``, ``Op.when``, ``Agent.__str__`` and ``issue_point`` (streamsim/trace.py). This file
takes the same branches in the same order and writes the same f-strings; what differs is where its
values come from and how its records are made:

- an op's fields are read from its slots (streamsim/native/_slots.pxd), an agent's text and roles
  once per agent object (a dict by ``id``), where the reference calls a property or a method of
  each op and agent it describes;
- a ``Fix`` and a ``Hazard`` (frozen slots dataclasses) are made by setting their slots, where the
  reference's ``__init__`` calls ``object.__setattr__`` once per field;
- a run the compiled replay kept as columns (``oplog.leanrun.LeanTrace``) is read from them
  (``_cols.OpSource``), none of the ops its hazards name made: on the 1,000,000-line random
  program those were 371,171 ops, 0.58 s and 192 MB.

The kinds of fix most hazards get (``event``, ``event_sync``, ``wait_handle``,
``record_stream``) and "no fix" for a use after its free are made here, each fix's text left
unmade until it is read (:class:`Words`); a hand-off between host
threads (host work first) and an ``event``/``wait_handle`` fix of a comm op's current stream ask
the reference (``propose_fix``, ``_current_stream``), as does any hazard or op of another type than
the classes bound (a subclass may override what is read). On the 200,000-line random program
(59,912 hazards) the fixes take 0.10-0.13 s CPU here against the reference's 0.34 s, and
0.022 s with their texts unmade (0.060 s made, best of 7 in one process). Tests: tests/native/test_fixes.py (every fix kind, against the reference).
"""
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from streamsim.native._cols cimport OpSource, op_source, source_op, source_field
from streamsim.native._slots cimport (slot_set, put_slot, new_record, check_generic_alloc,
                                      fix_record, op_offsets, hazard_offsets, fix_offsets, N_FIELDS,
                                      F_ID, F_AGENT, F_KIND, F_NAME, F_ISSUER, F_HANDLE,
                                      F_LOCATION, F_STEP, F_ATTRS, H_KIND, H_BUFFER, H_FIRST,
                                      H_SECOND, H_MANIFEST, H_FIX, N_HAZARD_FIELDS, N_FIX_FIELDS,
                                      IdInts, ids_init, ids_clear, same_int)

cdef object Op = None, Agent = None, Fix = None, Hazard = None
cdef object _propose_fix = None, _current_stream = None
cdef str HOST = "host", USE_AFTER_FREE = "use-after-free"

cdef Py_ssize_t _op[<int>N_FIELDS]
cdef Py_ssize_t _fix[<int>N_FIX_FIELDS]
cdef Py_ssize_t _hazard[<int>N_HAZARD_FIELDS]


def bind(op, agent, fix, hazard, propose_fix, current_stream):
    """The trace's ``Op`` and ``Agent``, the findings' ``Fix`` and ``Hazard``, and the reference's
    ``propose_fix`` and ``_current_stream`` (this module imports nothing above it)."""
    global Op, Agent, Fix, Hazard, _propose_fix, _current_stream
    Op, Agent, Fix, Hazard = op, agent, fix, hazard
    _propose_fix, _current_stream = propose_fix, current_stream
    op_offsets(Op, _op)
    hazard_offsets(Hazard, _hazard)
    fix_offsets(Fix, _fix)
    check_generic_alloc(Hazard)
    check_generic_alloc(Fix)
    Fix.__dict__["text"].unmade = Words  # (Fix.text makes the words this module leaves unmade)


cdef class _Agent:
    """What the reference reads of one agent object: ``str(agent)``, its kind and name, and its
    ``is_gloo`` and ``is_comm`` (properties that look its name's role up)."""
    cdef object agent, text, name, rank
    cdef bint host, gloo, comm


cdef enum:  # what a fix's Words say (the kinds of fix the compiled proposer words)
    W_RECORD_STREAM, W_WAIT_HANDLE, W_EVENT_SYNC, W_EVENT


cdef class Words  # (below: a fix's text, made when read)


cdef class _Proposer:
    """The fixes of one trace's hazards, with its agents' texts and roles made once. An op is
    read as its ``Op`` object, or where the trace is columns, as its id (:meth:`op`,
    :meth:`field`)."""
    cdef object trace
    cdef OpSource src  # the ops the hazards name (a LeanTrace's columns, or made in a block)
    cdef list held  # (what ``src`` points into)
    cdef dict agents  # id(agent) -> _Agent
    cdef IdInts ids  # the fixes' places' ints (_slots.pxd: one object for an op named again)

    def __cinit__(self):
        ids_init(&self.ids)

    def __dealloc__(self):
        ids_clear(&self.ids)

    def __init__(self, trace, hazards, columns):
        self.trace = trace
        self.agents = {}
        self.held = op_source(&self.src, columns, lambda: trace.ops_of_hazards(hazards),
                              len(trace))

    cdef inline object field(self, object o, int f):
        """Slot ``f`` of op ``o`` (:meth:`op`'s)."""
        return source_field(&self.src, o, f, _op)

    cdef _Agent agent(self, object a):
        """The agent record of ``a`` (made on first use), or None for another type than Agent."""
        cdef _Agent r = self.agents.get(id(a))
        if r is not None:
            return r
        if type(a) is not Agent:
            return None
        r = _Agent()
        r.agent, r.rank, r.name = a, a.rank, a.name
        r.text = f"rank{r.rank}/{r.name}"  # (Agent.__str__)
        r.host = a.kind == HOST
        r.gloo = a.is_gloo
        r.comm = a.is_comm
        self.agents[id(a)] = r
        return r

    cdef object op(self, object op_id):
        """``trace.op(op_id)`` when it is an ``Op`` of that id, or the id where the trace is
        columns (else None: the reference runs)."""
        return source_op(&self.src, op_id, Op, _op)

    cdef str describe(self, object o, _Agent a):
        """``Op.describe``: ``name on agent[ when][ at location]``."""
        location = self.field(o, F_LOCATION)
        where = f" at {location}" if location else ""
        parts = []  # (Op.when)
        step = self.field(o, F_STEP)
        if step is not None:
            parts.append(f"step {step}")
        m = self.field(o, F_ATTRS).get("microbatch")
        if m is not None:
            parts.append(f"micro-batch {m}")
        when = " ".join(parts)
        return f"{self.field(o, F_NAME)} on {a.text}{' ' + when if when else ''}{where}"

    cdef object current_stream(self, object o):
        """The reference's ``_current_stream`` of op ``o`` (a comm op's: its attrs read in
        Python; made alone where the trace is columns)."""
        return _current_stream(o if self.src.c == NULL else self.trace.op(o))

    cdef object propose(self, object h):
        """``propose_fix(trace, h)``, its common kinds made here (see the module's docstring)."""
        x = self.op(slot_set(h, _hazard[H_FIRST]))
        y = self.op(slot_set(h, _hazard[H_SECOND]))
        if x is None or y is None:
            return _propose_fix(self.trace, h)
        cdef _Agent xa = self.agent(self.field(x, F_AGENT))
        cdef _Agent ya = self.agent(self.field(y, F_AGENT))
        if xa is None or ya is None:
            return _propose_fix(self.trace, h)
        kind = slot_set(h, _hazard[H_KIND])
        xkind = self.field(x, F_KIND)
        if kind == USE_AFTER_FREE and xkind == "free":
            return None  # (_used_after_its_free: no sync makes it safe)
        if xa.host:
            return _propose_fix(self.trace, h)  # (a hand-off, or none: rare)
        yissuer = same_int(&self.ids, self.field(y, F_ISSUER))
        before = self.field(y, F_ID) if ya.host or yissuer is None else yissuer  # (issue_point)
        handle = self.field(x, F_HANDLE)
        if kind == USE_AFTER_FREE and self.field(y, F_KIND) == "free" and handle is None:
            return _fix_of("record_stream", self.words(W_RECORD_STREAM, x, y,
                                                       slot_set(h, _hazard[H_BUFFER])),
                           before, None, None, xa.agent, None)
        if handle is not None:
            if ya.host or xa.gloo:
                wait_stream = None
            elif not ya.comm:
                wait_stream = ya.agent
            else:
                wait_stream = self.current_stream(y)
            return _fix_of("wait_handle", self.words(W_WAIT_HANDLE, x, y, wait_stream), before,
                           self.field(x, F_ID), None, None, wait_stream)
        if ya.host:
            return _fix_of("event_sync", self.words(W_EVENT_SYNC, x, y, None), before, None,
                           same_int(&self.ids, self.field(x, F_ISSUER)), xa.agent, None)
        wait_stream = ya.agent if not ya.comm else self.current_stream(y)
        return _fix_of("event", self.words(W_EVENT, x, y, wait_stream), before, None,
                       same_int(&self.ids, self.field(x, F_ISSUER)), xa.agent, wait_stream)

    cdef Words words(self, int kind, object x, object y, object extra):
        """The words of a fix of ``kind`` between ops ``x`` and ``y``, to be made when read."""
        cdef Words w = Words.__new__(Words)
        w.p, w.kind, w.x, w.y, w.extra = self, kind, x, y, extra
        return w

    cdef str say(self, Words w):
        """The text of ``w``, as the reference's ``propose_fix`` words it."""
        x, y = w.x, w.y
        if self.src.c != NULL and self.src.c.kcode == NULL and self.src.c.n:
            # (the columns were let go since: the trace's ops are made, and read instead)
            trace = self.trace
            self.held = op_source(&self.src, None, lambda: trace.ops, len(trace))
        if self.src.c == NULL and type(x) is int:  # (ops proposed from columns: by id)
            x, y = self.op(x), self.op(y)
            if x is None or y is None:  # (the made ops are Ops of their ids: never here)
                raise RuntimeError(f"op {w.x} or {w.y} is not an Op of its id in the trace")
        cdef _Agent xa = self.agent(self.field(x, F_AGENT))
        cdef _Agent ya = self.agent(self.field(y, F_AGENT))
        if w.kind == W_RECORD_STREAM:  # (extra: the hazard's buffer)
            return (f"call {w.extra}.record_stream({xa.name}) before {self.describe(y, ya)} "
                    f"({self.describe(x, xa)} may still use it)")
        if w.kind == W_WAIT_HANDLE:  # (extra: the stream the wait goes on, or None)
            how = "" if w.extra is not None or xa.gloo else " (blocking)"
            return (f"wait handle {self.field(x, F_HANDLE)}{how} (from {self.describe(x, xa)}) "
                    f"before {self.describe(y, ya)}")
        if w.kind == W_EVENT_SYNC:
            return (f"record an event on {xa.text} after {self.describe(x, xa)} and synchronize "
                    f"it before {self.describe(y, ya)}")
        # (an event: extra, the stream it is waited on; y's own stream's text made once)
        wait_text = ya.text if not ya.comm else f"{w.extra}"
        return (f"record an event on {xa.text} after {self.describe(x, xa)} and wait it on "
                f"{wait_text} before {self.describe(y, ya)}")


cdef class Words:
    """A proposed fix's text, not made yet: ``Fix.text`` (streamsim/analysis/findings.py) and
    ``str()`` make it each time they are read, from the two ops the proposer read, by the
    reference's f-strings. Most hazards' fixes are never read as text: the text report names
    root causes, which word their own fix; the JSON report writes each fix's text once. Made at
    once, a text was the largest object a hazard kept and most of the time its fix took: on the
    200,000-line random program 191 of the 478 bytes a hazard kept (this object: 72).

    It keeps its proposer (the trace it read, and its agents' texts) alive, and made
    again reads the same ops, so it is the same text each time. Pickled, it is the text (a
    ``str``)."""
    cdef _Proposer p
    cdef object x, y, extra  # its two ops (as the proposer read them), and what its kind needs
    cdef int kind

    def __str__(self) -> str:
        return self.p.say(self)

    def __repr__(self) -> str:
        return repr(self.p.say(self))

    def __reduce__(self):
        return (str, (self.p.say(self),))


cdef object _fix_of(kind, text, before, handle_op, record_after, event_stream, wait_stream):
    """A Fix with these fields (``buffer``: None, as proposed)."""
    return fix_record(<type>Fix, _fix, kind, text, before, handle_op, record_after, event_stream,
                      wait_stream, None)


def with_fixes(trace, hazards, columns=None, bint fresh=False):
    """``[fixes.with_fix(trace, h) for h in hazards]``: each hazard again, its proposed fix
    attached (a hazard of another type than Hazard: the reference's ``with_fix``; ``columns``:
    the trace's, where its ops are not made: ``native._columns_of``). ``fresh``: the caller
    made these hazards (their fix None) and no one else holds them, so each ``Hazard`` gets its
    fix in its own slot rather than being made again (at 1,000,000 lines of the random
    program, 301,502 hazards of 112 bytes made while the others were held); None when
    the reference must run instead: an op or hazard with a field never set (``slot_set``'s
    AttributeError), which the reference may not read at all, as the JSON tables and the
    root-cause grouping decline."""
    try:
        return _with_fixes(trace, hazards, columns, fresh)
    except AttributeError:
        return None


cdef list _with_fixes(trace, hazards, columns, bint fresh):
    cdef _Proposer p = _Proposer(trace, hazards, columns)
    cdef list out = []
    cdef int i
    cdef PyObject **at
    cdef PyObject *old
    for h in hazards:
        if type(h) is not Hazard:
            out.append(Hazard(h.kind, h.rank, h.buffer, h.range, h.first, h.second, h.first_mode,
                              h.second_mode, h.manifest, _propose_fix(trace, h)))
            continue
        fix = p.propose(h)
        if fresh:  # (its fix slot, None, replaced: a record no one else has seen yet)
            at = <PyObject **>((<char *><PyObject *>h) + _hazard[H_FIX])
            old = at[0]
            Py_INCREF(fix)
            at[0] = <PyObject *>fix
            Py_XDECREF(old)
            out.append(h)
            continue
        made = new_record(<type>Hazard)
        for i in range(H_MANIFEST + 1):  # (every field but the fix, the last)
            put_slot(made, _hazard[i], slot_set(h, _hazard[i]))
        put_slot(made, _hazard[H_FIX], fix)
        out.append(made)
    return out
