"""The report data structure of one run, and its JSON and text forms.

Every writer (text, JSON, Markdown, HTML) renders the same :class:`Report`; the JSON form is a stable,
documented interface (see the README).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..analysis.checks import FixCost
from ..analysis.findings import Findings, findings_json
from ..analysis.fixes import no_fix_reason
from ..analysis.metrics import Metrics
from ..trace import Trace

JSON_VERSION = 1


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
    fix_cost: FixCost | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.findings.clean else 1

    def summary(self) -> str:
        f = self.findings
        manifest = sum(h.manifest for h in f.hazards)
        parts = [f"{len(f.hazards)} data hazard{'s' * (len(f.hazards) != 1)}"
                 + (f" ({manifest} manifest, {len(f.hazards) - manifest} latent)" if f.hazards else "")]
        parts.append("deadlock" if f.deadlock else "no deadlock")
        parts.append(f"{len(f.warnings)} warning{'s' * (len(f.warnings) != 1)}")
        what = f"{self.model} [{self.variant}]" if self.model else self.source
        return f"{what}: " + ", ".join(parts)


def report_json(r: Report) -> dict[str, Any]:
    """The stable JSON form (keys documented in the README)."""
    d: dict[str, Any] = {"streamsim_json": JSON_VERSION, "source": r.source, "model": r.model,
                         "variant": r.variant, "params": dict(r.params), "seed": r.seed,
                         "jitter": r.jitter, "summary": r.summary()}
    d.update(findings_json(r.findings, r.trace))
    d["metrics"] = r.metrics.to_json_dict()
    d["fix_cost"] = None if r.fix_cost is None else r.fix_cost.to_json_dict()
    return d


def dumps_json(r: Report) -> str:
    return json.dumps(report_json(r), indent=2, sort_keys=False) + "\n"


def hazard_groups(r: Report) -> list[tuple[tuple, list]]:
    """Hazards grouped by pattern (kind, buffer, the two ops' names and locations), in first-seen
    order: a model's loop repeats one missing edge many times, and a reviewer wants it once."""
    groups: dict[tuple, list] = {}
    for h in r.findings.hazards:
        a, b = r.trace.op(h.first), r.trace.op(h.second)
        key = (h.kind, h.buffer, a.kind, a.location, b.kind, b.location)  # not names: "to rank2"
        groups.setdefault(key, []).append(h)
    return list(groups.items())


def _us(x: float) -> str:
    return f"{x:,.1f} us"


def render_text(r: Report) -> str:
    """Plain-text report for a terminal or a code review comment."""
    t = r.trace
    lines = [r.summary()]
    if r.params:
        lines.append("params: " + " ".join(f"{k}={v}" for k, v in r.params.items()))
    if r.seed is not None or r.jitter:
        lines.append(f"seed: {r.seed}  jitter: {r.jitter}")
    for n, (key, hs) in enumerate(hazard_groups(r), 1):
        kind, buffer = key[0], key[1]
        h = next((x for x in hs if x.manifest), hs[0])  # show the occurrence that struck
        a, b = t.op(h.first), t.op(h.second)
        manifest = sum(x.manifest for x in hs)
        ranks = sorted({x.rank for x in hs})
        lines.append("")
        lines.append(f"[{n}] {kind} on {buffer!r}: {len(hs)} occurrence{'s' * (len(hs) != 1)}, "
                     f"{manifest} manifest, {len(hs) - manifest} latent; ranks "
                     f"{', '.join(map(str, ranks))}")
        lines.append(f"    first : {h.first_mode:5} by {a.describe()}  [{a.start:,.1f}, {a.end:,.1f}] us")
        lines.append(f"    second: {h.second_mode:5} by {b.describe()}  [{b.start:,.1f}, {b.end:,.1f}] us")
        lines.append(f"    bytes [{h.range[0]}, {h.range[1]}) of rank{h.rank}:{buffer}; "
                     f"{'MANIFEST: the second access started before the first ended: corrupted in this run' if h.manifest else 'latent: this timing happened to be safe'}")
        lines.append("    nothing orders them: no chain of program-order, enqueue, event, handle-wait, "
                     "message or host-sync edges joins the two (--out DIR shows each side's chain)")
        lines.append(f"    fix: {h.fix.text}" if h.fix is not None else
                     f"    no fix proposed: {no_fix_reason(t, h)}")
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
    lines.append(f"metrics: makespan {_us(m.makespan_us)}, {m.steps} steps, mean step "
                 f"{_us(m.mean_step_us)}, p99 step {_us(m.p99_step_us)}, bubble "
                 f"{m.bubble_share:.1%}, comm/compute overlap {m.comm_overlap_share:.1%}")
    c = r.fix_cost
    if c is not None:
        lines.append(f"fix cost: applying the {c.syncs} proposed sync{'s' * (c.syncs != 1)} "
                     f"re-simulates to makespan {_us(c.after.makespan_us)} "
                     f"({c.makespan_change:+.1%}), mean step {_us(c.after.mean_step_us)}; "
                     f"{c.hazards_after} hazard{'s' * (c.hazards_after != 1)} left"
                     + (", but it DEADLOCKS" if c.deadlock_after else ""))
    return "\n".join(lines) + "\n"
