"""The report data structure of one run, and its JSON and text forms.

Every writer (text, JSON, Markdown, HTML) renders the same :class:`Report`; the JSON form is a stable,
documented interface (see docs/cli.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..analysis.checks import FixCost
from ..analysis.findings import Findings, findings_json
from ..analysis.metrics import Metrics, format_bytes
from ..kinds import HB_EDGE_WORDS
from ..trace import Trace
from .escape import terminal_lines

# What a run whose ops carry no step says instead of step metrics of 0.
NO_STEPS = "no step labels (no step metrics)"


@dataclass(frozen=True)
class Report:
    """One analysed run: where it came from, what was found, what it cost."""

    source: str
    trace: Trace
    findings: Findings
    metrics: Metrics
    model: str | None = None
    variant: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    jitter: float = 0.0
    fix_cost: FixCost | None = None  # every proposed fix applied at once
    root_cause_costs: tuple[FixCost | None, ...] = ()  # each root cause's fix alone, by index
    root_cause_cost_note: str = ""  # a sentence: which root causes a budget left uncosted, if any
    # --apply-fixes: this is the fixed run (the run re-simulated with every proposed fix), and
    # this is what those fixes cost against the run (its ``before``: the run's metrics)
    applied: FixCost | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.findings.clean else 1

    def summary(self) -> str:
        f = self.findings
        manifest = sum(h.manifest for h in f.hazards)
        n, k = len(f.hazards), len(f.root_causes)
        parts = [f"{k} root cause{'s' * (k != 1)} of {n} data hazard{'s' * (n != 1)}"
                 + (f" ({manifest} manifest, {n - manifest} latent)" if n else "")
                 if n else "no data hazard"]
        parts.append("deadlock" if f.deadlock else "no deadlock")
        parts.append(f"{len(f.warnings)} warning{'s' * (len(f.warnings) != 1)}")
        what = f"{self.model} [{self.variant}]" if self.model else self.source
        if self.applied is not None:
            what += " with its proposed fixes applied"
        return f"{what}: " + ", ".join(parts)

    def applied_line(self) -> str:
        """What an ``--apply-fixes`` report says of the fixes it applied ('' otherwise)."""
        c = self.applied
        if c is None:
            return ""
        return (f"fixed run: re-simulated with the run's {c.syncs} proposed "
                f"sync{'s' * (c.syncs != 1)} inserted; against the run as written: {_cost(c)}")

    def __repr__(self) -> str:
        """``<Report vllm_pp.py:regressed_49274 4 root causes, 150 hazards>``: a report holds the
        whole trace, which the dataclass repr would print (hundreds of KB)."""
        f = self.findings
        what = os.path.basename(self.source) + (f":{self.variant}" if self.variant else "")
        k, n = len(f.root_causes), len(f.hazards)
        return (f"<Report {what} {k} root cause{'s' * (k != 1)}, {n} hazard{'s' * (n != 1)}"
                f"{', deadlock' if f.deadlock else ''}>")

    def cost_of(self, index: int) -> FixCost | None:
        """The measured cost of root cause ``index``'s fix, when it was measured."""
        return self.root_cause_costs[index] if index < len(self.root_cause_costs) else None


def report_json(r: Report) -> dict[str, Any]:
    """The JSON form of version 3 (keys documented in docs/cli.md): every op a finding names is
    described in full where it is named. Version 4 (:mod:`.jsonv4`) lists each op once."""
    d = json_head(r, 3)
    d.update(findings_json(r.findings, r.trace, r.root_cause_costs))
    d.update(json_tail(r))
    return d


def json_head(r: Report, version: int) -> dict[str, Any]:
    """The keys every JSON version opens with: the version, what was run, the summary line."""
    return {"streamsim_json": version, "source": r.source, "model": r.model,
            "variant": r.variant, "params": dict(r.params), "seed": r.seed,
            "jitter": r.jitter, "summary": r.summary()}


