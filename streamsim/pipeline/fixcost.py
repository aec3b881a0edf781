"""What the proposed fixes cost: re-simulate the run with them applied, and measure.

It needs the simulator (to re-run) and the analysis (to find the fixes and check the re-run), so it
sits in pipeline, above both. Fixes close in one pass (the analysis reports, in issue order, a pair
for every race that the others do not order transitively), so one re-run is enough: what the fixed
run still reports is shown as it is, not patched over with further rounds. Each root cause's fix
alone is costed too (a re-run each), for the first root causes only: at most 20, and no more than
fit in a budget of re-simulated ops, so that costing stays within a bounded multiple of the run.
"""
from __future__ import annotations

import functools
from array import array
from typing import TYPE_CHECKING, Callable, Sequence

from ..analysis.checks import FixCost, FixShift, analyse, distinct_fixes
from ..analysis.findings import Findings, Fix, Hazard
from ..analysis.hb import HAZARD_KINDS, hazard_count
from ..analysis.liveness import deadlock_from_stall
from ..analysis.metrics import Metrics, compute_metrics, memory_of, metrics_of
from ..sim.errors import InternalError
from ..sim.inject import key_fixes
from ..trace import HOST, Op, Trace

if TYPE_CHECKING:
    from ..oplog.leanrun import LeanRun

MAX_COSTED_ROOT_CAUSES = 20  # root causes costed one by one (each is a re-simulation)
# Trace ops re-simulated for the root causes' own costs, in all: each re-simulation runs the whole
# program again, so without a bound a large log's costing would take 20 times its check.
ROOT_CAUSE_COST_BUDGET = 1_000_000

# (keyed fixes: no trace needed to inject them) -> the re-run: its Trace, or the run as the compiled
# replay keeps it, in columns (an op log's: oplog.leanrun.LeanRun, whose trace() is the Trace),
# which cost_of measures without making its Op objects
Rerun = Callable[[list], "Trace | LeanRun"]


def cost_fixes(trace: Trace, findings: Findings, rerun: Rerun,
               before: Metrics | None = None, keyed: "Keying | None" = None) -> FixCost | None:
    """Re-simulate with every distinct fix applied (``rerun(keyed_fixes) -> Trace``) and measure
    it; None when no hazard has a fix. ``before``: the run's metrics, if the caller has them;
    ``keyed``: the fixes of ``findings`` keyed once (:class:`Keying`), if the caller has them."""
    return cost_of(trace, findings.hazards, rerun, before or compute_metrics(trace),
                 keyed or Keying(trace, findings))


class Keying:
    """Every distinct fix of a run's findings keyed for injection once (a keying scans the whole
    trace): the keyed fixes of any subset of its hazards, in order, without scanning again.

    Each of the findings' hazards is numbered once by its keyed sync (a hazard's fix and its
    keyed form are hashed here, once), so that the keyed fixes of a group are a walk over ints:
    hashing fixes (tuples of agents and keys) per group was most of fix costing's own work."""

    def __init__(self, trace: Trace, findings: Findings):
        hazards = findings.hazards
        self._hazards = hazards  # (kept alive: ``_position`` is keyed by their ids)
        from .. import native  # (local: the optional compiled core; tests/native/test_keying.py)
        compiled = native.keying(trace, hazards, Fix, Hazard)  # (compiled: no Agent hashed)
        if compiled is not None:
            fixes, self._keyed, sync_of, self._sync, host = compiled
        else:
            fixes, self._keyed, sync_of, self._sync, host = _keying(trace, hazards)
        self._fixes, self._sync_of = fixes, sync_of
        # the start of the op each fix's sync delays in the run as it was (fix_shift's "before"
        # side: the same for every subset costed, so found once rather than by a scan of the
        # trace per re-run); the host action each key names is the one its fix named (by op
        # id), so no scan of the trace finds them again (tests/pipeline/test_keying.py)
        if host is None:
            host = _keyed_host_ops(trace, {kf.before for kf in self._keyed})
        self.delayed_start = _delayed_starts(trace, host)

    @functools.cached_property
    def _position(self) -> dict[int, int]:
        """``id(hazard)`` -> its place among the findings' hazards (``_sync``'s index), made
        at the first group of them asked for: every fix at once asks none."""
        return {id(h): i for i, h in enumerate(self._hazards)}

    @functools.cached_property
    def _of(self) -> dict[tuple, int]:
        """A fix's identity -> its sync number (for a hazard not among the findings': rare)."""
        return {f.identity: self._sync_of[i] for i, f in enumerate(self._fixes)}

    def of(self, hazards: Sequence[Hazard]) -> list[Fix]:
        """The keyed fixes of ``hazards``, as ``key_fixes(trace, distinct_fixes(hazards))``: each
        sync once, in the order of the first hazard that needs it (tests/pipeline/test_keying)."""
        if hazards is self._hazards:  # (every fix at once: each sync, numbered in the order of
            return list(self._keyed)  # the first hazard that needs it; no walk of the hazards)
        out, seen = [], set()
        sync, keyed, position = self._sync, self._keyed, self._position
        for h in hazards:
            i = position.get(id(h))
            n = -1 if i is None else sync[i]
            if n < 0:  # (no fix, or not one of the findings' hazards: an equal one)
                if h.fix is None:
                    continue
                n = self._of[h.fix.identity]
            if n not in seen:
                seen.add(n)
                out.append(keyed[n])
        return out


