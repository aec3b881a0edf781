"""The main path of every command, in one place: simulate -> analyse -> cost -> report.

:func:`run_model` simulates a model (``streamsim run``), :func:`check_oplog` replays an op log
(``streamsim check``); both then go through the same stages (:func:`_analysed`): analyse the trace,
measure its metrics, cost the proposed fixes by re-running with them (``fixcost``), and return a
:class:`~streamsim.report.report.Report`, which every writer (text, JSON, Markdown, HTML,
pictures) renders. What the simulate stage perturbs is a strategy (``strategies``: jitter, PCT in
``pct``). ``streamsim.explore`` (compare, explore, sweep, shrink) runs this path many times.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping

from ..analysis.checks import analyse
from ..analysis.findings import Findings
from ..analysis.metrics import Metrics, compute_metrics
from ..gcpause import pipeline_entry
from ..oplog import OpLog, load_oplog, simulate_oplog
from ..oplog.leanrun import LeanRun, LeanTrace
from ..report.report import Report
from ..sim.errors import InternalError, ModelError
from ..sim.model import Model, load_model
from ..sim.runner import DEFAULT_MAX_OPS, DEFAULT_MAX_TIME, simulate
from ..trace import Trace
from . import strategies
from .strategies import perturb_for
from .workers import check_jobs, default_jobs, run_indexed

Progress = Callable[[str], None]  # called with each phase's name as it starts


def _quiet(phase: str) -> None:
    pass


def seed_used(seed: int | None, jitter: float, strategy: str = strategies.DEFAULT) -> int | None:
    """The seed a run really uses: ``seed``, or 0 when none is given but the run draws random
    numbers (jitter, PCT); None only when nothing random happens. Reports show this one, so that
    ``--seed`` with the value shown replays the run."""
    random_run = bool(jitter) or strategies.get(strategy).seeded
    return 0 if seed is None and random_run else seed


@pipeline_entry
def run_model(model: Model | str, variant: str | None = None,
              params: Mapping[str, Any] | Iterable[str] = (), *, seed: int | None = None,
              jitter: float = 0.0, strategy: str = strategies.DEFAULT, depth: int = 2,
              max_ops: int = DEFAULT_MAX_OPS, max_time: float = DEFAULT_MAX_TIME,
              fix_cost: bool = True, apply_fixes: bool = False,
              progress: Progress | None = None, jobs: int | None = 1) -> Report:
    """Simulate one variant of ``model`` and analyse it; with ``fix_cost``, re-simulate with every
    proposed fix applied to measure what they cost (``streamsim run``). ``progress`` is called with
    the name of each phase as it starts. ``jobs``: processes that run the fix-costing re-runs
    side by side, this one and ``jobs - 1`` forked workers (1, the default: all in this process;
    None: :func:`~streamsim.pipeline.workers.default_jobs`); the report is the same for every
    value. With ``apply_fixes`` (``run --apply-fixes``), the report
    is the fixed run's: the run re-simulated with every proposed fix, analysed, its
    ``Report.applied`` saying what the fixes cost against the run (no fix proposed: the run's own
    report); ``fix_cost`` is then not measured.

    ``strategy``/``depth``: the schedule perturbation (``random``: jitter only; ``pct``: see
    :mod:`streamsim.pipeline.pct`). Under PCT no fix cost is measured: a fix's extra ops would move
    PCT's change points onto other ops, so the fixed run would not be the same schedule.
    """
    check_jobs(jobs)
    if isinstance(model, str):
        model = load_model(model)
    return _run_model(model, variant, params, seed, jitter, strategy, depth, max_ops,
                      max_time, fix_cost, apply_fixes, progress or _quiet, jobs)


def _run_model(model: Model, variant, params, seed, jitter, strategy, depth, max_ops, max_time,
               fix_cost, apply_fixes, progress: Progress, jobs: int | None) -> Report:
    variant = model.check_variant(variant)
    values = model.resolve(params)
    seed = seed_used(seed, jitter, strategy)
    opts = dict(seed=seed, jitter=jitter, max_ops=max_ops, max_time=max_time)
    progress("simulate")
    opts["perturb"] = perturb_for(model, variant, values, depth=depth, strategy=strategy, **opts)
    trace = simulate(model, variant, values, **opts)
    rerun = lambda keyed: simulate(model, variant, values, fixes=keyed, **opts)  # (keyed: no base)
    info = dict(source=model.path, model=model.name, variant=variant, params=dict(values),
                seed=seed, jitter=jitter)
    no_fix_cost = strategies.get(strategy).no_fix_cost  # why fixes are not costed under it
    if apply_fixes and no_fix_cost:
        raise ModelError(f"apply_fixes: not under strategy {strategy} ({no_fix_cost})",
                         arguments=("apply_fixes", "strategy"))
    return _analysed(trace, rerun, info, fix_cost and not no_fix_cost, apply_fixes, progress,
                     jobs)


def _analysed(trace: Trace, rerun, info: dict, fix_cost: bool, apply_fixes: bool,
              progress: Progress, jobs: int | None = 1) -> Report:
    """The stages after simulate, the same for a model and an op log: analyse, measure, cost the
    fixes (``rerun(keyed_fixes)``, :data:`~.fixcost.Rerun`; in ``jobs`` processes), report
    (``info``: the report's fields that name the input)."""
    progress("analyse")
    metrics = compute_metrics(trace)  # (first: what it makes and frees is not held beside the
    findings = analyse(trace)  # findings, which are most of a check's memory at its peak)
    if apply_fixes:
        return _applied(trace, findings, metrics, rerun, info, progress)
    costs = _costs(trace, findings, metrics, rerun, fix_cost, progress, jobs)
    return Report(trace=trace, findings=findings, metrics=metrics, **info, **costs)


def _applied(trace: Trace, findings: Findings, metrics: Metrics, rerun, info: dict,
             progress: Progress) -> Report:
    """The fixed run's report (``--apply-fixes``), or the run's own when no fix is proposed."""
    progress("cost fixes")
    from .fixcost import apply_fixes as fixed_run
    got = fixed_run(trace, findings, rerun, before=metrics)
    if got is None:
        return Report(trace=trace, findings=findings, metrics=metrics, **info)
    fixed, after, fixed_metrics, cost = got
    return Report(trace=fixed, findings=after, metrics=fixed_metrics, applied=cost, **info)


@pipeline_entry
def check_oplog(oplog: OpLog | str | os.PathLike, *, seed: int | None = None, jitter: float = 0.0,
                max_ops: int = DEFAULT_MAX_OPS, max_time: float = DEFAULT_MAX_TIME,
                fix_cost: bool = True, apply_fixes: bool = False,
                progress: Progress | None = None, jobs: int | None = 1) -> Report:
    """Replay a recorded op log (a path, or an :class:`~streamsim.oplog.OpLog` already parsed)
    through the engine and analyse it (``streamsim check``); with ``fix_cost``, re-simulate the log
    with the proposed fixes inserted, as for a model. ``apply_fixes``, ``progress``, ``jobs``: as
    for :func:`run_model`."""
    check_jobs(jobs)
    return _check_oplog(oplog, seed, jitter, max_ops, max_time, fix_cost, apply_fixes,
                        progress or _quiet, jobs)


def _check_oplog(oplog, seed, jitter, max_ops, max_time, fix_cost, apply_fixes,
                 progress: Progress, jobs: int | None) -> Report:
    progress("parse")
    log = oplog if isinstance(oplog, OpLog) else load_oplog(oplog)
    seed = seed_used(seed, jitter)
    opts = dict(seed=seed, jitter=jitter, max_ops=max_ops, max_time=max_time)
    progress("simulate")
    # (kept as columns where the compiled core runs it: a clean run's report needs no op)
    trace = simulate_oplog(log, lean=not apply_fixes, **opts)
    if isinstance(trace, LeanRun):  # (analysed and its fixes keyed from the columns: only
        # the ops the report and fix costing read are made)
        trace = LeanTrace(trace)
    path = log.path
    if not fix_cost and not apply_fixes:
        del log  # (only the fix re-runs need it: a large log's lines need not outlive the
        # replay; a LeanTrace keeps what its ops read of them)
    def rerun(keyed):  # (keyed fixes: injected without a scan of the trace; kept as columns
        try:  # where the compiled core runs it: fixcost.Rerun)
            return simulate_oplog(log, fixes=keyed, lean=True, **opts)
        except ModelError as e:  # the log replayed once: a re-run failing on it is our bug
            raise InternalError("re-simulating the log with its fixes", e) from e
    return _analysed(trace, rerun, dict(source=path, seed=seed, jitter=jitter), fix_cost,
                     apply_fixes, progress, jobs)


def _costs(trace: Trace, findings: Findings, metrics: Metrics, rerun, wanted: bool,
           progress: Progress, jobs: int | None = 1) -> dict:
    """Report fields: the cost of all fixes at once and of each root cause's fix alone
    (``metrics``: the run's own, measured once for all of them). The re-runs are decided first
    (which root causes are costed does not depend on any re-run), so that with ``jobs`` > 1 they
    run in several processes (:func:`_costs_of_groups`), with the same report."""
    if not wanted or not findings.hazards:
        return {}
    progress("cost fixes")
    from .fixcost import Keying, budget_note, costed_root_causes  # (a run with hazards only)
    keyed = Keying(trace, findings)  # (once for the total and every root cause)
    single = len(findings.root_causes) == 1  # its fixes are all the fixes: no second re-run
    k = 0 if single else costed_root_causes(trace, findings)
    groups = [findings.hazards] + [[findings.hazards[i] for i in rc.instances]
                                   for rc in findings.root_causes[:k]]
    # (a group with no fix is not re-run: Keying.of(g) is empty exactly when no hazard of g has
    # a fix; asked here without making the list, which the re-run makes)
    reruns = sum(1 for g in groups if any(h.fix is not None for h in g))
    procs = default_jobs(reruns) if jobs is None else min(jobs, reruns)
    failed: list[str] = []  # why a re-run failed inside streamsim (its costs: not measured)
    got = _costs_of_groups(trace, groups, rerun, metrics, keyed, procs, failed)
    total, each = got[0], (*got[1:], *(None,) * (len(findings.root_causes) - k))
    if single:
        return {"fix_cost": total, "root_cause_costs": (total,),
                "root_cause_cost_note": _failure_note(failed)}
    note = " ".join(x for x in (budget_note(trace, findings), _failure_note(failed)) if x)
    return {"fix_cost": total, "root_cause_costs": each, "root_cause_cost_note": note}


def _costs_of_groups(trace: Trace, groups: list, rerun, metrics: Metrics, keyed: Keying,
                     procs: int, failed: list[str]) -> list:
    """The cost of fixing each group of hazards (``groups[0]``: all of them), each re-run in one
    of ``procs`` processes (this one and forked workers: :func:`~.workers.run_indexed`; with one,
    all in this one, in order); in group order, and ``failed`` extended in that order with why a
    re-run failed inside streamsim. A worker sends back the small ``FixCost`` (and that why),
    never a trace."""
    from .fixcost import cost_of

    def task(i: int) -> tuple:
        mine: list[str] = []

        def guarded(fixes):
            try:
                return rerun(fixes)
            except InternalError as e:
                mine.append(str(e))
                raise
        return cost_of(trace, groups[i], guarded, metrics, keyed), mine
    out = []
    for cost, mine in run_indexed(task, len(groups), procs, "costing the fixes"):
        failed.extend(mine)
        out.append(cost if cost is None or cost.before is metrics else
                   replace(cost, before=metrics))  # (a worker's: the same object as in one
        # process, not an equal copy unpickled once per cost)
    return out


def _failure_note(failed: list[str]) -> str:
    """The sentence a report adds when re-runs failed inside streamsim ('' if none)."""
    if not failed:
        return ""
    more = f" ({len(failed)} re-runs failed)" if len(failed) > 1 else ""
    return f"Fix not costed: {failed[0]}{more}; the findings above do not depend on it."

