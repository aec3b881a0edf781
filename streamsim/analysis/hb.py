"""Happens-before analysis: vector clocks and FastTrack-style per-byte-range state, in issue order.

One pass, no graph, linear in the number of ops and accesses. The relation computed is
happens-before as the docs define it:

* every op ``x`` gets a *start clock* ``S(x)`` and an *end clock* ``E(x)``, sparse vectors over
  agents;
* ``S(x) = E(prev op of x's agent) ⊔ E(issuer) ⊔ E(a) for a in after``, then x's own component is
  set to its epoch ``index + 1``;
* ``E(x) = S(x) ⊔ S(j) for j in joins`` (a join source's start, hence its accesses, is ordered
  before what follows x, not before x itself);
* op ``a`` happens before op ``b`` (their accesses are ordered) iff ``a != b`` and
  ``S(b)[agent(a)] >= epoch(a)``.

The readable reference is :mod:`streamsim.analysis.hbgraph`: the same relation as brute-force
reachability on a networkx graph of the same edges (``full_graph``, ``happens_before``), which the
tests compare this pass with. The rule numbers in the comments below are those of
docs/semantics.md, "What orders what": the pass reads only the trace's three edge fields
(``issuer``, ``after``, ``joins``) and program order, which the engine set by those rules.

**Issue order.** Ops are taken in the order of issue (``trace.issue_keys``: an op log's line
order; a model's threads round-robin by program position; a stream op at the host action that
enqueued it). An op whose predecessors are not all processed first pulls them in, depth first,
smallest key first, and goes right after them: so every op is processed at its own place of issue,
and what it must wait for (a receive's completion waits for its matched send's read, which another
rank may have issued later) comes forward to meet it. The result is a linear extension of
happens-before in which no op moves behind a later-issued op it does not depend on. Simulated time
plays no part, so the reported pairs are the same under every seed and jitter.

**What is reported.** Accesses are checked with the op's start clock against FastTrack's state,
updated in that order. Per storage ``(rank, buffer)`` an interval map keeps, for each byte range,
the last write and the latest read of each agent since that write: a read is checked against the
last write, a write against the last write and those reads. Every reported pair is a race; every
byte with a race gets a hazard whose second access is the first one, in issue order, to race on
it; and a fix for each reported pair orders the unreported ones transitively (``tests/analysis``
checks all three against brute force on the networkx HB graph). A storage that some op frees also
keeps each agent's latest access since its previous free: a free is checked against all of them
(a free while another stream may still use the buffer), which a write in between would have hidden.

Hazards: one per (first op, second op, kind, storage), its range covering the racing segments;
``first`` is the op earlier in issue order. The kind is RAW, WAR or WAW from the two modes in that
order, or use-after-free when either op is a ``free``; an op that reads and writes the same bytes
(in place) reports its race with the previous write once, as RAW. ``manifest``: the second
access's window started before the first one's ended in simulated time (strictly).

**Strided views** (a view with a ``pattern``: ``x[:, 0::2]``) touch only some bytes of their
range. A segment that a strided access touches becomes *mixed*: instead of one last write and one
read per agent, it keeps a list of writes and reads, each with the view it used (None: a plain
access, which covers the whole segment), and forgets an entry only when a later access covers
its bytes there (a plain one, or the same strided view). A strided access skips a segment where
it has no byte, and is checked against the entries whose views share a byte with its own
(:func:`streamsim.strided.overlap`). So every reported pair still shares a byte and is a race,
the first racing access of each byte is still found, and an entry a mix of other views covers
may add a pair that FastTrack's per-byte state would leave unlisted (a real race too). The lists
are as long as the number of distinct strided views interleaved on one range (two for even and
odd columns); plain views of plain segments keep the fast path.

**Compiled.** Without kept clocks the pass runs compiled where :mod:`streamsim.native` is built
(``STREAMSIM_NATIVE=0``: never): the same algorithm in Cython (streamsim/native/_hb.pyx), held
byte-identical to this one by tests/native (strided views included); this module stays the
reference and the fallback.

One module because the pass is one loop whose hot paths (clock joins, segment lookups) are inlined
by hand: split into functions across modules, it pays a call per access on millions of accesses.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import chain

from .. import native
from ..strided import block_hits, covers
from ..trace import HOST, READ, WRITE, Access, Agent, Op, Trace, issue_keys
from .findings import RAW, USE_AFTER_FREE, WAR, WAW, Hazard

HAZARD_KINDS = (RAW, WAR, WAW, USE_AFTER_FREE)  # the kinds the pass reports, as the compiled pass
# takes their names


@dataclass
class HappensBefore:
    """Start (and end) clocks kept by :func:`hb_pass`: all of them with ``keep_clocks=True``."""

    trace: Trace = field(repr=False)
    agents: tuple[Agent, ...]
    agent_of: list[int] = field(repr=False)  # op id -> dense agent index
    starts: dict[int, dict[int, int]] = field(default_factory=dict, repr=False)  # op id -> clock
    ends: dict[int, dict[int, int]] = field(default_factory=dict, repr=False)  # op id -> end clock

    def ordered(self, a: int, b: int) -> bool:
        """True when op ``a`` happens before op ``b`` (b's start clock knows a's epoch)."""
        if a == b:
            return False
        try:
            clock = self.starts[b]
        except KeyError:
            raise KeyError(f"no clock kept for op {b}: use hb_pass(trace, keep_clocks=True)") \
                from None
        return clock.get(self.agent_of[a], 0) > self.trace.ops[a].index

    def concurrent(self, a: int, b: int) -> bool:
        """Neither op happens before the other."""
        return a != b and not self.ordered(a, b) and not self.ordered(b, a)

    def clock(self, op_id: int, end: bool = False) -> dict[Agent, int]:
        """The op's start (or end) clock as ``{agent: epoch}``, zero entries left out (to show)."""
        c = (self.ends if end else self.starts)[op_id]
        return {self.agents[i]: c[i] for i in sorted(c) if c[i]}


