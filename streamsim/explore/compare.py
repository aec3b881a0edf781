"""Variants side by side: hazards, deadlock, and what each safe variant costs against a baseline;
then, for each root cause of the baseline, where its proposed fix sits against the variants that
remove it (:mod:`.fixsites`)."""
from __future__ import annotations

from dataclasses import dataclass

from ..analysis.findings import verdict_word
from ..analysis.metrics import format_bytes
from ..report.report import Report
from ..sim.model import Model
from ..pipeline import run_model, strategies
from .fixsites import FixAgainstVariants, fixes_against_variants, render_fix_sites


@dataclass(frozen=True)
class CompareRow:
    """One variant of a comparison: its name and its :class:`~streamsim.Report` (fix-costed for
    the baseline only: its fixes are set against the other variants); ``manifest``/``latent``
    count its hazard instances."""

    variant: str
    report: Report

    def __repr__(self) -> str:
        """``<CompareRow fixed_54962: <Report vllm_pp.py:fixed_54962 0 root causes, 0 hazards>>``."""
        return f"<CompareRow {self.variant}: {self.report!r}>"

    @property
    def manifest(self) -> int:
        return sum(h.manifest for h in self.report.findings.hazards)

    @property
    def latent(self) -> int:
        return len(self.report.findings.hazards) - self.manifest


def compare_variants(model: Model, variants: list[str], sets=(), args=None, *,
                     baseline: str | None = None) -> list[CompareRow]:
    """Simulate and analyse each variant with the same parameters, seed and perturbation
    (``args``: an object with ``seed``, ``jitter``, ``max_ops``, ``max_time``, ``strategy``,
    ``depth``, ``jobs``, as the CLI gives; defaults otherwise), each run as ``streamsim run``
    would: the baseline's fixes costed, with ``jobs`` worker processes for its re-runs."""
    params = model.resolve(sets)
    seed, jitter = getattr(args, "seed", None), getattr(args, "jitter", 0.0)
    bounds = {k: getattr(args, k) for k in ("max_ops", "max_time") if hasattr(args, k)}
    strategy, depth = getattr(args, "strategy", strategies.DEFAULT), getattr(args, "depth", 2)
    base = baseline or getattr(model.module, "BASELINE", None) or (variants[0] if variants else None)
    rows = []
    for v in variants:
        rows.append(CompareRow(v, run_model(model, v, params, seed=seed, jitter=jitter,
                                            strategy=strategy, depth=depth,
                                            fix_cost=v == base, jobs=getattr(args, "jobs", 1),
                                            **bounds)))
    return rows


def fix_sites(rows: list[CompareRow], model: Model,
              baseline: str | None = None) -> list[FixAgainstVariants]:
    """Each root cause of the baseline with a proposed fix, against the variants that remove it
    (:func:`~streamsim.explore.fixsites.fixes_against_variants`); [] without a baseline."""
    base = baseline_of(model, rows, baseline)
    if base is None:
        return []
    return fixes_against_variants(base.report, [(r.variant, r.report) for r in rows
                                                if r is not base])


def baseline_of(model: Model, rows: list[CompareRow],
                explicit: str | None = None) -> CompareRow | None:
    name = explicit or getattr(model.module, "BASELINE", None)
    for r in rows:
        if r.variant == name:
            return r
    return None if name else rows[0]


def _rel(x: float, base: float) -> str:
    return f"{(x - base) / base:+.1%}" if base else "n/a"


def _peak(m, base) -> str:
    """The largest rank's peak live bytes, and its change against the baseline's when it
    differs: ``2.9 GiB (+768.0 MiB)``; ``-`` when the run counted no memory."""
    if not m.peak_bytes:
        return "-"
    d = m.peak_max_bytes - base.peak_max_bytes if base is not None and base.peak_bytes else 0
    return format_bytes(m.peak_max_bytes) + (f" ({'+' if d > 0 else ''}{format_bytes(d)})"
                                             if d else "")


def render_compare(rows: list[CompareRow], model: Model, *, markdown: bool = False,
                   baseline: str | None = None) -> str:
    """One table: each variant's verdict (``Findings.verdict``: manifest, deadlock, latent or
    clean, the words ``sweep`` uses), root causes and the hazard instances behind them
    (manifest/latent), deadlock, makespan, step latency, bubble, peak memory (the largest rank's
    peak live bytes, with its change against the baseline), cost."""
    base = baseline_of(model, rows, baseline)
    head = ["variant", "verdict", "root causes", "hazards", "manifest", "latent", "deadlock",
            "makespan us",
            "mean step us", "p99 step us", "bubble", "peak memory",
            f"cost vs {base.variant}" if base else "cost"]
    body = []
    for r in rows:
        m, f = r.report.metrics, r.report.findings
        cost = "baseline" if base is r else (
            "(deadlock)" if f.deadlock else _rel(m.makespan_us, base.report.metrics.makespan_us)
            if base else "")
        body.append([r.variant, verdict_word(f.verdict), str(len(f.root_causes)), str(len(f.hazards)),
                     str(r.manifest), str(r.latent),
                     "yes" if f.deadlock else "no", f"{m.makespan_us:,.0f}",
                     *((f"{m.mean_step_us:,.0f}", f"{m.p99_step_us:,.0f}") if m.steps else
                       ("-", "-")),  # no step labels: no step latency (not a latency of 0)
                     f"{m.bubble_share:.1%}", _peak(m, base.report.metrics if base else None),
                     cost])
    changed = {k: v for k, v in (rows[0].report.params.items() if rows else ())
               if k in model.params and model.params[k].default != v}
    title = f"{model.name}: {len(rows)} variants, " + (
        "parameters " + " ".join(f"{k}={v}" for k, v in changed.items()) if changed
        else "default parameters (streamsim variants MODEL lists them)")
    if markdown:
        out = [f"**{title}**", "", "| " + " | ".join(head) + " |",
               "|" + "|".join("---" for _ in head) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(out) + "\n" + _then(rows, model, base, baseline, markdown)
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    out = [title, fmt(head), fmt(["-" * w for w in widths])] + [fmt(row) for row in body]
    return "\n".join(out) + "\n" + _then(rows, model, base, baseline, markdown)


def _then(rows: list[CompareRow], model: Model, base: CompareRow | None, baseline: str | None,
          markdown: bool) -> str:
    """The fix-sites section after the table (a blank line first), or ''."""
    text = render_fix_sites(fix_sites(rows, model, baseline), base.variant, markdown=markdown,
                            all_fixes=base.report.fix_cost) if base is not None else ""
    return "\n" + text if text else ""


def compare_json(rows: list[CompareRow], model: Model, args) -> dict:
    base = baseline_of(model, rows, getattr(args, "baseline", None))
    out = []
    for r in rows:
        m = r.report.metrics
        out.append({"variant": r.variant, "verdict": r.report.findings.verdict,
                    "root_causes": len(r.report.findings.root_causes),
                    "hazards": len(r.report.findings.hazards),
                    "manifest": r.manifest, "latent": r.latent,
                    "deadlock": r.report.findings.deadlock is not None,
                    "metrics": m.to_json_dict(),
                    "makespan_change_vs_baseline": None if base is None or not base.report.metrics.makespan_us
                    else round((m.makespan_us - base.report.metrics.makespan_us)
                               / base.report.metrics.makespan_us, 6)})
    return {"model": model.name, "params": dict(rows[0].report.params) if rows else {},
            "seed": args.seed, "baseline": base.variant if base else None, "variants": out,
            "fix_sites": [it.to_json_dict() for it in
                          fix_sites(rows, model, getattr(args, "baseline", None))]}
