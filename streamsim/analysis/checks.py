"""One call from a trace to findings: hazards with fixes, deadlock, warnings; and fix costing."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .findings import Findings
from .hb import analyse_hazards
from .liveness import deadlock_from_stall, warnings
from .metrics import Metrics, compute_metrics
from ..trace import Trace


def analyse(trace: Trace) -> Findings:
    """Every finding of ``trace``: data hazards (each with its proposed fix), deadlock, warnings."""
    return Findings(hazards=tuple(analyse_hazards(trace)),  # each with its proposed fix
                    deadlock=deadlock_from_stall(trace), warnings=tuple(warnings(trace)))


@dataclass(frozen=True)
class FixCost:
    """What applying every proposed fix costs, measured by re-simulating with them."""

    syncs: int  # distinct syncs inserted
    before: Metrics
    after: Metrics
    hazards_after: int
    deadlock_after: bool

    @property
    def makespan_change(self) -> float:
        b = self.before.makespan_us
        return (self.after.makespan_us - b) / b if b else 0.0

    def to_json_dict(self) -> dict:
        return {"syncs": self.syncs, "hazards_after": self.hazards_after,
                "deadlock_after": self.deadlock_after,
                "makespan_us_before": round(self.before.makespan_us, 3),
                "makespan_us_after": round(self.after.makespan_us, 3),
                "makespan_change": round(self.makespan_change, 6),
                "mean_step_us_before": round(self.before.mean_step_us, 3),
                "mean_step_us_after": round(self.after.mean_step_us, 3)}


def distinct_fixes(findings: Findings) -> list:
    """The fixes of all hazards, each sync once (several hazards often share one missing edge)."""
    seen, out = set(), []
    for h in findings.hazards:
        if h.fix is not None:
            key = (h.fix.kind, h.fix.before, h.fix.handle_op, h.fix.record_after,
                   h.fix.event_stream, h.fix.wait_stream)
            if key not in seen:
                seen.add(key)
                out.append(h.fix)
    return out


def cost_fixes(trace: Trace, findings: Findings, rerun: Callable[[list], Trace],
               max_rounds: int = 4) -> FixCost | None:
    """Re-simulate with every distinct fix applied (``rerun(keyed_fixes) -> Trace``) and measure it.

    The analysis reports every racy access, but for a read it names only the latest unordered
    write, so a fix can uncover an earlier write of the same race. Fixes found in the re-run are
    added and the run repeated, up to ``max_rounds`` runs in all.
    """
    from ..sim.inject import key_fixes
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