@dataclass
class Analysis:
    """What one pass produced: the hazards (sorted, without fixes), the clocks kept, and each op's
    position in issue order (``position[op id]``)."""

    hazards: list[Hazard]
    hb: HappensBefore
    position: list[int] = field(repr=False, default_factory=list)


def analyse_hazards(trace: Trace, fixes: bool = True) -> list[Hazard]:
    """Every data hazard of ``trace`` in issue order of (second op, first op); with their fixes."""
    # the compiled pass's hazards (no row, no list of every op's position made), else the
    # reference's
    hazards = native.hb_hazards(trace, HAZARD_KINDS, Hazard)
    if hazards is None:
        hazards = _analyse(trace, False, list(trace.agents)).hazards
    if not fixes:
        return hazards
    from .fixes import with_fixes  # late: fixes consumes hazards; hb does not depend on it
    return with_fixes(trace, hazards, fresh=True)  # (made here, held by no one else)


def hazard_count(trace: Trace) -> int:
    """``len(analyse_hazards(trace, fixes=False))``, the hazards not made: what a fix costing
    re-run needs of its trace (how many hazards its fixes left)."""
    got = native.hazard_count(trace, HAZARD_KINDS)
    if got is not None:
        return got
    return len(_analyse(trace, False, list(trace.agents)).hazards)  # (the pure-Python pass:
    # the compiled one declined just now)


def hb_pass(trace: Trace, keep_clocks: bool = False) -> Analysis:
    """Run the pass; keep every op's clocks when ``keep_clocks`` (for ``HappensBefore.ordered``).
    (Not ``analyse``: that is :func:`streamsim.analysis.checks.analyse`, which returns the
    ``Findings`` of a trace built on this pass.)"""
    return _analyse(trace, keep_clocks)


