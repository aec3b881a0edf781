"""One call from a trace to findings: hazards with fixes, deadlock, warnings; and what fixing costs."""
from __future__ import annotations

from dataclasses import dataclass
from .findings import Findings
from .hb import analyse_hazards
from .liveness import deadlock_from_stall, warnings
from .metrics import Metrics
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