def _keying(trace: Trace, hazards: Sequence[Hazard]) -> tuple:
    """:class:`Keying`'s reference: ``(fixes, keyed, sync_of, sync, host)``, the hazards'
    distinct fixes (each fix's identity hashed once), the keyed fix of each sync number (the
    first of its keyed identity), each fix's sync number, each hazard's sync number by its
    place in ``hazards`` (an ``array('i')``, -1: no fix), and host action id -> the key its
    fixes' syncs go before (None: a fix was keyed already)."""
    fixes: list[Fix] = []  # distinct_fixes(hazards), each fix's identity hashed once here
    index: dict[tuple, int] = {}  # a fix's identity (op ids) -> its index in ``fixes``
    which: list[tuple[int, int]] = []  # (place of a hazard with a fix, its fix's index)
    for pos, h in enumerate(hazards):
        if h.fix is not None:
            i = index.setdefault(h.fix.identity, len(fixes))
            if i == len(fixes):
                fixes.append(h.fix)
            which.append((pos, i))
    keyed = key_fixes(trace, fixes, dedupe=False)
    unique: list[Fix] = []  # sync number -> its keyed fix (the first of its identity)
    numbers: dict[tuple, int] = {}  # keyed identity -> sync number
    sync_of = []  # fix index -> sync number
    for kf in keyed:
        n = numbers.setdefault(kf.identity, len(numbers))
        if n == len(unique):
            unique.append(kf)
        sync_of.append(n)
    sync = array("i", [-1]) * len(hazards)  # hazard place -> sync number (-1: no fix)
    for pos, i in which:
        sync[pos] = sync_of[i]
    return fixes, unique, sync_of, sync, _named_host_ops(trace, fixes, keyed)


