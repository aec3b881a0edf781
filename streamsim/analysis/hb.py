"""Happens-before analysis: vector clocks over the trace and FastTrack-style per-byte-range state.

One pass over the trace in its global sequence (a linear extension of HB), linear in the number of
accesses, no graph. The relation computed is the one of docs/SEMANTICS.md, made precise as:

* every op ``x`` gets a *start clock* ``S(x)`` and an *end clock* ``E(x)``, vectors indexed by agent;
* ``S(x) = E(prev op of x's agent) ⊔ E(issuer) ⊔ E(a) for a in after``, then x's own component is set
  to its epoch ``index + 1``;
* ``E(x) = S(x) ⊔ S(j) for j in joins`` (a join source's start, hence its accesses, is ordered before
  what follows x, not before x itself);
* op ``a`` happens before op ``b`` (their accesses are ordered) iff ``a != b`` and
  ``S(b)[agent(a)] >= epoch(a)``.

Accesses are checked with the op's start clock. Per storage ``(rank, buffer)`` an interval map keeps,
for each byte range, the last write and the last read of each agent since that write; that is enough to
decide, for every access, whether it races with some earlier access to the same bytes (see
``tests/test_hb.py`` for the exact property, checked against brute-force graph reachability).

A storage that some op frees also keeps each agent's latest access since its previous free: a free
is checked against all of them (SEMANTICS.md: a free while another stream may still use the buffer),
not only against the last write and the reads since it, which a write in between would have hidden.

Hazards: one per (first op, second op, kind, storage), its range covering the racing segments;
``first`` is the op issued first (host program order; see ``trace.issue_order``), which may have
started after the other. The kind is RAW, WAR or WAW from the two modes in that order, or
use-after-free when either op is a ``free``; an op that reads and writes the same bytes (in place)
reports its race with the previous write once, as RAW. ``manifest``: the later-issued access's window
started before the earlier-issued one's ended in simulated time (strictly): the data really was
corrupted in this run.

One module because the pass is one loop whose hot paths (clock joins, segment lookups) are inlined
by hand: split into functions across modules, it pays a call per access on millions of accesses.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from ..gcpause import gc_paused
from .findings import RAW, USE_AFTER_FREE, WAR, WAW, Hazard
from ..trace import HOST, READ, WRITE, Access, Agent, Op, Trace, issue_point


@dataclass
class HappensBefore:
    """Start (and end) clocks kept by :func:`analyse`: all of them with ``keep_clocks=True``."""

    trace: Trace = field(repr=False)
    agents: tuple[Agent, ...]
    agent_of: list[int] = field(repr=False)  # op id -> dense agent index
    starts: dict[int, list[int]] = field(default_factory=dict, repr=False)  # op id -> start clock
    ends: dict[int, list[int]] = field(default_factory=dict, repr=False)  # op id -> end clock

    def ordered(self, a: int, b: int) -> bool:
        """True when op ``a`` happens before op ``b`` (b's start clock knows a's epoch)."""
        if a == b:
            return False
        try:
            clock = self.starts[b]
        except KeyError:
            raise KeyError(f"no clock kept for op {b}: use analyse(trace, keep_clocks=True)") from None
        return clock[self.agent_of[a]] > self.trace.ops[a].index

    def concurrent(self, a: int, b: int) -> bool:
        """Neither op happens before the other."""
        return a != b and not self.ordered(a, b) and not self.ordered(b, a)

    def clock(self, op_id: int, end: bool = False) -> dict[Agent, int]:
        """The op's start (or end) clock as ``{agent: epoch}``, zero entries left out (for display)."""
        c = (self.ends if end else self.starts)[op_id]
        return {ag: c[i] for i, ag in enumerate(self.agents) if c[i]}


@dataclass
class Analysis:
    """What one pass produced: the hazards (sorted, without fixes) and the clocks kept."""

    hazards: list[Hazard]
    hb: HappensBefore