def json_tail(r: Report) -> dict[str, Any]:
    """The keys every JSON version closes its findings with: metrics and what the fixes cost."""
    d: dict[str, Any] = {"metrics": r.metrics.to_json_dict(),
                         "fix_cost": None if r.fix_cost is None else r.fix_cost.to_json_dict(),
                         # costs a budget or a failed re-run left out
                         "fix_cost_note": r.root_cause_cost_note or None}
    if r.applied is not None:  # (only in an --apply-fixes report: other reports keep their keys)
        d["applied_fixes"] = r.applied.to_json_dict()
    return d


def dumps_json_v3(r: Report) -> str:
    """The JSON form of version 3 (:func:`report_json`) as text, one key a line: the text
    ``json.dumps(..., indent=2)`` writes, from a C encoder (:mod:`.jsontext`). Kept for one
    release beside version 4 (``--json-version 3``)."""
    from .jsontext import dumps_indented  # (JSON: imported when JSON is written)
    return dumps_indented(report_json(r)) + "\n"


def _us(x: float) -> str:
    return f"{x:,.1f} us"


MAX_TEXT_ROOT_CAUSES = 20  # root causes shown in full in the text report (JSON has them all)
MAX_TEXT_INSTANCES = 5  # other instances listed per root cause


def render_text(r: Report) -> str:
    """Plain-text report for a terminal or a code review comment: root causes first."""
    t = r.trace
    f = r.findings
    lines = [r.summary()]
    if r.params:
        lines.append("params: " + " ".join(f"{k}={v}" for k, v in r.params.items()))
    if r.seed is not None or r.jitter:
        lines.append(f"seed: {r.seed}  jitter: {r.jitter}")
    if r.applied is not None:
        lines.append(r.applied_line())
    for n, rc in enumerate(f.root_causes[:MAX_TEXT_ROOT_CAUSES], 1):
        hs = [f.hazards[i] for i in rc.instances]
        h = next((x for x in hs if x.manifest), hs[0])  # show the instance that struck
        a, b = t.op(h.first), t.op(h.second)
        lines.append("")
        lines.append(f"[{n}] {rc.describe()}: {len(hs)} instance{'s' * (len(hs) != 1)}, "
                     f"{rc.manifest} manifest, {rc.latent} latent; "
                     f"rank{'s' * (len(rc.ranks) != 1)} {_ranks(rc.ranks)}")
        lines.append(f"    fix: {rc.fix}" if rc.fix is not None else
                     f"    no fix proposed: {rc.no_fix}")
        c = r.cost_of(n - 1)
        if c is not None:
            lines.append(f"    fix cost (re-simulated with this fix at every instance): {_cost(c)}")
        lines.append(f"    {'first manifest' if h.manifest else 'first'} instance:")
        lines.append(f"      first : {h.first_mode:5} by {a.describe()}  [{a.start:,.1f}, {a.end:,.1f}] us")
        lines.append(f"      second: {h.second_mode:5} by {b.describe()}  [{b.start:,.1f}, {b.end:,.1f}] us")
        from ..analysis.why import free_verdict  # (a hazard's: imported when there is one)
        freed = free_verdict(t, h, unit="us")  # (a free corrupts nothing until reused)
        verdict = (f"MANIFEST: {freed}" if freed else "MANIFEST: the second access started "
                   "before the first ended: corrupted in this run" if h.manifest else
                   "latent: this timing happened to be safe")
        lines.append(f"      bytes [{h.range[0]}, {h.range[1]}) of rank{h.rank}:{h.buffer}; "
                     f"{verdict}")
        lines.append("      nothing orders them: no chain of happens-before edges "
                     f"({', '.join(HB_EDGE_WORDS)}) joins the two (--out DIR shows each side's "
                     "chain)")
        others = [x for x in hs if x is not h]
        if others:
            briefs: dict[str, int] = {}  # (equal briefs, e.g. two byte ranges of one step: once)
            for x in others[:MAX_TEXT_INSTANCES]:
                brief = _instance(t, x)
                briefs[brief] = briefs.get(brief, 0) + 1
            shown = "; ".join(b if k == 1 else f"{b} (x{k})" for b, k in briefs.items())
            more = len(others) - MAX_TEXT_INSTANCES
            lines.append(f"    other instances: {shown}" + (f"; and {more} more" if more > 0 else ""))
    if len(f.root_causes) > MAX_TEXT_ROOT_CAUSES:
        lines.append("")
        lines.append(f"... and {len(f.root_causes) - MAX_TEXT_ROOT_CAUSES} more root causes "
                     "(--format json lists every one)")
    d = r.findings.deadlock
    if d is not None:
        lines.append("")
        lines.append("DEADLOCK: the simulation stalled with these agents blocked for good:")
        for b in d.blocked:
            lines.append(f"    {b.agent}: {b.reason}"
                         + (f" (waits for {', '.join(map(str, b.waits_for))})" if b.waits_for else ""))
        if d.cycle:
            lines.append("    wait-for cycle: " + " -> ".join(map(str, d.cycle + d.cycle[:1])))
    if r.findings.warnings:
        lines.append("")
        lines.append("warnings:")
        seen: dict[str, int] = {}
        for w in r.findings.warnings:
            seen[w.kind] = seen.get(w.kind, 0) + 1
            if seen[w.kind] <= 3:
                lines.append(f"    {w.kind}: {w.message}")
        for kind, n in seen.items():
            if n > 3:
                lines.append(f"    ... and {n - 3} more {kind}")
    m = r.metrics
    lines.append("")
    steps = (f"{m.steps} steps, mean step {_us(m.mean_step_us)}, p99 step {_us(m.p99_step_us)}"
             if m.steps else NO_STEPS)
    lines.append(f"metrics: makespan {_us(m.makespan_us)}, {steps}, bubble "
                 f"{m.bubble_share:.1%}, comm/compute overlap {m.comm_overlap_share:.1%}")
    lines.append(memory_line(m))
    c = r.fix_cost
    if c is not None:
        lines.append(f"fix cost: every proposed fix applied at once ({c.syncs} "
                     f"sync{'s' * (c.syncs != 1)}): {_cost(c)}")
    if r.root_cause_cost_note:
        lines.append(r.root_cause_cost_note)
    return terminal_lines(lines)  # a name's control characters escaped: no line of its own