def _analyse(trace: Trace, keep_clocks: bool, agents: list[Agent] | None = None) -> Analysis:
    if not keep_clocks and agents is None:  # the compiled pass (streamsim.native), if it runs
        got = native.hb_rows(trace, None, HAZARD_KINDS)  # (its own keys)
        if got is not None:
            rows, position, agent_of = got
            return Analysis(_hazards(rows), HappensBefore(trace, tuple(trace.agents), agent_of),
                            position)
    ops = trace.ops
    n = len(ops)
    agents = list(trace.agents) if agents is None else agents
    na = len(agents)
    # Clocks are sparse dicts {agent: epoch} (memory grows with what an agent has seen, not with
    # agents squared). Each agent has a *generation*, bumped whenever a component of its clock other
    # than its own and its *partner*'s grows. The partner of a stream is its rank's first host
    # thread (which issues most of its ops), of a host itself. Two states of a clock at one
    # generation differ only in those two components, so one copy per generation stands for the
    # clock of every op that started in it, given the op's own epoch (index + 1) and, when the agent
    # has another partner, the op's partner component (``partner_of``). Each agent keeps its copies
    # with the epoch from which each holds (``hist_e``, ``hist_c``: (tag, copy)). So an op that
    # neither waits on anything, nor is issued, nor touches memory (most host actions: a launch)
    # needs no clock work at all, and what a later op needs of it is its agent's copy for its epoch.
    # An agent that already joined a copy of o tagged t (seen[b][o] == t) joins a later op of o by
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
    prev_on = [-1] * n  # op id -> the previous op of its agent (program order), -1 for the first
    last_on = [-1] * na
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
        prev_on[oid] = last_on[a]
        last_on[a] = oid
        if op.kind == "free":
            freed.update((acc.view.rank, acc.view.buffer) for acc in op.accesses)
    keys = issue_keys(trace)
    order = sorted(range(n), key=keys.__getitem__)  # (stable: ties by op id; near-sorted: cheap)

    clocks: list[dict[int, int]] = [{} for _ in range(na)]
    gen = [0] * na
    seen: list[dict[int, int]] = [{} for _ in range(na)]
    hist_e = [[0] for _ in range(na)]  # per agent: epochs from which each copy holds, ascending
    hist_c: list[list[tuple[int, dict]]] = [[(0, {})] for _ in range(na)]  # ... and the copies
    hist_g = [0] * na  # the generation of each agent's last copy
    partner_of = [0] * n
    end_of: list[tuple[int, dict] | None] = [None] * n  # exact end clocks of ops whose end joins
    hb = HappensBefore(trace, tuple(agents), agent_of)
    keep_starts = hb.starts
    keep_ends = hb.ends

    def start_copy(r: int) -> tuple[int, dict]:
        """The copy standing for op r's start clock (its agent's copy for r's epoch)."""
        o = agent_of[r]
        he = hist_e[o]
        e = ops[r].index + 1
        if he[-1] <= e:
            return hist_c[o][-1]
        return hist_c[o][bisect_right(he, e) - 1]

    def end_copy(r: int) -> tuple[int, dict]:
        """The copy standing for op r's end clock: exact when its end joined something."""
        S = end_of[r]
        return start_copy(r) if S is None else S

    def join(b: int, C: dict, S: tuple[int, dict], r: int) -> None:
        """Agent b's clock C ⊔= op r's clock, whose copy is S (see above)."""
        pb = partner[b]
        o = agent_of[r]
        changed = False
        get = C.get
        for i, x in S[1].items():
            if x > get(i, 0):
                C[i] = x
                if i != b and i != pb:
                    changed = True
        v = ops[r].index + 1
        if v > get(o, 0):
            C[o] = v
            if o != b and o != pb:
                changed = True
        p = partner[o]
        if p != o:
            v = partner_of[r]
            if v > get(p, 0):
                C[p] = v
                if p != b and p != pb:
                    changed = True
        if changed:
            gen[b] += 1
        seen[b][o] = S[0]

    def new_copy(a: int, C: dict, e: int) -> None:
        """Agent a's generation changed: its clock from epoch e on is C's (a copy)."""
        hist_e[a].append(e)
        hist_c[a].append((gen[a], dict(C)))
        hist_g[a] = gen[a]

    # Hazard bookkeeping: (first, second, kind, rank, buffer) -> its _Found (range, modes, manifest)
    found: dict[tuple, _Found] = {}
    # Per storage (rank, buffer): sorted segment starts, its live _Segments (FastTrack's state of
    # each byte range), and for a storage that some op frees its touched map (see _ViewState).
    # A live segment never changes its bounds: a split replaces it with new ones and kills it
    # (lo = None), so a view that remembers a live segment spanning exactly its bytes can use it
    # without a lookup.
    stores: dict[tuple[int, str], tuple[list[int], list[_Segment], dict | None]] = {}
    # id(view) -> its _ViewState: views are shared by the many accesses to one buffer
    entries: dict[int, _ViewState] = {}
    entries_get = entries.get

    def report(first: tuple, fmode: str, op: Op, acc, kind: str, lo: int, hi: int, rank: int,
               buf: str) -> None:
        """Record the race of ``op``'s access ``acc`` (second) with ``first``'s mark (its
        (op, agent, epoch)) on bytes [lo, hi) of (rank, buf)."""
        fid = first[0]
        fop = ops[fid]
        if op.kind == "free" or fop.kind == "free":
            kind = USE_AFTER_FREE
        elif kind == WAW:
            raw = found.get((fid, op.id, RAW, rank, buf))
            if raw is not None and raw.lo <= lo and hi <= raw.hi:
                return  # an in-place op: its read already reported the race with this write
        facc = _access_of(fop, fmode, rank, buf, lo, hi)
        sid, smode = op.id, acc.mode
        if keys[fid] > keys[sid]:
            # The pull brought `op` forward, ahead of an earlier-issued op of its own thread that
            # writes into (or reads) its buffer (a receive whose completion waits for a send issued
            # later: tests/analysis/test_issue_order.py): the pair is named in issue order, and its
            # kind is that of the two accesses in that order.
            fop, facc, fmode, op, acc, smode = op, acc, smode, fop, facc, fmode
            fid, sid = fop.id, op.id
            if kind != USE_AFTER_FREE:
                kind = WAW if fmode == smode else (RAW if fmode == WRITE else WAR)
        # manifest: the second access started before the first one ended
        manifest = op.window_time(acc)[0] < fop.window_time(facc)[1]
        key = (fid, sid, kind, rank, buf)
        h = found.get(key)
        if h is None:
            found[key] = _Found(lo, hi, fmode, smode, manifest)
        else:
            if lo < h.lo:
                h.lo = lo
            if hi > h.hi:
                h.hi = hi
            if manifest:
                h.manifest = True

    def entry(v) -> _ViewState:
        sk = (v.rank, v.buffer)
        st = stores.get(sk)
        if st is None:
            st = stores[sk] = ([], [], {} if sk in freed else None)
        starts, segs, touched = st
        ent = entries[_id(v)] = _ViewState(v, starts, segs, touched)
        return ent

    def touch(touched: dict, op: Op, a: int, rec: tuple, acc: Access, C: dict,
              ent: _ViewState) -> None:
        """Record op's access of a freed-somewhere storage; a free first checks, for every other
        agent, its latest access since the previous free: the use-after-free rule (a free while
        another stream may still use the buffer), which the last-write and reads-since rules alone
        miss once a later write has replaced what that agent touched."""
        if op.kind == "free":
            lo, hi = ent.lo, ent.hi
            for b, (r, racc) in touched.items():
                if b != a and C.get(b, 0) < r[_EPOCH]:
                    v = racc.view
                    flo, fhi = max(lo, v.offset), min(hi, v.offset + v.nbytes)
                    if flo < fhi:
                        report(r, racc.mode, op, acc, USE_AFTER_FREE, flo, fhi, ent.rank,
                               ent.buffer)
            touched.clear()
        touched[a] = (rec, acc)

    def mixed(segs: list, k: int, op: Op, acc: Access, a: int, rec: tuple, Cg, ent: _ViewState
              ) -> None:
        """Check and record ``acc`` on segment ``segs[k]`` as a mixed segment (see the module
        docstring): a strided access, or a plain one on a segment some strided access made mixed
        (a plain access covers the whole segment; ``ent`` is its view's state)."""
        s = segs[k]
        v = acc.view
        pat = v.pattern
        lo, hi = s.lo, s.hi
        if pat is not None and not block_hits(pat, v.offset, v.nbytes, lo, hi):
            return  # the view has no byte here
        m = s.mixed
        if m is None:  # a plain segment becomes mixed: a new object (views remember the old one)
            m = _Mixed([(s.write, None)] if s.write is not None else [],
                       [(r, None) for r in s.reads.values()] if s.reads else [])
            s.lo = None
            s = segs[k] = _Segment(lo, hi, None, None, m)
        # an entry of view None covered the segment, where this access has a byte: they share it
        write = acc.mode == WRITE
        own = v if pat is not None else None
        for w, wv in m.writes:
            if Cg(w[1], 0) < w[2] and (wv is None or wv.overlaps(v)):
                report(w, WRITE, op, acc, WAW if write else RAW, lo, hi, ent.rank, ent.buffer)
        if write:
            for r, rv in m.reads:
                if Cg(r[1], 0) < r[2] and (rv is None or rv.overlaps(v)):
                    report(r, READ, op, acc, WAR, lo, hi, ent.rank, ent.buffer)
            m.writes = [e for e in m.writes if not _covered(e[1], v, lo, hi)]
            m.writes.append((rec, own))
            m.reads = [e for e in m.reads if not _covered(e[1], v, lo, hi)]
        else:
            m.reads = [e for e in m.reads if e[0][1] != a or not _covered(e[1], v, lo, hi)]
            m.reads.append((rec, own))

    # Issue order: walk the ops by key. An op whose predecessors are not all processed first pulls
    # them in: a depth-first walk (``stack``) over its unprocessed predecessors, smallest key first,
    # so that they are processed just before it; everything else keeps its place. A node is an op's
    # start (its id) or, for an op whose end joins something, its end (~id): such an end is
    # processed when something needs it, or at the very end (it has no accesses of its own).
    ended = bytearray(n)  # the op's end is processed (its start, for an op whose end joins nothing)
    started = bytearray(n)
    pending = bytearray(n)  # a start on the stack (pending[id] & 1) or an end (& 2): cycle check
    position = [0] * n
    count = 0
    walk = chain(order, [~i for i in range(n) if ops[i].joins])
    stack: list[int] = []

    def blocker(oid: int) -> int:
        """The unprocessed predecessor of op oid's start with the smallest key, as a node."""
        op = ops[oid]
        best = None
        cands = [x for x in (prev_on[oid], op.issuer) if x is not None and x >= 0]
        cands += op.after
        for x in cands:
            if not ended[x] and (best is None or (keys[x], x) < (keys[best], best)):
                best = x
        return ~best if ops[best].joins else best  # (an end pulls its own start first)

    def push(node: int) -> None:
        bit, x = (2, ~node) if node < 0 else (1, node)
        if pending[x] & bit:
            raise ValueError(f"op {x} ({ops[x].name}) can never be processed: the trace's ordering "
                             "edges form a cycle")
        pending[x] |= bit
        stack.append(node)

    for root in walk:
        while True:
            if stack:
                oid = stack[-1]
            else:  # the next op by key: the common case, ready and never on the stack
                oid = root
                if oid < 0:
                    if ended[~oid]:
                        break
                    push(oid)
                elif started[oid]:
                    break
            # Rule 6 (messages, collectives): an op's end joins the *starts* of its ``joins`` (a
            # send's read comes before what follows the receive, not before the receive itself).
            if oid < 0:  # the end of an op that joins: it and every joined op must have started
                oid = ~oid
                op = ops[oid]
                need = oid if not started[oid] else min(
                    (j for j in op.joins if not started[j]), key=lambda j: (keys[j], j),
                    default=None)
                if need is not None:
                    push(need)
                    continue
                stack.pop()
                pending[oid] &= ~2
                a = agent_of[oid]
                C = clocks[a]
                g = gen[a]
                for r in op.joins:
                    join(a, C, start_copy(r), r)
                # exact, under a tag no one has seen: joined in full
                end_of[oid] = (-2 - oid, dict(C))
                if gen[a] != g:
                    new_copy(a, C, op.index + 2)
                if keep_clocks:
                    keep_ends[oid] = dict(C)
                ended[oid] = 1
                continue

            # An op's start: every predecessor (rule 1's previous op of its agent, rule 2's issuer,
            # its ``after`` edges) must have been processed first, else it is pulled in.
            op = ops[oid]
            p = prev_on[oid]
            r = op.issuer
            if (p >= 0 and not ended[p]) or (r is not None and not ended[r]) or \
                    (op.after and 0 in [ended[x] for x in op.after]):
                if not stack:
                    push(oid)  # (a root that must wait: it goes on the stack under what it needs)
                push(blocker(oid))
                continue
            if stack:
                stack.pop()
                pending[oid] &= ~1
            a = agent_of[oid]
            position[oid] = count
            count += 1
            started[oid] = 1
            if r is None and may_skip[a] and not op.accesses and not op.after and not op.joins:
                ended[oid] = 1  # nothing to compute (see the clock comment above)
                continue

            C = clocks[a]  # rule 1 (program order): the agent's clock already holds its previous op
            if r is not None:  # rule 2 (enqueue): the host action that issued a stream op
                S = end_of[r]
                o = agent_of[r]
                rop = ops[r]
                v = rop.index + 1
                if S is None:  # end_copy() inlined for the common case
                    he = hist_e[o]
                    S = hist_c[o][-1] if he[-1] <= v else hist_c[o][bisect_right(he, v) - 1]
                if seen[a].get(o) == S[0]:  # join() inlined for the common case (see above)
                    if v > C.get(o, 0):
                        C[o] = v
                        if o != partner[a]:
                            gen[a] += 1
                    q = partner[o]
                    if q != o:
                        v = partner_of[r]
                        if v > C.get(q, 0):
                            C[q] = v
                            if q != partner[a] and q != a:
                                gen[a] += 1
                else:
                    join(a, C, S, r)
            # rules 3 (event waits), 4 (host syncs, blocking waits), 5 (NCCL enqueue: the comm
            # stream waits on the current stream), 7 (handle waits, is_completed() True) and the
            # free's record_stream waits (Memory): ops that end before this one starts
            for x in op.after:
                join(a, C, end_copy(x), x)
            e = op.index + 1
            if C.get(a, 0) >= e:
                raise ValueError(f"op {oid} ({op.name}) is out of program order on {op.agent}")
            C[a] = e
            if partner[a] != a:
                partner_of[oid] = C.get(partner[a], 0)
            if gen[a] != hist_g[a]:
                new_copy(a, C, e)
            if keep_clocks:
                keep_starts[oid] = dict(C)
            if not op.joins:
                ended[oid] = 1

            accs = op.accesses
            if not accs:
                continue
            # Accesses list reads before writes (Op's invariant): an in-place op checks its read
            # against the previous write before its own write replaces it. A remembered live segment
            # is used inline; else _cover splits and fills segments so that segs[i:j] tile the
            # access's bytes.
            Cg = C.get
            rec = (oid, a, e)  # this op's mark: (op, agent, epoch); w[1] < w[2] below reads a
            # mark's agent and epoch (literal indices: module constants cost a lookup per access)
            for acc in accs:
                ent = entries_get(_id(acc.view))
                if ent is None:
                    ent = entry(acc.view)
                if ent.touched is not None:  # a storage some op frees: the use-after-free rule
                    touch(ent.touched, op, a, rec, acc, C, ent)
                if ent.strided:  # a strided view: every segment of its hull, mixed
                    if ent.hi > ent.lo:
                        segs = ent.segs
                        i, j = _cover(ent.starts, segs, ent.lo, ent.hi)
                        for k in range(i, j):
                            mixed(segs, k, op, acc, a, rec, Cg, ent)
                    continue
                s = ent.seg
                if acc.mode == READ:  # a read is checked against the last write
                    if s.lo is not None:
                        w = s.write
                        if w is not None and Cg(w[1], 0) < w[2]:
                            report(w, WRITE, op, acc, RAW, ent.lo, ent.hi, ent.rank, ent.buffer)
                        rd = s.reads
                        if rd is None:
                            s.reads = {a: rec}
                        else:
                            rd[a] = rec
                        continue
                    lo, hi = ent.lo, ent.hi
                    if hi <= lo:
                        continue
                    segs = ent.segs
                    i, j = _cover(ent.starts, segs, lo, hi)
                    if j - i == 1 and segs[i].mixed is None:
                        ent.seg = segs[i]
                    for k in range(i, j):
                        s = segs[k]
                        if s.mixed is not None:
                            mixed(segs, k, op, acc, a, rec, Cg, ent)
                            continue
                        w = s.write
                        if w is not None and Cg(w[1], 0) < w[2]:
                            report(w, WRITE, op, acc, RAW, s.lo, s.hi, ent.rank, ent.buffer)
                        rd = s.reads
                        if rd is None:
                            s.reads = {a: rec}
                        else:
                            rd[a] = rec
                    continue
                # a write is checked against the last write and every read since it
                if s.lo is not None:
                    w = s.write
                    if w is not None and Cg(w[1], 0) < w[2]:
                        report(w, WRITE, op, acc, WAW, ent.lo, ent.hi, ent.rank, ent.buffer)
                    rd = s.reads
                    if rd is not None:
                        for rr in rd.values():
                            if Cg(rr[1], 0) < rr[2]:
                                report(rr, READ, op, acc, WAR, ent.lo, ent.hi, ent.rank,
                                       ent.buffer)
                        s.reads = None
                    s.write = rec
                    continue
                lo, hi = ent.lo, ent.hi
                if hi <= lo:
                    continue
                starts, segs = ent.starts, ent.segs
                i, j = _cover(starts, segs, lo, hi)
                for k in range(i, j):
                    s = segs[k]
                    if s.mixed is not None:  # checked as mixed, then replaced as the others
                        mixed(segs, k, op, acc, a, rec, Cg, ent)
                        s = segs[k]
                        s.lo = None
                        continue
                    w = s.write
                    if w is not None and Cg(w[1], 0) < w[2]:
                        report(w, WRITE, op, acc, WAW, s.lo, s.hi, ent.rank, ent.buffer)
                    rd = s.reads
                    if rd:
                        for rr in rd.values():
                            if Cg(rr[1], 0) < rr[2]:
                                report(rr, READ, op, acc, WAR, s.lo, s.hi, ent.rank, ent.buffer)
                    s.lo = None  # dead: replaced by the one segment below
                ent.seg = s = _Segment(lo, hi, rec, None)
                segs[i:j] = [s]
                starts[i:j] = [lo]

    rows = sorted((position[sid], position[fid], kind, rank, buf, h.lo, h.hi, fid, sid, h.fmode,
                   h.smode, h.manifest)
                  for (fid, sid, kind, rank, buf), h in found.items())
    return Analysis(_hazards(rows), hb, position)