def analyse_hazards(trace: Trace, fixes: bool = True) -> list[Hazard]:
    """Every data hazard of ``trace``, ordered by (second op, first op); with proposed fixes."""
    with gc_paused():
        hazards = _analyse(trace, False).hazards
        if not fixes:
            return hazards
        from .fixes import with_fix  # late: fixes consumes hazards; hb does not depend on it
        return [with_fix(trace, h) for h in hazards]


def analyse(trace: Trace, keep_clocks: bool = False) -> Analysis:
    """Run the vector-clock pass; keep every op's clocks when ``keep_clocks`` (for ``ordered``)."""
    with gc_paused():  # the pass allocates many small objects and frees few
        return _analyse(trace, keep_clocks)


def _analyse(trace: Trace, keep_clocks: bool, agents: list[Agent] | None = None) -> Analysis:
    ops = trace.ops
    n = len(ops)
    agents = list(trace.agents) if agents is None else agents
    na = len(agents)
    # Clocks. An agent's clock has na + 1 slots: the last is its *generation*, bumped whenever a
    # component other than its own and its *partner*'s grows. The partner of a stream is its rank's
    # first host thread (which issues most of its ops), of a host itself. Two states of a clock at one
    # generation differ only in those two components, so one copy per generation stands for the
    # clock of every op that started in it, given the op's own epoch (index + 1) and, when the agent
    # has another partner, the op's partner component (``partner_of``). Each agent keeps its copies
    # with the epoch from which each holds (``hist_e``, ``hist_c``). So an op that neither waits on
    # anything, nor is issued, nor touches memory (most host actions: a launch) needs no work at all:
    # it is left out of the pass, and what a later op needs of it is its agent's copy for its epoch.
    # An agent that already joined a copy of o at generation g (seen[b][o] == g) joins a later one by
    # taking o's own and partner components only: the common case (a stream op joining the host
    # action that issued it, a host wait joining a stream op).
    partner = list(range(na))
    first_host: dict[int, int] = {}
    for i, ag in enumerate(agents):
        if ag.kind == HOST:
            first_host.setdefault(ag.rank, i)
    for i, ag in enumerate(agents):
        if ag.kind != HOST and ag.rank in first_host:
            partner[i] = first_host[ag.rank]
    may_skip = [not keep_clocks and partner[i] == i for i in range(na)]
    by_eq = {ag: i for i, ag in enumerate(agents)}
    by_id = {id(ag): i for i, ag in enumerate(agents)}  # ops share their Agent objects: no hashing
    _id = id
    agent_of = [0] * n
    # Exact end clocks of ops whose end joins something (_PENDING until their end is met).
    end_of: list[list[int] | None] = [None] * n
    # The global sequence (the order of Trace.in_hb_order) without a tuple per item: an op at its
    # start_seq unless left out; ~id at its end_seq when its end joins (or clocks are kept).
    seq: list = [None] * (2 * n)
    freed: set[tuple[int, str]] = set()  # storages some op frees (see touch)
    for op in ops:
        ag = op.agent
        try:
            a = by_id[_id(ag)]
        except KeyError:
            a = by_eq.get(ag)
            if a is None:  # not among trace.agents: start again knowing every agent
                return _analyse(trace, keep_clocks, _all_agents(trace))
            by_id[_id(ag)] = a
        oid = op.id
        agent_of[oid] = a
        if op.joins:
            seq[op.start_seq] = op
            seq[op.end_seq] = ~oid  # an int: negative, so never false
            end_of[oid] = _PENDING
        elif op.issuer is None and may_skip[a] and not op.accesses and not op.after:
            continue
        else:
            seq[op.start_seq] = op
            if keep_clocks:
                seq[op.end_seq] = ~oid
            if op.kind == "free":
                freed.update((acc.view.rank, acc.view.buffer) for acc in op.accesses)

    clocks = [[0] * (na + 1) for _ in range(na)]
    seen = [[-1] * na for _ in range(na)]
    hist_e = [[0] for _ in range(na)]  # per agent: epochs from which each copy holds, ascending
    hist_c = [[list(c)] for c in clocks]  # ... and the copies
    hist_g = [0] * na  # the generation of each agent's last copy
    partner_of = [0] * n
    hb = HappensBefore(trace, tuple(agents), agent_of)
    keep_starts = hb.starts
    keep_ends = hb.ends

    def missing(user: Op, r: int, what: str) -> ValueError:
        return ValueError(f"op {user.id} ({user.name}) needs op {r} to have {what} before it in the "
                          f"trace's sequence")

    def start_copy(user: Op, r: int) -> list[int]:
        """The copy standing for op r's start clock (its agent's copy for r's epoch)."""
        rop = ops[r]
        if rop.start_seq > user.end_seq:
            raise missing(user, r, "started")
        he = hist_e[agent_of[r]]
        e = rop.index + 1
        if he[-1] <= e:
            return hist_c[agent_of[r]][-1]
        return hist_c[agent_of[r]][bisect_right(he, e) - 1]

    def end_copy(user: Op, r: int) -> list[int]:
        """The copy standing for op r's end clock: exact when its end joined something."""
        S = end_of[r]
        if S is _PENDING or ops[r].end_seq > user.start_seq:
            raise missing(user, r, "ended")
        return start_copy(user, r) if S is None else S

    def join(b: int, C: list[int], S: list[int], r: int) -> None:
        """Agent b's clock C ⊔= op r's clock, whose copy is S (see above)."""
        pb = partner[b]
        o = agent_of[r]
        changed = False
        for i in range(na):
            x = S[i]
            if x > C[i]:
                C[i] = x
                if i != b and i != pb:
                    changed = True
        v = ops[r].index + 1
        if v > C[o]:
            C[o] = v
            if o != b and o != pb:
                changed = True
        p = partner[o]
        if p != o:
            v = partner_of[r]
            if v > C[p]:
                C[p] = v
                if p != b and p != pb:
                    changed = True
        if changed:
            C[na] += 1
        seen[b][o] = S[na]

    def new_copy(a: int, C: list[int], e: int) -> None:
        """Agent a's generation changed: its clock from epoch e on is C's (a copy)."""
        hist_e[a].append(e)
        hist_c[a].append(C[:])
        hist_g[a] = C[na]

    # Hazard bookkeeping: (first, second, kind, rank, buffer) -> [lo, hi, first_mode, second_mode,
    # second starts before first ends, first starts before second ends]
    found: dict[tuple, list] = {}
    # Per storage (rank, buffer): sorted segment starts and live segments [lo, hi, last_write, reads]
    # where last_write is the (op, agent, epoch) of the writer and reads {agent: (op, agent, epoch)}
    # or None. A live segment never changes its bounds: a split replaces it with new ones and kills
    # it (lo = None), so a view that remembers a live segment spanning exactly its bytes can use it
    # without a lookup.
    stores: dict[tuple[int, str], tuple[list[int], list[list], dict | None]] = {}
    # id(view) -> [remembered segment, lo, hi, starts, segs, rank, buffer, view, touched]: views
    # are shared by the many accesses to one buffer (the view kept so that its id is not reused).
    # touched: for a storage that is freed somewhere, {agent: (rec, access)}, each agent's latest
    # access since the storage's last free (None for the others, which need no such record).
    entries: dict[int, list] = {}
    entries_get = entries.get

    def report(first: tuple, fmode: str, op: Op, acc, kind: str, lo: int, hi: int, rank: int,
               buf: str) -> None:
        fid = first[0]
        fop = ops[fid]
        if op.kind == "free" or fop.kind == "free":
            kind = USE_AFTER_FREE
        elif kind == WAW:
            raw = found.get((fid, op.id, RAW, rank, buf))
            if raw is not None and raw[0] <= lo and hi <= raw[1]:
                return  # an in-place op: its read already reported the race with this write
        facc = _access_of(fop, fmode, rank, buf, lo, hi)
        f0, f1 = fop.window_time(facc)
        s0, s1 = op.window_time(acc)
        # manifest if the later-issued access started before the earlier-issued one ended; which
        # of the two was issued first is settled once, in _in_issue_order
        key = (fid, op.id, kind, rank, buf)
        h = found.get(key)
        if h is None:
            found[key] = [lo, hi, fmode, acc.mode, s0 < f1, f0 < s1]
        else:
            if lo < h[0]:
                h[0] = lo
            if hi > h[1]:
                h[1] = hi
            h[4] = h[4] or s0 < f1
            h[5] = h[5] or f0 < s1

    def entry(v) -> list:
        sk = (v.rank, v.buffer)
        st = stores.get(sk)
        if st is None:
            st = stores[sk] = ([], [], {} if sk in freed else None)
        ent = entries[_id(v)] = [_DEAD, v.offset, v.offset + v.nbytes, st[0], st[1], v.rank,
                                 v.buffer, v, st[2]]
        return ent

    def touch(touched: dict, op: Op, a: int, rec: tuple, acc: Access, C: list[int],
              ent: list) -> None:
        """Record op's access of a freed-somewhere storage; a free first checks, for every other
        agent, its latest access since the previous free: the use-after-free rule of SEMANTICS.md
        (a free while another stream may still use the buffer), which the last-write and
        reads-since rules alone miss once a later write has replaced what that agent touched."""
        if op.kind == "free":
            lo, hi = ent[1], ent[2]
            for b, (r, racc) in touched.items():
                if b != a and C[b] < r[2]:
                    v = racc.view
                    flo, fhi = max(lo, v.offset), min(hi, v.offset + v.nbytes)
                    if flo < fhi:
                        report(r, racc.mode, op, acc, USE_AFTER_FREE, flo, fhi, ent[5], ent[6])
            touched.clear()
        touched[a] = (rec, acc)

    for op in filter(None, seq):
        if op.__class__ is int:  # an end that joins (or whose clock is kept)
            oid = ~op
            op = ops[oid]
            a = agent_of[oid]
            C = clocks[a]
            if op.joins:
                g = C[na]
                for r in op.joins:
                    join(a, C, start_copy(op, r), r)
                X = end_of[oid] = C[:]  # exact, under a generation no one has seen: joined in full
                X[na] = -2 - oid
                if C[na] != g:
                    new_copy(a, C, op.index + 2)
            if keep_clocks:
                keep_ends[oid] = C[:na]
            continue

        oid = op.id
        a = agent_of[oid]
        C = clocks[a]
        r = op.issuer
        if r is not None:
            S = end_of[r]
            o = agent_of[r]
            rop = ops[r]
            v = rop.index + 1
            if S is None and rop.end_seq < op.start_seq:  # end_copy() inlined for the common case
                he = hist_e[o]
                S = hist_c[o][-1] if he[-1] <= v else hist_c[o][bisect_right(he, v) - 1]
            else:
                S = end_copy(op, r)
            if seen[a][o] == S[na]:  # join() inlined for the common case (see above)
                if v > C[o]:
                    C[o] = v
                    if o != partner[a]:
                        C[na] += 1
                p = partner[o]
                if p != o:
                    v = partner_of[r]
                    if v > C[p]:
                        C[p] = v
                        if p != partner[a] and p != a:
                            C[na] += 1
            else:
                join(a, C, S, r)
        if op.after:
            for r in op.after:
                join(a, C, end_copy(op, r), r)
        e = op.index + 1
        if C[a] >= e:
            raise ValueError(f"op {oid} ({op.name}) is out of program order on {op.agent}")
        C[a] = e
        if partner[a] != a:
            partner_of[oid] = C[partner[a]]
        if C[na] != hist_g[a]:
            new_copy(a, C, e)
        if keep_clocks:
            keep_starts[oid] = C[:na]

        accs = op.accesses
        if not accs:
            continue
        # Accesses list reads before writes (Op's invariant): an in-place op checks its read against
        # the previous write before its own write replaces it. A remembered live segment is used
        # inline; else _cover splits and fills segments so that segs[i:j] tile the access's bytes.
        rec = (oid, a, e)
        for acc in accs:
            ent = entries_get(_id(acc.view))
            if ent is None:
                ent = entry(acc.view)
            if ent[8] is not None:
                touch(ent[8], op, a, rec, acc, C, ent)
            s = ent[0]
            if acc.mode == READ:
                if s[0] is not None:
                    w = s[2]
                    if w is not None and C[w[1]] < w[2]:
                        report(w, WRITE, op, acc, RAW, ent[1], ent[2], ent[5], ent[6])
                    rd = s[3]
                    if rd is None:
                        s[3] = {a: rec}
                    else:
                        rd[a] = rec
                    continue
                lo, hi = ent[1], ent[2]
                if hi <= lo:
                    continue
                segs = ent[4]
                i, j = _cover(ent[3], segs, lo, hi)
                if j - i == 1:
                    ent[0] = segs[i]
                for k in range(i, j):
                    s = segs[k]
                    w = s[2]
                    if w is not None and C[w[1]] < w[2]:
                        report(w, WRITE, op, acc, RAW, s[0], s[1], ent[5], ent[6])
                    rd = s[3]
                    if rd is None:
                        s[3] = {a: rec}
                    else:
                        rd[a] = rec
                continue
            if s[0] is not None:
                w = s[2]
                if w is not None and C[w[1]] < w[2]:
                    report(w, WRITE, op, acc, WAW, ent[1], ent[2], ent[5], ent[6])
                rd = s[3]
                if rd is not None:
                    for rr in rd.values():
                        if C[rr[1]] < rr[2]:
                            report(rr, READ, op, acc, WAR, ent[1], ent[2], ent[5], ent[6])
                    s[3] = None
                s[2] = rec
                continue
            lo, hi = ent[1], ent[2]
            if hi <= lo:
                continue
            starts, segs = ent[3], ent[4]
            i, j = _cover(starts, segs, lo, hi)
            for k in range(i, j):
                s = segs[k]
                w = s[2]
                if w is not None and C[w[1]] < w[2]:
                    report(w, WRITE, op, acc, WAW, s[0], s[1], ent[5], ent[6])
                rd = s[3]
                if rd:
                    for rr in rd.values():
                        if C[rr[1]] < rr[2]:
                            report(rr, READ, op, acc, WAR, s[0], s[1], ent[5], ent[6])
                s[0] = None  # dead: replaced by the one segment below
            ent[0] = s = [lo, hi, rec, None]
            segs[i:j] = [s]
            starts[i:j] = [lo]

    return Analysis(_in_issue_order(trace, found), hb)


