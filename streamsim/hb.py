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

Hazards: one per (first op, second op, kind, storage), its range covering the racing segments;
``first`` is the op issued first (host program order; see ``trace.issue_order``), which may have
started after the other. The kind is RAW, WAR or WAW from the two modes in that order, or
use-after-free when either op is a ``free``; an op that reads and writes the same bytes (in place)
reports its race with the previous write once, as RAW. ``manifest``: the later-issued access's window
started before the earlier-issued one's ended in simulated time (strictly): the data really was
corrupted in this run.
"""
from __future__ import annotations

import gc
from bisect import bisect_right
from dataclasses import dataclass, field

from .findings import RAW, USE_AFTER_FREE, WAR, WAW, Hazard
from .trace import READ, WRITE, Agent, Op, Trace, issue_order


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
    was_enabled = gc.isenabled()
    gc.disable()  # see analyse()
    try:
        hazards = _analyse(trace, False).hazards
        if not fixes:
            return hazards
        from .fixes import with_fix  # late: fixes consumes hazards; hb does not depend on it
        return [with_fix(trace, h) for h in hazards]
    finally:
        if was_enabled:
            gc.enable()


def analyse(trace: Trace, keep_clocks: bool = False) -> Analysis:
    """Run the vector-clock pass; keep every op's clocks when ``keep_clocks`` (for ``ordered``)."""
    was_enabled = gc.isenabled()
    gc.disable()  # the pass allocates many small objects and frees few: the cyclic GC only costs time
    try:
        return _analyse(trace, keep_clocks)
    finally:
        if was_enabled:
            gc.enable()