def _hazards(rows: list[tuple]) -> list[Hazard]:
    """The hazards of the pass's sorted rows (position of second, position of first, kind, rank,
    buffer, lo, hi, first, second, modes, manifest): the one form both paths return."""
    made = native.hazards(rows, Hazard)  # (made by their slots: tests/native/test_fixes)
    if made is not None:
        return made
    return [Hazard(kind, rank, buf, (lo, hi), fid, sid, fmode, smode, manifest)
            for _, _, kind, rank, buf, lo, hi, fid, sid, fmode, smode, manifest in rows]


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


_AGENT, _EPOCH = 1, 2  # fields of a mark (op, agent, epoch): who accessed, at which epoch


class _Segment:
    """FastTrack's state of one byte range ``[lo, hi)`` of a storage: the mark (op, agent, epoch)
    of its last write (None: none yet), and ``reads`` {agent: mark}, each agent's latest read since
    that write (None: none). ``lo`` None: dead (split or replaced; its bounds never change while
    it lives, so a view may remember it)."""

    __slots__ = ("lo", "hi", "write", "reads", "mixed")

    def __init__(self, lo: int | None, hi: int | None, write: tuple | None, reads: dict | None,
                 mixed: "_Mixed | None" = None):
        self.lo = lo
        self.hi = hi
        self.write = write
        self.reads = reads
        self.mixed = mixed  # a strided access touched it: its state is there (write, reads None)


