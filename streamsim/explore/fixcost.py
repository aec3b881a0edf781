"""What the proposed fixes cost: re-simulate the run with them applied, and measure.

It needs the simulator (to re-run) and the analysis (to find the fixes and check the re-run), so it
sits in explore, above both. Fixes close in one pass (the analysis reports, in issue order, a pair
for every race that the others do not order transitively), so one re-run is enough: what the fixed
run still reports is shown as it is, not patched over with further rounds.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..analysis.checks import FixCost, analyse, distinct_fixes
from ..analysis.findings import Findings, Hazard
from ..analysis.metrics import compute_metrics
from ..sim.inject import key_fixes
from ..trace import Trace

MAX_COSTED_ROOT_CAUSES = 20  # root causes costed one by one (each is a re-simulation)

Rerun = Callable[[list], Trace]  # (keyed fixes) -> the re-simulated trace


def cost_fixes(trace: Trace, findings: Findings, rerun: Rerun) -> FixCost | None:
    """Re-simulate with every distinct fix applied (``rerun(keyed_fixes) -> Trace``) and measure
    it; None when no hazard has a fix."""
    return _cost(trace, findings.hazards, rerun)


def cost_root_causes(trace: Trace, findings: Findings, rerun: Rerun,
                     limit: int = MAX_COSTED_ROOT_CAUSES) -> tuple[FixCost | None, ...]:
    """For each root cause (the first ``limit`` of them), the cost of its fix alone, applied at
    every instance; None for a root cause with no fix or beyond ``limit``."""
    out = []
    for n, rc in enumerate(findings.root_causes):
        members = [findings.hazards[i] for i in rc.instances]
        out.append(_cost(trace, members, rerun) if n < limit else None)
    return tuple(out)


def _cost(trace: Trace, hazards: Sequence[Hazard], rerun: Rerun) -> FixCost | None:
    keyed = key_fixes(trace, distinct_fixes(hazards))
    if not keyed:
        return None
    fixed = rerun(keyed)
    after = analyse(fixed)
    return FixCost(syncs=len(keyed), before=compute_metrics(trace), after=compute_metrics(fixed),
                   hazards_after=len(after.hazards), deadlock_after=after.deadlock is not None)