def _all_agents(trace: Trace) -> list[Agent]:
    """trace.agents and any other agent an op names (hand-built traces), in a stable order."""
    known = set(trace.agents)
    extra = sorted({op.agent for op in trace.ops} - known)
    return list(trace.agents) + extra


def _access_of(op: Op, mode: str, rank: int, buf: str, lo: int, hi: int) -> Access:
    """The access of ``op`` that left its mark on bytes [lo, hi) of (rank, buf) with ``mode``: the
    last such one (a later access of one op replaces an earlier one's mark)."""
    found = None
    for acc in op.accesses:
        v = acc.view
        if (acc.mode == mode and v.rank == rank and v.buffer == buf and v.offset < hi
                and lo < v.offset + v.nbytes):
            found = acc
    assert found is not None, (op.id, mode, rank, buf, lo, hi)
    return found


_KIND_OF_MODES = {(WRITE, READ): RAW, (READ, WRITE): WAR, (WRITE, WRITE): WAW}


def _in_issue_order(trace: Trace, found: dict) -> list[Hazard]:
    """Hazards with ``first`` the op issued first (the pass meets ops in start order, and a send
    issued before a forward can start after it): the kind then names the issue order, as
    SEMANTICS.md defines it, and ``manifest`` means the second access started before the first
    ended (a write before the earlier-issued read even began corrupts it too). Pairs that become the
    same hazard are merged. Sorted by (second, first, kind, rank, buffer, range)."""
    ops = trace.ops
    issued_at: dict[int, tuple] = {}  # op id -> (issuing agent, its index, its start_seq)

    def issue_key(op_id: int) -> tuple:
        """What trace.issue_order compares, once per op (many hazards share their ops)."""
        ip = ops[issue_point(ops[op_id])]
        k = issued_at[op_id] = (ip.agent, ip.index, ip.start_seq)
        return k

    merged: dict[tuple, list] = {}
    for (fid, sid, kind, rank, buf), (lo, hi, fmode, smode, s_before_f_end, f_before_s_end) \
            in found.items():
        manifest = s_before_f_end
        ka = issued_at.get(fid) or issue_key(fid)
        kb = issued_at.get(sid) or issue_key(sid)
        if (kb[1] < ka[1]) if ka[0] is kb[0] or ka[0] == kb[0] else (kb[2] < ka[2]):  # sid first
            fid, sid, fmode, smode = sid, fid, smode, fmode
            manifest = f_before_s_end
            if kind != USE_AFTER_FREE:
                kind = _KIND_OF_MODES[(fmode, smode)]
        key = (sid, fid, kind, rank, buf)
        h = merged.get(key)
        if h is None:
            merged[key] = [lo, hi, fmode, smode, manifest]
        else:
            h[0], h[1], h[4] = min(h[0], lo), max(h[1], hi), h[4] or manifest
    rows = [k + tuple(h) for k, h in merged.items()]
    rows.sort()  # keys are unique: the order is (second, first, kind, rank, buffer, range)
    return [Hazard(kind, rank, buf, (lo, hi), fid, sid, fmode, smode, manifest)
            for sid, fid, kind, rank, buf, lo, hi, fmode, smode, manifest in rows]