MAX_MEMORY_RANKS = 8  # ranks whose peak the memory line names one by one


def memory_line(m: Metrics) -> str:
    """``memory: peak live bytes rank0 1.5 GiB, rank1 2.1 GiB; <what it cannot say>``."""
    peaks = m.peak_bytes
    if not peaks:
        return f"memory: {m.memory_note}"
    if len(peaks) <= MAX_MEMORY_RANKS:
        shown = ", ".join(f"rank{r} {format_bytes(b)}" for r, b in peaks.items())
    else:
        hi = max(peaks, key=lambda r: (peaks[r], -r))
        lo = min(peaks, key=lambda r: (peaks[r], r))
        shown = (f"{len(peaks):,} ranks, most rank{hi} {format_bytes(peaks[hi])}, least "
                 f"rank{lo} {format_bytes(peaks[lo])}")
    return f"memory: peak live bytes {shown}" + (f"; {m.memory_note}" if m.memory_note else "")


def _cost(c: FixCost) -> str:
    """``makespan A -> B us (+x%), mean step ...; N hazards left``."""
    step = (f", mean step {_us(c.before.mean_step_us)} -> {_us(c.after.mean_step_us)}"
            if c.before.steps else "")
    peak = c.peak_text()
    return (f"makespan {_us(c.before.makespan_us)} -> {_us(c.after.makespan_us)} "
            f"({c.makespan_change:+.1%}){', ' + peak if peak else ''}{step}; {c.hazards_after} "
            f"hazard{'s' * (c.hazards_after != 1)} left"
            + (", but the fixed run DEADLOCKS" if c.deadlock_after else "")
            + (f"; {c.explain()}" if c.shift is not None else ""))


def _ranks(ranks: tuple[int, ...]) -> str:
    """``0-2`` for a run of ranks, else ``0, 2, 5``."""
    if len(ranks) > 2 and ranks[-1] - ranks[0] == len(ranks) - 1:
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def _instance(t: Trace, h) -> str:
    a, b = t.op(h.first), t.op(h.second)

    def at(op) -> str:
        if op.step is not None or op.microbatch is not None:
            return op.when()
        return f"line {op.line}" if op.line is not None else f"op {op.id}"
    return (f"{at(a)} -> {at(b)} on rank{h.rank}, {'manifest' if h.manifest else 'latent'}")
