"""Parameter sweeps: one row per point of a cartesian grid, with hazards, deadlock and metrics.

The reviewer's question "from which ring size on is this safe, and what does it cost?" is a sweep::

    >>> from streamsim.explore.sweep import sweep, plot_sweep
    >>> rows = sweep("models/vllm_pp.py", "ring_no_wait", {"ring_slots": [1, 2, 3, 4, 5, 6]})
    >>> [(r.point["ring_slots"], r.verdict) for r in rows]
    >>> plot_sweep(rows, "makespan_us", "sweep.png")

Several variants share one grid (``sweep(model, ["racy", "fixed"], grid)``): a row per variant and
point, variant by variant; the rows then carry a ``variant`` column (table, CSV, JSON) and the plot
a panel per variant.

Each point runs once with the given seed (``runs=1``), or ``runs`` times with the seeds of
:func:`streamsim.explore.runs.run_seeds`; points run in parallel like :func:`streamsim.explore.hunt.explore_schedules`.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
import os
import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..analysis.findings import VERDICTS, verdict_word
from ..analysis.metrics import format_bytes
from ..sim.errors import ModelError
from ..sim.model import Model
from ..sim.runner import DEFAULT_MAX_OPS, DEFAULT_MAX_TIME
from ..pipeline import seed_used, strategies
from .hunt import _prepare
from .runs import RunResult, RunSpec, execute, format_set, replay_command, run_seeds

# Row columns. step_count is Metrics.steps, renamed: a model may well have a "steps" parameter.
METRICS = ("makespan_us", "mean_step_us", "p99_step_us", "bubble_share", "comm_overlap_share",
           "step_count", "peak_bytes")  # peak_bytes: the largest rank's peak live bytes
STEP_METRICS = ("mean_step_us", "p99_step_us")
COUNTS = ("root_causes", "hazards", "manifest", "latent", "patterns", "manifest_runs",
          "latent_runs", "deadlock_runs")
_RESERVED = frozenset(METRICS + COUNTS + ("verdict", "runs", "replay", "variant"))
MAX_GRID_POINTS = 100_000  # points a grid may have: a range is checked before it is expanded


def parse_grid(model: Model, specs: Iterable[str]) -> dict[str, list]:
    """``["k=v1,v2,...", "n=1..6"]`` -> ``{"k": [v1, v2, ...], "n": [1, ..., 6]}`` (typed).

    ``a..b`` is an inclusive integer range (for int parameters). A key may hold at most
    :data:`MAX_GRID_POINTS` values and the whole grid as many points, checked before any range is
    expanded (``1..1000000000`` was expanded in memory until the process was killed).
    """
    grid: dict[str, list] = {}
    for spec in specs:
        if "=" not in spec:
            raise ModelError(f"grid {spec}: expected key=v1,v2,...", arguments=("grid",))
        key, text = (s.strip() for s in spec.split("=", 1))
        param = model.params.get(key)
        if param is None:
            raise ModelError(f"grid {spec}: unknown parameter {key!r} (known: "
                             f"{', '.join(model.params) or 'none'})", arguments=("grid",))
        if key in grid:
            raise ModelError(f"grid {key} given twice", arguments=("grid",))
        values: list = []
        for item in (t.strip() for t in text.split(",")):
            if not item:
                raise ModelError(f"grid {spec}: empty value", arguments=("grid",))
            if param.type is int and ".." in item:
                lo, _, hi = item.partition("..")
                try:
                    span = range(int(lo), int(hi) + 1)
                except ValueError:
                    raise ModelError(f"grid {spec}: bad range {item!r} (expected a..b)",
                                     arguments=("grid",)) from None
                if len(values) + len(span) > MAX_GRID_POINTS:  # (len of a range: no expansion)
                    raise ModelError(f"grid {spec}: {len(values) + len(span):,} values, more "
                                     f"than the {MAX_GRID_POINTS:,} a sweep may have", arguments=("grid",))
                values.extend(span)
            else:
                try:
                    values.append(param.parse(item))
                except ModelError as e:  # (it names the value as a parameter's: here it is the grid's)
                    raise ModelError(f"grid {spec}: {str(e).split(': ', 1)[-1]}",
                                     arguments=("grid",)) from None
        if not values:
            raise ModelError(f"grid {spec}: no values", arguments=("grid",))
        grid[key] = values
    if not grid:
        raise ModelError("sweep needs at least one grid key=v1,v2,...", arguments=("grid",))
    points = math.prod(len(v) for v in grid.values())
    if points > MAX_GRID_POINTS:
        raise ModelError(f"grid: {' x '.join(str(len(v)) for v in grid.values())} = "
                         f"{points:,} points, more than the {MAX_GRID_POINTS:,} a sweep may have", arguments=("grid",))
    return grid


@dataclass(frozen=True)
class SweepRow:
    """One grid point: its parameters, verdict, hazard counts and (mean) metrics.

    ``root_causes`` counts the root causes of the point's first run, ``hazards``/``manifest``/
    ``latent`` its hazard instances; ``patterns`` the distinct root causes over all its runs;
    ``*_runs`` count over all its runs; metrics are means over its runs.
    """

    point: dict  # the grid values of this point
    params: dict  # every parameter value
    replay: str  # the command replaying its first run
    results: tuple[RunResult, ...] = field(repr=False, default=())
    variant: str = ""  # the variant it ran

    def __repr__(self) -> str:
        """``<SweepRow ring_no_wait ring_slots=2: clean, 0 hazards>`` (``params`` holds every
        parameter)."""
        point = " ".join([self.variant] + [f"{k}={format_set(v)}" for k, v in self.point.items()])
        return (f"<SweepRow {point}: {self.verdict}, {self.hazards} "
                f"hazard{'s' * (self.hazards != 1)}>")

    @property
    def runs(self) -> int:
        return len(self.results)

    @property
    def root_causes(self) -> int:
        return len(self.results[0].patterns)

    @property
    def hazards(self) -> int:
        return self.results[0].hazards

    @property
    def manifest(self) -> int:
        return self.results[0].manifest

    @property
    def latent(self) -> int:
        return self.results[0].latent

    @property
    def patterns(self) -> int:
        """Distinct root causes over all runs."""
        return len({p for r in self.results for p, _ in r.patterns})

    @property
    def manifest_runs(self) -> int:
        return sum(r.manifest > 0 for r in self.results)

    @property
    def latent_runs(self) -> int:
        return sum(r.hazards > 0 and r.manifest == 0 for r in self.results)

    @property
    def deadlock_runs(self) -> int:
        return sum(r.deadlock for r in self.results)

    @property
    def verdict(self) -> str:
        """``manifest`` (a hazard manifested in some run), ``deadlock``, ``latent`` or ``clean``."""
        if self.manifest_runs:
            return "manifest"
        if self.deadlock_runs:
            return "deadlock"
        return "latent" if self.latent_runs else "clean"

    def metric(self, name: str) -> float:
        if name in COUNTS:
            return float(getattr(self, name))
        if name not in METRICS:
            raise ModelError(f"metric {name}: unknown (one of {', '.join(METRICS + COUNTS)})",
                             arguments=("metric",))
        attr = {"step_count": "steps", "peak_bytes": "peak_max_bytes"}.get(name, name)
        return sum(getattr(r.metrics, attr) for r in self.results) / len(self.results)

    def to_dict(self, with_variant: bool = False) -> dict:
        """The row as plain data: ``variant`` first when ``with_variant`` (a sweep of several
        variants), the grid values, verdict, counts, metrics (``step_count`` and ``peak_bytes``
        integers when they are), replay command."""
        d: dict[str, Any] = {"variant": self.variant} if with_variant else {}
        d.update({(f"param_{k}" if k in _RESERVED else k): v for k, v in self.point.items()})
        d.update(verdict=self.verdict, runs=self.runs, root_causes=self.root_causes,
                 hazards=self.hazards,
                 manifest=self.manifest, latent=self.latent, patterns=self.patterns,
                 manifest_runs=self.manifest_runs, latent_runs=self.latent_runs,
                 deadlock_runs=self.deadlock_runs)
        d.update({m: round(self.metric(m), 6) for m in METRICS})
        for k in ("step_count", "peak_bytes"):  # a count: 2, not 2.0 (a mean may be 2.5)
            if d[k] == int(d[k]):
                d[k] = int(d[k])
        d["replay"] = self.replay
        return d


def sweep(model: Model | str, variant: str | Sequence[str] | None, grid: Mapping[str, Sequence],
          params: Mapping[str, Any] | Iterable[str] = (), *, seed: int | None = None,
          jitter: float = 0.0, strategy: str = strategies.DEFAULT, depth: int = 2, runs: int = 1,
          jobs: int | None = None, scheduler=None, max_ops: int = DEFAULT_MAX_OPS,
          max_time: float = DEFAULT_MAX_TIME, progress: bool = False) -> list[SweepRow]:
    """Run every point of the cartesian ``grid`` (over ``params``); one :class:`SweepRow` a point,
    in grid order (the last key varies fastest). Grid values may be typed or ``--set`` text.
    ``variant``: one name (None: the model's first) or several, each run on the whole grid: a row
    per variant and point, variant by variant."""
    strategies.get(strategy)  # (an unknown name: an InputError naming the choices)
    if runs < 1:
        raise ModelError(f"runs must be >= 1, got {runs}", arguments=("runs",))
    names = [variant] if variant is None or isinstance(variant, str) else list(variant)
    if not names:
        raise ModelError("sweep needs a variant")
    model, _, base, _ = _prepare(model, names[0], params)
    variants = list(dict.fromkeys(model.check_variant(v) for v in names))
    keys = list(grid)
    for k in keys:
        if k not in model.params:
            raise ModelError(f"grid {k}: unknown parameter {k!r} (known: "
                             f"{', '.join(model.params) or 'none'})", arguments=("grid",))
    typed = {k: [model.params[k].parse(v) if isinstance(v, str) else model.params[k].check(v)
                 for v in grid[k]] for k in keys}
    seeds = [seed_used(seed, jitter, strategy)] if runs == 1 else run_seeds(seed or 0, runs)
    points, tasks = [], []
    for variant_name in variants:
        for combo in itertools.product(*(typed[k] for k in keys)):
            point = dict(zip(keys, combo))
            values = model.resolve({**base, **point})
            label = " ".join(f"{k}={format_set(v)}" for k, v in point.items())
            spec = RunSpec(model_path=os.path.abspath(model.path), variant=variant_name,
                           params=dict(values), jitter=jitter, strategy=strategy, depth=depth,
                           estimate=None, max_ops=max_ops, max_time=max_time, cwd=os.getcwd(),
                           label=label if len(variants) == 1 else f"{variant_name} {label}")
            points.append((variant_name, point, values))
            tasks += [(spec, s) for s in seeds]
    results = execute(tasks, jobs=jobs, scheduler=scheduler, progress=progress,
                      desc=f"sweep {', '.join(variants)}")
    rows = []
    for i, (variant_name, point, values) in enumerate(points):
        sets = {k: v for k, v in values.items() if v != model.params[k].default}
        rows.append(SweepRow(point=point, params=dict(values),
                             replay=replay_command(model.path, variant_name, sets, seeds[0],
                                                   jitter, strategy, depth, max_ops, max_time),
                             results=tuple(results[i * len(seeds):(i + 1) * len(seeds)]),
                             variant=variant_name))
    return rows


def several_variants(rows: Sequence[SweepRow]) -> bool:
    """Whether the rows come from more than one variant (then each says which)."""
    return len({r.variant for r in rows}) > 1


def rows_csv(rows: Sequence[SweepRow]) -> str:
    """The rows as CSV text: grid keys, verdict, counts, metrics, replay command."""
    out = io.StringIO()
    dicts = [r.to_dict(several_variants(rows)) for r in rows]
    writer = csv.DictWriter(out, fieldnames=list(dicts[0]) if dicts else [], lineterminator="\n")
    writer.writeheader()
    for d in dicts:
        writer.writerow({k: format_set(v) if isinstance(v, (bool, float)) else v
                         for k, v in d.items()})
    return out.getvalue()


def render_sweep(rows: Sequence[SweepRow], metric: str = "makespan_us") -> str:
    """A text table, one line a point."""
    if not rows:
        return "no points\n"
    keys = list(rows[0].point)
    many = rows[0].runs > 1
    named = several_variants(rows)
    head = ["variant"] * named + keys + ["verdict", "root causes", "hazards", "manifest", "latent"] + \
        (["manifest runs", "deadlock runs"] if many else ["deadlock"]) + \
        [m for m in dict.fromkeys([metric, "makespan_us", "mean_step_us", "bubble_share",
                                   "peak_bytes"])
         if m not in ("root_causes", "hazards", "manifest", "latent")
         and not (many and m in ("manifest_runs", "deadlock_runs"))]
    body = []
    for r in rows:
        cells = [r.variant] * named + [format_set(r.point[k]) for k in keys] + [
                                                          verdict_word(r.verdict),
                                                          str(r.root_causes), str(r.hazards),
                                                          str(r.manifest), str(r.latent)]
        cells += [f"{r.manifest_runs}/{r.runs}", f"{r.deadlock_runs}/{r.runs}"] if many else \
            ["yes" if r.deadlock_runs else "no"]
        for m in head[len(cells):]:
            v = r.metric(m)
            if m in STEP_METRICS and not r.metric("step_count"):
                cells.append("-")  # no step labels: no step latency (not a latency of 0)
                continue
            cells.append(f"{v:.1%}" if m.endswith("share") else f"{v:,.1f}" if m.endswith("_us")
                         else format_bytes(v) if m == "peak_bytes" else f"{v:g}")
        body.append(cells)
    if many:  # a metric column is the mean over the point's runs: say so in its heading
        head = [f"mean {h}" if h in METRICS else h for h in head]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if named and i == 0 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body]) + "\n"


_STYLE = {  # verdict -> marker, colour, label
    "manifest": ("X", "#d62728", "hazard manifest"),
    "deadlock": ("s", "#7b3294", "deadlock"),
    "latent": ("o", "#ff7f0e", "hazard latent"),
    "clean": ("o", "#2ca02c", "clean"),
}
_LABELS = {"makespan_us": "makespan (us)", "mean_step_us": "mean step latency (us)",
           "p99_step_us": "p99 step latency (us)", "bubble_share": "pipeline bubble (share)",
           "comm_overlap_share": "comm/compute overlap (share)", "step_count": "steps run",
           "peak_bytes": "peak live bytes, largest rank",
           "hazards": "data hazards (first run)", "manifest": "manifest hazards (first run)",
           "latent": "latent hazards (first run)", "patterns": "distinct root causes (all runs)",
           "root_causes": "root causes (first run)",
           "manifest_runs": "runs with a manifest hazard", "latent_runs": "runs with only latent "
           "hazards", "deadlock_runs": "runs that deadlocked"}


def _numeric(values: Sequence) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _evenly_spaced(values: Sequence) -> bool:
    """Sorted distinct numbers one step apart (a linear axis shows them without crowding)."""
    steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
    return len(steps) <= 1


def plot_sweep(rows: Sequence[SweepRow], metric: str = "makespan_us", path: str | None = None,
               title: str | None = None):
    """Small multiples of ``metric`` across the grid, each point marked by its verdict.

    The first grid key is the x axis (a linear one when its values are evenly spaced numbers,
    else one evenly spaced position per value); one panel per combination of the other keys (and
    per variant, when the rows come from several), titled one ``key=value`` a line. Returns the matplotlib figure; with ``path``, writes it
    atomically (format from the extension).
    """
    if not rows:
        raise ModelError("nothing to plot: the sweep has no points")
    rows[0].metric(metric)  # validates the name
    from ..report.figures import new_figure  # no pyplot: no global state, no GUI backend
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    keys = list(rows[0].point)
    xkey, pkeys = keys[0], keys[1:]
    named = several_variants(rows)
    panels: dict[tuple, list[SweepRow]] = {}  # (variant?, other keys' values) -> its rows
    for r in rows:
        panels.setdefault((r.variant,) * named + tuple(r.point[k] for k in pkeys), []).append(r)
    n = len(panels)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    width = 3.6 * ncols + 0.8
    seen = [v for v in VERDICTS if any(r.verdict == v for r in rows)]
    per_row = max(1, min(len(seen), int(width / 1.7)))  # a legend entry takes about 1.7 inches
    legend_rows = -(-len(seen) // per_row)
    # the title wrapped to the figure's width (a one-panel sweep is narrow): never clipped
    lines = textwrap.wrap(title, max(20, int(width * 72 / (11 * 0.6)))) if title else []
    top_in, bottom_in = 0.12 + 0.2 * len(lines), 0.08 + 0.28 * legend_rows
    title_lines = max(len(pkeys) + named, 1)  # a panel's title: one key=value a line
    height = (2.7 + 0.2 * title_lines) * nrows + top_in + bottom_in
    fig = new_figure(width, height)
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    xs_all = [r.point[xkey] for r in rows]
    cats = list(dict.fromkeys(xs_all))
    numeric = _numeric(xs_all) and _evenly_spaced(sorted(cats))
    at = {c: i for i, c in enumerate(cats)}  # (a lookup, not a scan of the values per point)
    pos = (lambda v: v) if numeric else at.__getitem__
    for ax, (pval, prs) in zip(axes.flat, panels.items()):
        xs = [pos(r.point[xkey]) for r in prs]
        ys = [r.metric(metric) for r in prs]
        ax.plot(xs, ys, color="#999999", lw=1.2, zorder=1)
        for r, x, y in zip(prs, xs, ys):
            marker, colour, _ = _STYLE[r.verdict]
            ax.scatter([x], [y], marker=marker, s=90 if marker == "X" else 55, color=colour,
                       edgecolor="black" if marker != "X" else colour, linewidths=0.6, zorder=3)
        if pkeys or named:
            ax.set_title("\n".join([f"variant={pval[0]}"] * named + [
                f"{k}={format_set(v)}" for k, v in zip(pkeys, pval[named:])]), fontsize=10)
        ax.grid(True, alpha=0.3)
        if metric.endswith("_us"):  # 2,198,186 rather than 2.198 with a "1e6" in the corner
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        if not numeric:
            ax.set_xticks(range(len(cats)))
            crowded = len(cats) > 6
            ax.set_xticklabels([format_set(c) for c in cats], rotation=45 if crowded else 0,
                               ha="right" if crowded else "center")
        elif all(isinstance(v, int) for v in xs_all):
            ax.set_xticks(sorted(set(xs_all)))
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel(xkey)
    for ax in axes[:, 0]:
        runs = rows[0].runs
        label = _LABELS.get(metric, metric)
        if runs == 1:
            label = label.replace(" (first run)", "")
        ax.set_ylabel(label + (f" (of {runs})" if metric.endswith("_runs") else
                               f"\nmean of {runs} runs" if runs > 1 and metric in METRICS
                               else ""))
    handles = [Line2D([], [], linestyle="", marker=_STYLE[v][0], markersize=9, color=_STYLE[v][1],
                      markeredgecolor="black" if _STYLE[v][0] != "X" else _STYLE[v][1],
                      label=_STYLE[v][2]) for v in seen]
    fig.legend(handles=handles, loc="lower center", ncol=per_row, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    if lines:
        fig.suptitle("\n".join(lines), fontsize=11, y=1 - 0.1 / height, va="top")
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1))  # (it makes room for the suptitle)
    if path is not None:
        from ..report.atomic import write_with
        from ..report.figures import figure_bytes
        fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
        write_with(path, lambda f: f.write(figure_bytes(fig, fmt)))
    return fig
