"""One call from a trace to findings: hazards with fixes, deadlock, warnings; and what fixing costs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..trace import Trace
from .findings import Findings, Hazard
from .hb import analyse_hazards
from .liveness import deadlock_from_stall, warnings
from .metrics import Metrics, format_bytes
from .rootcause import root_causes


def analyse(trace: Trace) -> Findings:
    """Every finding of ``trace``: data hazards (each with its proposed fix) and their root causes,
    deadlock, warnings."""
    hazards = tuple(analyse_hazards(trace))  # each with its proposed fix
    return Findings(hazards=hazards, deadlock=deadlock_from_stall(trace),
                    warnings=tuple(warnings(trace)), root_causes=root_causes(trace, hazards))


@dataclass(frozen=True)
class FixShift:
    """How far a fix moved the ops its syncs sit before, and how much of it reached the makespan.

    ``delayed``: the ops the syncs sit before that ran in both runs (for each, the stream op its
    host action enqueued, else the host action itself); ``moved``: how many of them started later
    in the fixed run, ``max_us``/``total_us`` by how much (the largest shift, and their sum).
    ``critical_rank``: the rank the fixed run's makespan waits for, the one whose last kernel ends
    last (``streamsim.pipeline.fixcost.critical_rank``).
    """

    delayed: int
    moved: int
    max_us: float
    total_us: float
    critical_rank: int | None

    def to_json_dict(self) -> dict:
        return {"delayed_ops": self.delayed, "moved_ops": self.moved,
                "max_delay_us": round(self.max_us, 3), "total_delay_us": round(self.total_us, 3),
                "critical_rank": self.critical_rank}


@dataclass(frozen=True)
class FixCost:
    """What applying proposed fixes costs (all of them, or one root cause's), measured by
    re-simulating with them: the run's metrics before and after, and what the fixed run still has."""

    syncs: int  # distinct syncs inserted
    before: Metrics
    after: Metrics
    hazards_after: int
    deadlock_after: bool
    shift: FixShift | None = None  # how far the fix moved the ops it delays (None: not measured)

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
                "mean_step_us_after": round(self.after.mean_step_us, 3),
                **(self.shift.to_json_dict() if self.shift is not None else {}),
                **self._peak_json()}

    def _peak_json(self) -> dict:
        got = self.peak_change()
        return {} if got is None else {"peak_change_rank": got[0], "peak_change_bytes": got[1]}

    def peak_change(self) -> tuple[int, int] | None:
        """``(rank, bytes)``: the largest change of a rank's peak live bytes, after - before (the
        smallest rank on a tie; ``(rank, 0)``: no peak moved); None when neither run counted
        memory."""
        b, a = self.before.peak_bytes, self.after.peak_bytes
        if not a and not b:
            return None
        ranks = sorted(set(a) | set(b))
        return max(((r, a.get(r, 0) - b.get(r, 0)) for r in ranks),
                   key=lambda x: (abs(x[1]), -x[0]))

    def peak_text(self) -> str:
        """``+128.0 MiB peak on rank 2``, ``peak memory unchanged``; '' with no memory counted."""
        got = self.peak_change()
        if got is None:
            return ""
        rank, delta = got
        if not delta:
            return "peak memory unchanged"
        return f"{'+' if delta > 0 else ''}{format_bytes(delta)} peak on rank {rank}"

    @property
    def reached_us(self) -> float:
        """How much the makespan moved (after - before), in simulated microseconds."""
        return self.after.makespan_us - self.before.makespan_us

    def explain(self, unit: str = "us") -> str:
        """``moves 12 ops by up to 1.5 ms (13.0 ms in all); absorbed: rank 3 is the critical
        path`` ('' when the shift was not measured); ``unit``: how microseconds are written."""
        s = self.shift
        if s is None:
            return ""
        if not s.moved:
            head = (f"moves none of the {s.delayed:,} op{'s' * (s.delayed != 1)} it delays"
                    if s.delayed else "moves no op (none of the ops it delays ran)")
        else:
            of = f" of the {s.delayed:,} it delays" if s.moved < s.delayed else ""
            head = (f"moves {s.moved:,} op{'s' * (s.moved != 1)}{of} by up to "
                    f"{duration(s.max_us, unit)} ({duration(s.total_us, unit)} in all)")
        crit = f"rank {s.critical_rank} is the critical path" if s.critical_rank is not None \
            else "no rank ends last"
        reached = self.reached_us
        if abs(reached) < 0.05:  # (the reports show 0.1 us)
            tail = f"absorbed: {crit}" if s.moved else f"makespan unchanged: {crit}"
        elif reached > 0:
            tail = f"{duration(reached, unit)} reached the makespan ({crit})"
        else:
            tail = f"the makespan shrank by {duration(-reached, unit)} ({crit})"
        return f"{head}; {tail}"


def duration(us: float, unit: str = "us") -> str:
    """``850.0 us``, ``1.5 ms``, ``2.31 s``: a simulated duration in the unit that reads best."""
    if us >= 1e6:
        return f"{us / 1e6:,.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:,.1f} ms"
    return f"{us:,.1f} {unit}"


def distinct_fixes(hazards: Findings | Iterable[Hazard]) -> list:
    """The fixes of ``hazards`` (or of every hazard found), each sync once: several hazards often
    share one missing edge."""
    seen, out = set(), []
    for h in (hazards.hazards if isinstance(hazards, Findings) else hazards):
        if h.fix is not None:
            key = h.fix.identity
            if key not in seen:
                seen.add(key)
                out.append(h.fix)
    return out