_PENDING = [None]  # end_of[r] while op r's end (which joins) is still to come
_DEAD = [None, None, None, None]  # a view's remembered segment before it has a live one


def _cover(starts: list[int], segs: list[list], lo: int, hi: int) -> tuple[int, int]:
    """Make segments ``segs[i:j]`` tile ``[lo, hi)`` exactly (splitting and filling gaps); return i, j.

    A segment is ``[lo, hi, last_write, reads]``; ``starts[k] == segs[k][0]``, sorted, non-overlapping.
    A split replaces the segment with two new ones (each with its own copy of the reads) and kills
    it (``lo = None``): a live segment keeps its bounds, which views that remember it rely on.
    """
    i = bisect_right(starts, lo) - 1
    if i >= 0 and segs[i][1] > lo:
        s = segs[i]
        if s[0] < lo:  # split off the part before lo
            segs[i:i + 1] = [[s[0], lo, s[2], dict(s[3]) if s[3] else None],
                             [lo, s[1], s[2], dict(s[3]) if s[3] else None]]
            starts.insert(i + 1, lo)
            s[0] = None
            i += 1
    else:
        i += 1
    j = i
    pos = lo
    while pos < hi:
        if j < len(segs) and segs[j][0] == pos:
            s = segs[j]
            if s[1] > hi:  # split off the part after hi
                segs[j:j + 1] = [[s[0], hi, s[2], dict(s[3]) if s[3] else None],
                                 [hi, s[1], s[2], dict(s[3]) if s[3] else None]]
                starts.insert(j + 1, hi)
                s[0] = None
                s = segs[j]
            pos = s[1]
        else:
            end = segs[j][0] if j < len(segs) and segs[j][0] < hi else hi
            segs.insert(j, [pos, end, None, None])
            starts.insert(j, pos)
            pos = end
        j += 1
    return i, j