def _analyse(trace: Trace, keep_clocks: bool) -> Analysis:
    ops = trace.ops
    n = len(ops)
    # Prepass: dense agent indices, and how many times each op's end clock (issuer/after) or start
    # clock (joins) is needed later, so that only those are snapshotted, and freed after last use.
    # It also lays out the global sequence (the order of Trace.in_hb_order) without a tuple per item:
    # an op at its start_seq, ~id at its end_seq only when its end does anything (it has joins).
    # The end clock of an op without joins is its start clock, so it is snapshotted at its start.
    agents: list[Agent] = list(trace.agents)
    by_eq = {ag: i for i, ag in enumerate(agents)}
    by_id: dict[int, int] = {}
    agent_of = [0] * n
    end_need = [0] * n
    start_need = [0] * n
    seq: list = [None] * (2 * n)
    for op in ops:
        ag = op.agent
        i = by_id.get(id(ag))
        if i is None:
            i = by_eq.get(ag)
            if i is None:
                i = by_eq[ag] = len(agents)
                agents.append(ag)
            by_id[id(ag)] = i
        oid = op.id
        agent_of[oid] = i
        seq[op.start_seq] = op
        if op.issuer is not None:
            end_need[op.issuer] += 1
        if op.after:
            for r in op.after:
                end_need[r] += 1
        if op.joins or keep_clocks:
            seq[op.end_seq] = ~oid  # an int: negative, so never false
            for r in op.joins:
                start_need[r] += 1
    na = len(agents)

    # Agent clocks have na + 1 slots: the last one is the agent's *generation*, bumped whenever one of
    # its other components grows. A snapshot of agent o at generation g differs from an earlier one at
    # the same generation only in o's own component, so an agent that already joined a snapshot of o at
    # generation g joins a later one by copying one entry (seen[b][o] == g): the common enqueue case.
    clocks = [[0] * (na + 1) for _ in range(na)]
    seen = [[-1] * na for _ in range(na)]
    end_snap: list[list[int] | None] = [None] * n  # by op id, while still needed
    start_snap: list[list[int] | None] = [None] * n
    rng = range(na)
    hb = HappensBefore(trace, tuple(agents), agent_of)
    keep_starts = hb.starts
    keep_ends = hb.ends

    def join(b: int, C: list[int], S: list[int], o: int) -> None:
        """C (agent b's clock) ⊔= S (a snapshot of agent o)."""
        seen_b = seen[b]
        g = S[na]
        if seen_b[o] == g:
            v = S[o]
            if v > C[o]:
                C[o] = v
                C[na] += 1
            return
        changed = False
        for i in rng:
            v = S[i]
            if v > C[i]:
                C[i] = v
                changed = True
        if changed:
            C[na] += 1
        seen_b[o] = g

    def missing(user: Op, r: int, what: str) -> ValueError:
        return ValueError(f"op {user.id} ({user.name}) needs op {r} to have {what} before it in the "
                          f"trace's sequence")

    # Hazard bookkeeping: (first, second, kind, rank, buffer) -> [lo, hi, first_mode, second_mode,
    # second starts before first ends, first starts before second ends]
    found: dict[tuple, list] = {}
    # Per storage (rank, buffer): sorted segment starts and segments [lo, hi, last_write, reads], where
    # last_write = (op, agent, epoch, access) and reads = {agent: (op, epoch, access)} or None.
    stores: dict[tuple[int, str], tuple[list[int], list[list]]] = {}
    views: dict[int, list] = {}  # id(view) -> view_entry(view): views are shared by many accesses
    views_get = views.get
    _id = id

    def report(first: tuple, op: Op, acc, kind: str, lo: int, hi: int, rank: int, buf: str) -> None:
        fid = first[0]
        fop = ops[fid]
        if op.kind == "free" or fop.kind == "free":
            kind = USE_AFTER_FREE
        elif kind == WAW:
            raw = found.get((fid, op.id, RAW, rank, buf))
            if raw is not None and raw[0] <= lo and hi <= raw[1]:
                return  # an in-place op: its read already reported the race with this write
        facc = first[-1]
        f0, f1 = fop.window_time(facc)
        s0, s1 = op.window_time(acc)
        # manifest if the later-issued access started before the earlier-issued one ended; which
        # of the two was issued first is settled once, in _in_issue_order
        key = (fid, op.id, kind, rank, buf)
        h = found.get(key)
        if h is None:
            found[key] = [lo, hi, facc.mode, acc.mode, s0 < f1, f0 < s1]
        else:
            if lo < h[0]:
                h[0] = lo
            if hi > h[1]:
                h[1] = hi
            h[4] = h[4] or s0 < f1
            h[5] = h[5] or f0 < s1

    def view_entry(v) -> list:
        """[segment last spanning exactly v, starts, segs, lo, hi, rank, buffer] for view v."""
        sk = (v.rank, v.buffer)
        st = stores.get(sk)
        if st is None:
            st = stores[sk] = ([], [])
        ent = views[id(v)] = [_NO_SEGMENT, st[0], st[1], v.offset, v.offset + v.nbytes, v.rank,
                              v.buffer]
        return ent

    for op in filter(None, seq):
        if op.__class__ is int:  # an end that matters
            oid = ~op
            op = ops[oid]
            a = agent_of[oid]
            C = clocks[a]
            for r in op.joins:
                S = start_snap[r]
                if S is None:
                    raise missing(op, r, "started")
                join(a, C, S, agent_of[r])
                k = start_need[r] - 1
                start_need[r] = k
                if not k:
                    start_snap[r] = None
            if end_need[oid]:
                end_snap[oid] = C[:]
            if keep_clocks:
                keep_ends[oid] = C[:na]
            continue

        oid = op.id
        a = agent_of[oid]
        C = clocks[a]
        r = op.issuer
        if r is not None:
            S = end_snap[r]
            if S is None:
                raise missing(op, r, "ended")
            k = end_need[r] - 1
            if k:
                end_need[r] = k
            else:
                end_snap[r] = None
            o = agent_of[r]
            if seen[a][o] == S[na]:  # join() inlined for the common case: only o's epoch is new
                v = S[o]
                if v > C[o]:
                    C[o] = v
                    C[na] += 1
            else:
                join(a, C, S, o)
        if op.after:
            for r in op.after:
                S = end_snap[r]
                if S is None:
                    raise missing(op, r, "ended")
                k = end_need[r] - 1
                if k:
                    end_need[r] = k
                else:
                    end_snap[r] = None
                join(a, C, S, agent_of[r])
        e = op.index + 1
        if C[a] >= e:
            raise ValueError(f"op {oid} ({op.name}) is out of program order on {op.agent}")
        C[a] = e
        if start_need[oid]:
            start_snap[oid] = C[:]
        if end_need[oid] and not op.joins:
            end_snap[oid] = C[:]
        if keep_clocks:
            keep_starts[oid] = C[:na]

        accs = op.accesses
        if not accs:
            continue
        # Reads first, then writes: an in-place op checks its read against the previous write.
        # A view remembers the segment that last spanned exactly its bytes; while that segment is
        # alive with those bounds the access touches it alone (inlined), else _cover splits and
        # fills segments so that segs[i:j] tile the view.
        has_write = False
        for acc in accs:
            if acc.mode != READ:
                has_write = True
                continue
            ent = views_get(_id(acc.view))
            if ent is None:
                ent = view_entry(acc.view)
            s, starts, segs, lo, hi, rank, buf = ent
            rec = (oid, e, acc)
            if s[0] == lo and s[1] == hi:
                w = s[2]
                if w is not None and C[w[1]] < w[2]:
                    report(w, op, acc, RAW, lo, hi, rank, buf)
                rd = s[3]
                if rd is None:
                    s[3] = {a: rec}
                else:
                    rd[a] = rec
                continue
            if hi <= lo:
                continue
            i, j = _cover(starts, segs, lo, hi)
            if j - i == 1:
                ent[0] = segs[i]
            for k in range(i, j):
                s = segs[k]
                w = s[2]
                if w is not None and C[w[1]] < w[2]:
                    report(w, op, acc, RAW, s[0], s[1], rank, buf)
                rd = s[3]
                if rd is None:
                    s[3] = {a: rec}
                else:
                    rd[a] = rec
        if not has_write:
            continue
        for acc in accs:
            if acc.mode == READ:
                continue
            ent = views_get(_id(acc.view))
            if ent is None:
                ent = view_entry(acc.view)
            s, starts, segs, lo, hi, rank, buf = ent
            wrec = (oid, a, e, acc)
            if s[0] == lo and s[1] == hi:
                w = s[2]
                if w is not None and C[w[1]] < w[2]:
                    report(w, op, acc, WAW, lo, hi, rank, buf)
                rd = s[3]
                if rd is not None:
                    for ra, rr in rd.items():
                        if C[ra] < rr[1]:
                            report((rr[0], ra, rr[1], rr[2]), op, acc, WAR, lo, hi, rank, buf)
                    s[3] = None
                s[2] = wrec
                continue
            if hi <= lo:
                continue
            i, j = _cover(starts, segs, lo, hi)
            for k in range(i, j):
                s = segs[k]
                w = s[2]
                if w is not None and C[w[1]] < w[2]:
                    report(w, op, acc, WAW, s[0], s[1], rank, buf)
                rd = s[3]
                if rd:
                    for ra, rr in rd.items():
                        if C[ra] < rr[1]:
                            report((rr[0], ra, rr[1], rr[2]), op, acc, WAR, s[0], s[1], rank, buf)
                s[0] = None  # dead: no view's remembered segment any more
            ent[0] = s = [lo, hi, wrec, None]
            segs[i:j] = [s]
            starts[i:j] = [lo]

    hazards = _in_issue_order(trace, found)
    hazards.sort(key=lambda h: (h.second, h.first, h.kind, h.rank, h.buffer, h.range))
    return Analysis(hazards, hb)


