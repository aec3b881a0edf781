"""What the proposed fixes cost: re-simulate the run with every one of them applied, and measure.

It needs the simulator (to re-run) and the analysis (to find the fixes and check the re-run), so it
sits in explore, above both.
"""
from __future__ import annotations

from typing import Callable

from ..analysis.checks import FixCost, analyse, distinct_fixes
from ..analysis.findings import Findings
from ..analysis.metrics import compute_metrics
from ..sim.inject import key_fixes
from ..trace import Trace


def cost_fixes(trace: Trace, findings: Findings, rerun: Callable[[list], Trace],
               max_rounds: int = 4) -> FixCost | None:
    """Re-simulate with every distinct fix applied (``rerun(keyed_fixes) -> Trace``) and measure it.

    The analysis reports every racy access, but for a read it names only the latest unordered
    write, so a fix can uncover an earlier write of the same race. Fixes found in the re-run are
    added and the run repeated, up to ``max_rounds`` runs in all.
    """
    keyed = key_fixes(trace, distinct_fixes(findings))
    if not keyed:
        return None
    for _ in range(max_rounds):
        fixed = rerun(keyed)
        after = analyse(fixed)
        more = [k for k in key_fixes(fixed, distinct_fixes(after)) if k not in keyed]
        if not more:
            break
        keyed += more
    return FixCost(syncs=len(keyed), before=compute_metrics(trace), after=compute_metrics(fixed),
                   hazards_after=len(after.hazards), deadlock_after=after.deadlock is not None)
