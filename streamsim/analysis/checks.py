"""One call from a trace to findings: hazards with fixes, deadlock, warnings; and what fixing costs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..trace import Trace
from .findings import Findings, Hazard
from .hb import analyse_hazards
from .liveness import deadlock_from_stall, warnings
from .metrics import Metrics
from .rootcause import root_causes


def analyse(trace: Trace) -> Findings:
    """Every finding of ``trace``: data hazards (each with its proposed fix) and their root causes,
    deadlock, warnings."""
    hazards = tuple(analyse_hazards(trace))  # each with its proposed fix
    return Findings(hazards=hazards, deadlock=deadlock_from_stall(trace),
                    warnings=tuple(warnings(trace)), root_causes=root_causes(trace, hazards))


@dataclass(frozen=True)
class FixCost:
    """What applying proposed fixes costs (all of them, or one root cause's), measured by
    re-simulating with them: the run's metrics before and after, and what the fixed run still has."""

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


def distinct_fixes(hazards: Findings | Iterable[Hazard]) -> list:
    """The fixes of ``hazards`` (or of every hazard found), each sync once: several hazards often
    share one missing edge."""
    seen, out = set(), []
    for h in (hazards.hazards if isinstance(hazards, Findings) else hazards):
        if h.fix is not None:
            key = (h.fix.kind, h.fix.before, h.fix.handle_op, h.fix.record_after,
                   h.fix.event_stream, h.fix.wait_stream)
            if key not in seen:
                seen.add(key)
                out.append(h.fix)
    return out
