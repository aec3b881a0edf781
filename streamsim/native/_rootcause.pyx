# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The root causes' grouping of hazards by their two sites, compiled: :func:`groups`; and what
each group's root cause says of its instances: :func:`summaries`.

The reference is streamsim/analysis/rootcause.py's ``_grouped`` (with ``site_of``): each hazard's
key (its kind, its buffer or the allocation site of the life it touches, the sites of its two
ops), a key merged into an earlier hazard's where that hazard's fix orders it too, and the
hazards grouped by key in the order keys first appear. What differs is how a key is hashed:

- a site is made once per distinct (label, location), not once per op, so equal sites are one
  object and a key can name them by a number: the reference's keys hash two ``Site`` dataclasses
  (a Python ``__hash__`` and, on a hit, ``__eq__`` each) two to four times a hazard;
- an op's label (its name without a comm op's default peer, ``isend to rank1``) is made once per
  name, where the reference runs the regex per op;
- a run the compiled replay kept as columns is read from them (``_cols.OpSource``), none of the
  ops its hazards name made.

The groups come back as the reference's dict: the same keys, with the Site objects, in the same
order, each with its hazards' indices. An op of another type than ``Op`` (whose fields it reads
from its slots) or an op id it cannot index makes it return None, and the reference groups.

:func:`summaries` is ``rootcause._summary`` of each group: the most common kind of fix of its
instances, its first instance of that kind, how many need another sync, how many struck, their
ranks, and how many steps apart their accesses are. The reference makes three lists of the
members and walks them five times in Python: at 1,000,000 lines of the random program (3,000
root causes of 304,502 hazards) that was about 0.7 s of ``root_causes``' 0.75 s.
Tests: tests/native/test_rootcause.py.
"""
from cpython.ref cimport PyObject
from libc.stdlib cimport malloc, free

from streamsim.native._cols cimport OpSource, op_source, source_op, source_field
from streamsim.native._slots cimport (slot_set, op_offsets, hazard_offsets, fix_offsets, N_FIELDS,
                                      F_ID, F_KIND, F_NAME, F_LOCATION, F_LINE, F_ATTRS, F_STEP,
                                      F_AGENT, F_ISSUER, N_HAZARD_FIELDS, N_FIX_FIELDS, H_RANK,
                                      H_FIRST, H_SECOND, H_MANIFEST, H_FIX, X_KIND)

cdef object Op = None, Site = None, _peer_sub = None, Hazard = None, Fix = None
cdef str HOST = "host"
cdef Py_ssize_t _op[<int>N_FIELDS]
cdef Py_ssize_t _hz[<int>N_HAZARD_FIELDS]
cdef Py_ssize_t _fx[<int>N_FIX_FIELDS]


def bind(op, site, peer_sub, hazard, fix):
    """The trace's ``Op``, rootcause's ``Site`` and its label's regex substitution
    (``_PEER.sub``), the findings' ``Hazard`` and ``Fix``."""
    global Op, Site, _peer_sub, Hazard, Fix
    Op, Site, _peer_sub, Hazard, Fix = op, site, peer_sub, hazard, fix
    op_offsets(Op, _op)
    hazard_offsets(Hazard, _hz)
    fix_offsets(Fix, _fx)


class _Refused(Exception):
    """An op this module does not read: the reference groups."""


