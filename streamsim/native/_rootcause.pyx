# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The root causes' grouping of hazards by their two sites, compiled: :func:`groups`.

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
Tests: tests/native/test_rootcause.py.
"""
from cpython.ref cimport PyObject

from streamsim.native._cols cimport OpSource, op_source, source_op, source_field
from streamsim.native._slots cimport (slot_set, op_offsets, N_FIELDS, F_ID, F_KIND, F_NAME,
                                      F_LOCATION, F_LINE, F_ATTRS)

cdef object Op = None, Site = None, _peer_sub = None
cdef Py_ssize_t _op[<int>N_FIELDS]


def bind(op, site, peer_sub):
    """The trace's ``Op``, rootcause's ``Site`` and its label's regex substitution
    (``_PEER.sub``)."""
    global Op, Site, _peer_sub
    Op, Site, _peer_sub = op, site, peer_sub
    op_offsets(Op, _op)


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
    cdef list keys = []
    cdef dict merged = {}
    cdef dict grouped = {}
    cdef Py_ssize_t i, c, seen
    try:
        for i in range(len(hazards)):
            h = hazards[i]
            made = made_site(h) if made_site is not None else None
            key = (h.kind, h.buffer if made is None else made, sites.number(h.first),
                   sites.number(h.second))
            got = covered.get(i)
            if got is not None:
                ck = keys[<Py_ssize_t>got]
                if ck[:3] == key[:3] and ck != key:
                    merged.setdefault(key, ck)
            keys.append(key)
    except (_Refused, AttributeError):  # (AttributeError: a field never set)
        return None
    for i in range(len(keys)):
        key = keys[i]
        if merged:  # (the same missing wait: its earlier consumer's root cause)
            seen = 0
            while key in merged and seen < len(merged):
                key, seen = merged[key], seen + 1
        members = grouped.get(key)
        if members is None:
            grouped[key] = [i]
        else:
            (<list>members).append(i)
    site = sites.sites
    return {(kind, buffer, site[<Py_ssize_t>a], site[<Py_ssize_t>b]): members
            for (kind, buffer, a, b), members in grouped.items()}