def costed_root_causes(trace: Trace, findings: Findings, limit: int = MAX_COSTED_ROOT_CAUSES,
                       budget: int | None = None) -> int:
    """How many root causes (the first ones) get a cost of their own: at most ``limit``, and only
    as many re-simulations as fit in ``budget`` ops (default ROOT_CAUSE_COST_BUDGET; each runs
    about as many ops as ``trace``). Decided before any re-run: the same for every seed."""
    budget = ROOT_CAUSE_COST_BUDGET if budget is None else budget
    return min(len(findings.root_causes), limit, budget // max(len(trace), 1))


def budget_note(trace: Trace, findings: Findings, budget: int | None = None) -> str:
    """The sentence a report adds when the budget, not the limit, left root causes uncosted ('' if
    none)."""
    budget = ROOT_CAUSE_COST_BUDGET if budget is None else budget
    k = costed_root_causes(trace, findings, budget=budget)
    m = len(findings.root_causes)
    if m < 2 or k >= min(m, MAX_COSTED_ROOT_CAUSES):
        return ""
    which = f"the first {k}" if k else "none"
    return (f"The cost of each root cause's fix alone was measured for {which} of the {m:,} root "
            f"causes: each is a re-simulation of the whole run ({len(trace):,} ops), and at "
            f"most {budget:,} ops are re-simulated for them.")


def cost_of(trace: Trace, hazards: Sequence[Hazard], rerun: Rerun,
            before: Metrics, keying: Keying) -> FixCost | None:
    """The cost of fixing ``hazards`` alone (their distinct fixes keyed by ``keying``): one
    re-run, measured; None when they have no fix or the re-run failed inside streamsim
    (:class:`InternalError`: the caller says so). What :func:`cost_fixes` computes for all of a
    run's hazards, and ``check``/``run`` for each costed root cause's too
    (``streamsim.pipeline._costs``)."""
    keyed = keying.of(hazards)
    if not keyed:
        return None
    try:
        fixed = rerun(keyed)
        if not isinstance(fixed, Trace):  # a LeanRun: measured from its columns, if they serve
            cost = _measured_lean(fixed, keyed, before, keying.delayed_start)
            if cost is not None:
                return cost
            fixed = fixed.trace()
    except InternalError:  # streamsim's bug in the re-run: not costed (the caller says so)
        return None
    # (a cost counts what the fixed run still has: no fixes or root causes for it, no warnings)
    left = hazard_count(fixed)
    return _measured(trace, fixed, keyed, left, deadlock_from_stall(fixed) is not None, before,
                     starts=keying.delayed_start)


def _measured(trace: Trace, fixed: Trace, keyed: Sequence[Fix], hazards_after: int,
              deadlock_after: bool, before: Metrics,
              after_metrics: Metrics | None = None, starts: dict | None = None) -> FixCost:
    return FixCost(syncs=len(keyed), before=before,
                   after=after_metrics or compute_metrics(fixed), hazards_after=hazards_after,
                   deadlock_after=deadlock_after, shift=fix_shift(trace, fixed, keyed, starts))


def _measured_lean(fixed: "LeanRun", keyed: Sequence[Fix], before: Metrics,
                   starts: dict) -> FixCost | None:
    """:func:`_measured` of a re-run the compiled replay kept as columns, each figure read from
    them (``native.measure_columns``; the same figures as from its trace: tests/native/
    test_lean_rerun.py); None when a compiled measure declines (the caller measures the trace)."""
    from .. import native  # (as in _delayed_ops)
    got = native.measure_columns(fixed.columns, HAZARD_KINDS, starts, keyed)
    if got is None:
        return None
    left, timing, walked, (count, moved), (rank,) = got
    # (a replay the compiled core ran never stalls: it leaves a stall to the engine)
    return FixCost(syncs=len(keyed), before=before,
                   after=metrics_of(fixed.end_time, timing, memory_of(walked)),
                   hazards_after=left, deadlock_after=False, shift=_shift_of(count, moved, rank))


def apply_fixes(trace: Trace, findings: Findings, rerun: Rerun, before: Metrics | None = None
                ) -> tuple[Trace, Findings, Metrics, FixCost] | None:
    """The fixed run itself (``--apply-fixes``): ``trace`` re-simulated with every distinct fix
    of ``findings`` applied, analysed, with what the fixes cost against ``trace``; None when no
    hazard has a fix. A failed re-run raises (InternalError: streamsim's bug, exit 3)."""
    keyed = key_fixes(trace, distinct_fixes(findings.hazards))
    if not keyed:
        return None
    fixed = rerun(keyed)
    if not isinstance(fixed, Trace):  # (a LeanRun: this run's trace is the report's)
        fixed = fixed.trace()
    after, metrics = analyse(fixed), compute_metrics(fixed)
    cost = _measured(trace, fixed, keyed, len(after.hazards), after.deadlock is not None,
                     before or compute_metrics(trace), metrics)
    return fixed, after, metrics, cost


def fix_shift(trace: Trace, fixed: Trace, keyed: Sequence[Fix],
              starts: dict | None = None) -> FixShift:
    """How far the fixes moved the ops their syncs sit before (``fixed``: ``trace`` re-run with
    ``keyed``), and which rank ends last in the fixed run. Linear in the two traces' ops.
    ``starts``: the start of ``trace``'s delayed op of each of these keys or more
    (:attr:`Keying.delayed_start`), if the caller has them."""
    from .. import native  # (as in _delayed_ops)
    compiled = None if starts is None else native.shift(starts, fixed, keyed)  # (compiled:
    if compiled is not None:  # tests/native/test_fixscan.py)
        count, moved = compiled
    else:
        wanted = {f.before for f in keyed}
        a = _starts(_delayed_ops(trace, wanted)) if starts is None else starts
        b = _delayed_ops(fixed, wanted)
        shifts = []
        for k in sorted(wanted, key=_key_order):  # (sorted: a float sum in a set's order would
            x, y = a.get(k), b.get(k)  # depend on the hash seed)
            if x is not None and y is not None:
                shifts.append(y.start - x)
        count, moved = len(shifts), [d for d in shifts if d > 1e-6]
    return _shift_of(count, moved, critical_rank(fixed))


def _shift_of(count: int, moved: list[float], rank: int | None) -> FixShift:
    """The :class:`FixShift` of ``count`` delayed ops, of which ``moved`` moved (their shifts,
    in key order), the fixed run ending on ``rank``."""
    return FixShift(delayed=count, moved=len(moved), max_us=max(moved, default=0.0),
                    total_us=sum(moved), critical_rank=rank)


def _delayed_starts(trace: Trace, host: dict) -> dict:
    """Injection key -> the start of the op a sync before that key's host action delays
    (``host``: host op id -> key; :func:`_delayed_ops`, each op as its start, all a shift reads
    of it: a run not made yet makes no op for it)."""
    from .. import native  # (as in _delayed_ops)
    compiled = native.delayed_starts(trace, host)  # (tests/native/test_keying.py)
    return compiled if compiled is not None else _starts(_delayed_ops(trace, None, host))


def _starts(delayed: dict) -> dict:
    """Each key's delayed op as its start."""
    return {k: op.start for k, op in delayed.items()}


def _delayed_ops(trace: Trace, wanted: set | None, host: dict | None = None) -> dict:
    """Injection key -> the op a sync inserted before that host action delays: the first stream op
    the action enqueued, else the action itself (each key's op does not depend on the others
    ``wanted`` names). ``host``: ``_keyed_host_ops(trace, wanted)``, if the caller has it (then
    ``wanted`` is not read)."""
    if host is None:
        host = _keyed_host_ops(trace, wanted)
    from .. import native  # (local: the optional compiled scans; tests/native/test_fixscan.py)
    compiled = native.delayed_ops(trace, host)  # (this loop, compiled: tests/native)
    if compiled is not None:
        return compiled
    out: dict = {}
    for op in trace.ops:
        if op.agent.kind == HOST:
            k = host.get(op.id)
            if k is not None and k not in out:
                out[k] = op
        elif op.issuer in host:
            k = host[op.issuer]
            if out.get(k) is None or out[k].agent.kind == HOST:
                out[k] = op
    return out


def _key_order(key: tuple) -> tuple:
    """The sort key that puts injection keys (agent, kind, location, n) in their own order, with
    the Agent's fields for the Agent (its dataclass order: rank, kind, name), so that sorting
    compares tuples of str and int in C rather than calling the dataclass's __eq__ and __lt__
    (tests/pipeline/test_fix_shift.py)."""
    ag = key[0]
    return (ag.rank, ag.kind, ag.name), key[1], key[2], key[3]


def _named_host_ops(trace: Trace, fixes: Sequence[Fix], keyed: Sequence[Fix]) -> dict | None:
    """``_keyed_host_ops(trace, {kf.before for kf in keyed})`` (as a mapping; its order does
    not matter to ``_delayed_ops``) where ``keyed`` is ``key_fixes(trace, fixes, dedupe=False)``:
    the host action that issued the op each fix's ``before`` names (or that op, a host action)
    has that fix's key. None when a fix was keyed already (no op id to start from)."""
    host: dict = {}
    op = trace.op
    for fix, kf in zip(fixes, keyed, strict=True):
        if not isinstance(fix.before, int):
            return None
        named = op(fix.before)
        host[named.id if named.agent.kind == HOST else named.issuer] = kf.before
    return host


def _keyed_host_ops(trace: Trace, wanted: set) -> dict:
    """Host op id -> its injection key, for the keys in ``wanted`` only: ``injection_keys``
    restricted to them, counting only the actions at the wanted keys' model lines (each key's n
    counts the actions of its thread, kind and line: all of them are at that line), so the scan
    of every other action is one string lookup."""
    from .. import native  # (as in _delayed_ops)
    compiled = native.keyed_host_ops(trace, wanted)  # (this function, compiled: tests/native)
    if compiled is not None:
        return compiled
    lines = {k[2] for k in wanted}
    kinds = {k[1] for k in wanted}
    sites: dict[tuple, int] = {}  # (thread, kind, location) -> actions seen
    thread: dict[int, int] = {}  # id(agent) -> its number (equal agents: one number)
    numbers: dict = {}
    host: dict = {}
    for op in trace.ops:
        if op.location in lines and op.kind in kinds:
            ag = op.agent
            if ag.kind != HOST or op.attrs.get("injected"):
                continue
            t = thread.get(id(ag))
            if t is None:
                t = thread[id(ag)] = numbers.setdefault(ag, len(numbers))
            site = (t, op.kind, op.location)
            n = sites.get(site, 0)
            sites[site] = n + 1
            key = (ag, op.kind, op.location, n)
            if key in wanted:
                host[op.id] = key
    return host


def critical_rank(trace: Trace) -> int | None:
    """The rank the makespan waits for: whose last kernel (``launch``) ends last, the smallest such
    rank on a tie; with no kernel, whose last op ends last. None for a trace with no ops. (The
    first stage's final receive of the sampled tokens ends last, but it waits for the last stage.)"""
    from .. import native  # (as in _delayed_ops)
    compiled = native.critical_rank(trace)  # (this function, compiled: tests/native)
    if compiled is not None:
        return compiled[0]
    best: Op | None = None
    for kernels in (True, False):
        for op in trace.ops:
            if kernels and op.kind != "launch":
                continue
            if best is None or op.end > best.end or \
                    (op.end == best.end and op.agent.rank < best.agent.rank):
                best = op
        if best is not None:
            break
    return None if best is None else best.agent.rank