cdef class _Sites:
    """Each op's site, numbered: equal sites one number and one ``Site`` object."""
    cdef OpSource src  # the ops the hazards name (a LeanTrace's columns, or made in a block)
    cdef list held  # (what ``src`` points into)
    cdef list of_op  # op id -> its site's number (None: not made yet)
    cdef dict numbered  # (label, location) -> number
    cdef public list sites  # number -> Site
    cdef dict labels  # an op's name -> its label

    def __init__(self, trace, hazards, columns):
        self.held = op_source(&self.src, columns, lambda: trace.ops_of_hazards(hazards),
                              len(trace))
        self.of_op = [None] * self.src.n
        self.numbered = {}
        self.sites = []
        self.labels = {}

    cdef inline object field(self, object op, int f):
        """Slot ``f`` of ``op``: an ``Op``, or where the trace is columns, its id."""
        return source_field(&self.src, op, f, _op)

    cdef object number(self, object op_id):
        """The number of op ``op_id``'s site (``rootcause.site_of``)."""
        if type(op_id) is not int:
            raise _Refused()
        cdef Py_ssize_t i = op_id
        if i < 0 or i >= self.src.n:
            raise _Refused()
        n = self.of_op[i]  # (numbered already: no op looked up again)
        if n is not None:
            return n
        op = source_op(&self.src, op_id, Op, _op)
        if op is None:
            raise _Refused()
        name = self.field(op, F_NAME)
        label = self.labels.get(name)
        if label is None:
            label = self.labels[name] = _peer_sub("", name)
        line = self.field(op, F_LINE)
        site = self.field(op, F_ATTRS).get("site") if line is not None else None
        if site is not None:  # a recorded line: its label at its user code site
            key = (label, str(site))
        elif line is not None:  # an op log: the name when the line gives one, else the line
            kind = self.field(op, F_KIND)
            key = (label, "") if name != kind else (kind, self.field(op, F_LOCATION))
        else:
            key = (label, self.field(op, F_LOCATION))
        n = self.numbered.get(key)
        if n is None:
            n = self.numbered[key] = len(self.sites)
            self.sites.append(Site(*key))
        self.of_op[i] = n
        return n


def groups(trace, hazards, made_site, dict covered, columns=None):
    """``rootcause._grouped``: key -> the indices of its hazards, in the order keys first appear
    (``made_site``: ``_Lives.site``, or None when no buffer life has a site; ``covered``:
    ``_covered_by``; ``columns``: the trace's, where its ops are not made:
    ``native._columns_of``); None where the reference must group them."""
    cdef _Sites sites = _Sites(trace, hazards, columns)
    # each hazard's key as its number among the distinct keys (``distinct``): a tuple a hazard
    # held to the end was most of the grouping's memory (at 1,000,000 lines of the random
    # program, 301,502 of them for 3,000 keys: about 40 MB while it ran)
    cdef Py_ssize_t n = len(hazards)
    cdef int *kid = <int *>malloc((n + 1) * sizeof(int))
    if kid == NULL:
        raise MemoryError()
    cdef list distinct = []
    cdef dict number = {}  # key -> its place in distinct
    cdef dict merged = {}
    cdef dict grouped = {}
    cdef Py_ssize_t i, c, seen, g
    try:
        try:
            for i in range(n):
                h = hazards[i]
                made = made_site(h) if made_site is not None else None
                key = (h.kind, h.buffer if made is None else made, sites.number(h.first),
                       sites.number(h.second))
                got = covered.get(i)
                if got is not None:
                    g = got
                    if not 0 <= g < i:  # (an earlier hazard's: _covered_by)
                        raise ValueError(f"hazard {i} is covered by hazard {g}")
                    ck = distinct[kid[g]]
                    if ck[:3] == key[:3] and ck != key:
                        merged.setdefault(key, ck)
                k = number.get(key)
                if k is None:
                    k = number[key] = len(distinct)
                    distinct.append(key)
                kid[i] = k
        except (_Refused, AttributeError):  # (AttributeError: a field never set)
            return None
        for i in range(n):
            key = distinct[kid[i]]
            if merged:  # (the same missing wait: its earlier consumer's root cause)
                seen = 0
                while key in merged and seen < len(merged):
                    key, seen = merged[key], seen + 1
            members = grouped.get(key)
            if members is None:
                grouped[key] = [i]
            else:
                (<list>members).append(i)
    finally:
        free(kid)
    site = sites.sites
    return {(kind, buffer, site[<Py_ssize_t>a], site[<Py_ssize_t>b]): members
            for (kind, buffer, a, b), members in grouped.items()}


DEF MAX_KINDS = 16  # kinds of fix a group's instances may have (FIX_KINDS: five)