class _Mixed:
    """The state of a mixed segment: ``writes`` and ``reads``, lists of (mark, view) in issue
    order, view None for a plain access (it covered the segment); an entry is dropped once a
    later write (a read: a later read of its agent) covers its bytes in the segment."""

    __slots__ = ("writes", "reads")

    def __init__(self, writes: list, reads: list):
        self.writes = writes
        self.reads = reads

    def copy(self) -> "_Mixed":
        return _Mixed(list(self.writes), list(self.reads))


def _covered(entry_view, v, lo: int, hi: int) -> bool:
    """Does view ``v`` (a plain one covers the segment) touch every byte that an entry of view
    ``entry_view`` (None: plain, the whole segment) touches in ``[lo, hi)``?"""
    if v.pattern is None or entry_view == v:
        return True
    return entry_view is None and covers(v.pattern, v.offset, v.nbytes, lo, hi)


class _ViewState:
    """What the pass keeps of one view (shared by the many accesses to its bytes): the live
    segment it remembers when one spans exactly its bytes (``seg``; a dead one until then), its
    bytes, its storage's segment starts and segments, and ``touched``: for a storage that some op
    frees, {agent: (mark, access)}, each agent's latest access since the storage's last free (None
    for the others, which need no such record). The view is kept so that its id is not reused."""

    __slots__ = ("seg", "lo", "hi", "starts", "segs", "rank", "buffer", "view", "touched",
                 "strided")

    def __init__(self, v, starts: list[int], segs: list[_Segment], touched: dict | None):
        self.seg = _DEAD
        self.lo = v.offset
        self.hi = v.offset + v.nbytes
        self.starts = starts
        self.segs = segs
        self.rank = v.rank
        self.buffer = v.buffer
        self.view = v
        self.touched = touched
        self.strided = v.pattern is not None