_KIND_OF_MODES = {(WRITE, READ): RAW, (READ, WRITE): WAR, (WRITE, WRITE): WAW}


def _in_issue_order(trace: Trace, found: dict) -> list[Hazard]:
    """Hazards with ``first`` the op issued first (the pass meets ops in start order, and a send
    issued before a forward can start after it): the kind then names the issue order, as
    SEMANTICS.md defines it, and ``manifest`` means the second access started before the first
    ended (a write before the earlier-issued read even began corrupts it too). Pairs that become the
    same hazard are merged."""
    ops = trace.ops
    merged: dict[tuple, list] = {}
    for (fid, sid, kind, rank, buf), (lo, hi, fmode, smode, s_before_f_end, f_before_s_end) \
            in found.items():
        a, b = ops[fid], ops[sid]
        manifest = s_before_f_end
        if issue_order(trace, a, b)[0] is b:
            fid, sid, fmode, smode = sid, fid, smode, fmode
            manifest = f_before_s_end
            if kind != USE_AFTER_FREE:
                kind = _KIND_OF_MODES[(fmode, smode)]
        key = (fid, sid, kind, rank, buf)
        h = merged.get(key)
        if h is None:
            merged[key] = [lo, hi, fmode, smode, manifest]
        else:
            h[0], h[1], h[4] = min(h[0], lo), max(h[1], hi), h[4] or manifest
    return [Hazard(kind=k[2], rank=k[3], buffer=k[4], range=(h[0], h[1]), first=k[0], second=k[1],
                   first_mode=h[2], second_mode=h[3], manifest=h[4]) for k, h in merged.items()]


_NO_SEGMENT = [None, None, None, None]  # a view's remembered segment before it has one


def _cover(starts: list[int], segs: list[list], lo: int, hi: int) -> tuple[int, int]:
    """Make segments ``segs[i:j]`` tile ``[lo, hi)`` exactly (splitting and filling gaps); return i, j.

    A segment is ``[lo, hi, last_write, reads]``; ``starts[k] == segs[k][0]``, sorted, non-overlapping.
    A split copies the reads dict so that each segment owns its own.
    """
    i = bisect_right(starts, lo) - 1
    if i >= 0 and segs[i][1] > lo:
        s = segs[i]
        if s[0] < lo:  # split off the part before lo
            i += 1
            segs.insert(i, [lo, s[1], s[2], dict(s[3]) if s[3] else None])
            starts.insert(i, lo)
            s[1] = lo
    else:
        i += 1
    j = i
    pos = lo
    while pos < hi:
        if j < len(segs) and segs[j][0] == pos:
            s = segs[j]
            if s[1] > hi:  # split off the part after hi
                segs.insert(j + 1, [hi, s[1], s[2], dict(s[3]) if s[3] else None])
                starts.insert(j + 1, hi)
                s[1] = hi
            pos = s[1]
        else:
            end = segs[j][0] if j < len(segs) and segs[j][0] < hi else hi
            segs.insert(j, [pos, end, None, None])
            starts.insert(j, pos)
            pos = end
        j += 1
    return i, j