cdef class _Steps:
    """Each op's step as ``rootcause._step`` reads it: its own, or for a stream op with none,
    the step of the host action that issued it."""
    cdef object trace
    cdef OpSource src  # the ops the hazards name (a LeanTrace's columns, or made in a block)
    cdef list held  # (what ``src`` points into)
    cdef dict host  # id(agent) -> whether it is a host thread

    def __init__(self, trace, hazards, columns):
        self.trace = trace
        self.held = op_source(&self.src, columns, lambda: trace.ops_of_hazards(hazards),
                              len(trace))
        self.host = {}

    cdef object step(self, object op_id):
        op = source_op(&self.src, op_id, Op, _op)
        if op is None:
            raise _Refused()
        step = source_field(&self.src, op, F_STEP, _op)
        if step is not None:
            return step
        issuer = source_field(&self.src, op, F_ISSUER, _op)
        if issuer is None:
            return None
        agent = source_field(&self.src, op, F_AGENT, _op)
        host = self.host.get(id(agent))
        if host is None:
            host = self.host[id(agent)] = agent.kind == HOST
        if host:
            return None
        by = source_op(&self.src, issuer, Op, _op)  # (an issuer no hazard names: asked for)
        return self.trace.op(issuer).step if by is None else source_field(&self.src, by,
                                                                          F_STEP, _op)

    cdef object gap(self, hazards, list idx):
        """``rootcause._step_gap`` of the hazards at ``idx``."""
        gaps = set()
        for i in idx:
            h = hazards[<Py_ssize_t>i]
            sa = self.step(slot_set(h, _hz[H_FIRST]))
            sb = self.step(slot_set(h, _hz[H_SECOND]))
            if sa is None or sb is None:
                return None
            gaps.add(sb - sa)
        return gaps.pop() if len(gaps) == 1 else None


def summaries(trace, hazards, groups, columns=None):
    """``[rootcause._summary(trace, hazards, idx) for idx in groups]`` (``columns``: the trace's,
    where its ops are not made: ``native._columns_of``); None where the reference must say them:
    a hazard or fix of another class, a field never set, a ``manifest`` not a bool, more kinds of
    fix than this counts, an op it does not read."""
    cdef _Steps steps = _Steps(trace, hazards, columns)
    cdef list out = []
    try:
        for idx in groups:
            out.append(_summary(steps, hazards, <list?>idx))
    except (_Refused, AttributeError):  # (AttributeError: a field never set)
        return None
    return out


cdef tuple _summary(_Steps steps, hazards, list idx):
    cdef PyObject *kinds[MAX_KINDS]  # (each borrowed from a fix of the group: they live)
    cdef Py_ssize_t count[MAX_KINDS]
    cdef Py_ssize_t first[MAX_KINDS]
    cdef Py_ssize_t nk = 0, k, j, m = len(idx), manifest = 0, best
    ranks = set()
    for j in range(m):
        h = hazards[<Py_ssize_t>idx[j]]
        if type(h) is not Hazard:
            raise _Refused()
        mf = slot_set(h, _hz[H_MANIFEST])
        if mf is True:
            manifest += 1
        elif mf is not False:
            raise _Refused()  # (sum() of what it is)
        ranks.add(slot_set(h, _hz[H_RANK]))
        fix = slot_set(h, _hz[H_FIX])
        if fix is None:
            continue
        if type(fix) is not Fix:
            raise _Refused()
        kind = slot_set(fix, _fx[X_KIND])
        for k in range(nk):
            if kinds[k] == <PyObject *>kind or <object>kinds[k] == kind:
                count[k] += 1
                break
        else:
            if nk == MAX_KINDS:
                raise _Refused()
            kinds[nk], count[nk], first[nk] = <PyObject *>kind, 1, j
            nk += 1
    shown = tuple(sorted(ranks))
    if nk == 0:
        return None, None, 0, manifest, shown, None
    best = 0
    for k in range(1, nk):  # (the most instances; of equal counts, the first met)
        if count[k] > count[best]:
            best = k
    return (<object>kinds[best], idx[first[best]], m - count[best], manifest, shown,
            steps.gap(hazards, idx))