class _Found:
    """A hazard being gathered: the bytes it covers so far, the two modes, and whether any of its
    instances was manifest."""

    __slots__ = ("lo", "hi", "fmode", "smode", "manifest")

    def __init__(self, lo: int, hi: int, fmode: str, smode: str, manifest: bool):
        self.lo = lo
        self.hi = hi
        self.fmode = fmode
        self.smode = smode
        self.manifest = manifest


_DEAD = _Segment(None, None, None, None)  # a view's remembered segment before it has a live one


def _cover(starts: list[int], segs: list[_Segment], lo: int, hi: int) -> tuple[int, int]:
    """Make segments ``segs[i:j]`` tile ``[lo, hi)`` exactly (splitting and filling gaps); return
    i, j.

    ``starts[k] == segs[k].lo``, sorted, not overlapping. A split replaces the segment with two
    new ones (each with its own copy of the reads) and kills it (``lo = None``): a live segment
    keeps its bounds, which views that remember it rely on.
    """
    i = bisect_right(starts, lo) - 1
    if i >= 0 and segs[i].hi > lo:
        s = segs[i]
        if s.lo < lo:  # split off the part before lo
            segs[i:i + 1] = [_Segment(s.lo, lo, s.write, dict(s.reads) if s.reads else None,
                                      s.mixed and s.mixed.copy()),
                             _Segment(lo, s.hi, s.write, dict(s.reads) if s.reads else None,
                                      s.mixed and s.mixed.copy())]
            starts.insert(i + 1, lo)
            s.lo = None
            i += 1
    else:
        i += 1
    j = i
    pos = lo
    while pos < hi:
        if j < len(segs) and segs[j].lo == pos:
            s = segs[j]
            if s.hi > hi:  # split off the part after hi
                segs[j:j + 1] = [_Segment(s.lo, hi, s.write, dict(s.reads) if s.reads else None,
                                          s.mixed and s.mixed.copy()),
                                 _Segment(hi, s.hi, s.write, dict(s.reads) if s.reads else None,
                                          s.mixed and s.mixed.copy())]
                starts.insert(j + 1, hi)
                s.lo = None
                s = segs[j]
            pos = s.hi
        else:
            end = segs[j].lo if j < len(segs) and segs[j].lo < hi else hi
            segs.insert(j, _Segment(pos, end, None, None))
            starts.insert(j, pos)
            pos = end
        j += 1
    return i, j
