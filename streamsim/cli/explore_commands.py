"""CLI commands for exploring schedules: explore, sweep, shrink (see streamsim.explore.hunt, .sweep,
.shrink for the Python API they wrap)."""
from __future__ import annotations

import argparse
import json
import sys

from ..pipeline import strategies
from ..report.escape import terminal
from ..sim.errors import ModelError


def _add_parallel_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=int, default=None,
                   help="local worker processes (default: the core count)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on this Dask distributed scheduler (tcp://host:8786) instead; "
                   "needs streamsim[dask]")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _help(p: argparse.ArgumentParser, option: str, text: str) -> None:
    for action in p._actions:
        if option in action.option_strings:
            action.help = text


def add_parsers(sub, add_run_options, add_sim_options, summary, exit_codes: str,
                metrics_help: str) -> None:
    """Register this module's subcommands on the ``streamsim`` parser (``summary(name)``: the
    command's one-line help; ``exit_codes`` and ``metrics_help``: the epilog texts every command
    of ``streamsim.cli.main`` shares, handed down so that this module does not import it back)."""
    EXIT_CODES, METRICS_HELP = exit_codes, metrics_help
    p = sub.add_parser("explore", help=summary("explore"), epilog=EXIT_CODES,
                       description="Run a model N times with per-run seeds S*1000003+i; for each "
                       "hazard pattern print in how many runs it manifested, the first seed, and "
                       "the `streamsim run` command that replays it.")
    add_run_options(p)
    p.set_defaults(seed=0, jitter=None)  # explore: base seed 0; jitter 0.2 (random) / 0 (pct)
    _help(p, "--seed", "base seed S: run i uses seed S*1000003+i (default 0)")
    _help(p, "--jitter", "multiplicative duration jitter F: factors in [e^-F, e^F] (default 0.2 "
          "with --strategy random, 0 with pct)")
    p.add_argument("--runs", type=int, default=100, help="number of runs (default 100)")
    _add_parallel_options(p)
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="a text summary (default) or JSON")

    p = sub.add_parser("sweep", help=summary("sweep"),
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=METRICS_HELP + "With --runs N > 1 every metric is the mean over the "
                       "point's N runs; under\njitter or --strategy pct those runs are perturbed, "
                       "and the table and plot say so.\n\n" + EXIT_CODES,
                       description="Run every point of the cartesian grid of --grid values; one "
                       "row per point with\nits verdict (manifest / latent / clean / deadlock) "
                       "and metrics. Several variants (--variant\nrepeated, or --variants A,B) "
                       "share the grid: a row per variant and point.")
    add_run_options(p, variant_many=True)
    _help(p, "--variant", "variant to sweep (repeatable: every one on the same grid; default: "
          "the model's first)")
    p.add_argument("--variants", metavar="A,B,...", default=None,
                   help="variants to sweep on the same grid, comma-separated (with --variant: "
                   "both lists)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="parameter values to sweep (repeatable; a..b is an integer range; at "
                   "most 100,000 points in all)")
    p.add_argument("--runs", type=int, default=1,
                   help="runs per point (seeds S*1000003+i, S = --seed or 0; default 1: --seed)")
    p.add_argument("--csv", metavar="FILE", help="write the rows as CSV")
    p.add_argument("--plot", metavar="FILE",
                   help="write a small-multiples chart (.png, .svg, .pdf, .jpg)")
    p.add_argument("--metric", default="makespan_us",
                   help="metric to plot (makespan_us, mean_step_us, p99_step_us, bubble_share, "
                   "comm_overlap_share, step_count, or a count: root_causes, hazards, manifest, "
                   "latent, patterns, manifest_runs, latent_runs, deadlock_runs; default "
                   "makespan_us)")
    _add_parallel_options(p)
    p.add_argument("--format", choices=("text", "json", "csv"), default="text",
                   help="a text table (default), JSON or CSV")

    p = sub.add_parser("shrink", help=summary("shrink"),
                       description="Remove ops from an op log (or a model run, dumped as one) "
                       "while the same hazard (kind, buffer, first and second op names) still "
                       "appears; write the smallest op log found.")
    p.add_argument("input", help="op log (.jsonl) or model file (.py)")
    p.add_argument("-o", "--output", required=True, help="where to write the shrunk op log")
    p.add_argument("--variant", help="model variant (model input only)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model parameter (model input only)")
    add_sim_options(p, strategy="either")
    p.add_argument("--hazard", type=int, default=None, metavar="N",
                   help="which hazard to keep: the N-th distinct (kind, buffer, first op name, "
                   "second op name) in report order (default: the first, the first manifest one "
                   "with --manifest)")
    p.add_argument("--manifest", action="store_true",
                   help="also require the hazard to stay manifest")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")


def _check_parallel(args) -> None:
    if args.jobs is not None and args.jobs < 1:
        raise ModelError(f"--jobs must be >= 1, got {args.jobs}")


def cmd_explore(args: argparse.Namespace) -> int:
    from ..explore.hunt import explore_schedules, render_explore
    _check_parallel(args)
    res = explore_schedules(args.model, args.variant, args.set, runs=args.runs, seed=args.seed,
                  jitter=args.jitter, strategy=args.strategy, depth=args.depth, jobs=args.jobs,
                  scheduler=args.scheduler, max_ops=args.max_ops, max_time=args.max_time,
                  progress=not args.quiet)
    if args.format == "json":
        sys.stdout.write(json.dumps(res.to_json_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(terminal(render_explore(res)))
    return 1 if res.found else 0


def timing_label(args, seed: int | None, counted: bool = False) -> str:
    """What a sweep's metrics are: one nominal run a point, or (the mean of) perturbed runs,
    said so that a perturbed makespan is never read as the nominal one. ``counted``: the metric
    counts runs (``manifest_runs``...), which is no mean."""
    lead = "counted over" if counted else "means of"
    how = [f"jitter {args.jitter:g}" if args.jitter else "",
           strategies.get(args.strategy).timing(args.depth)]
    how = " and ".join(w for w in how if w)
    if args.runs > 1:
        return (f"{lead} {args.runs} runs a point, perturbed by {how}, not the nominal timing"
                if how else f"{lead} {args.runs} runs a point, each the nominal timing")
    return f"one run a point, perturbed by {how} (seed {seed})" if how else \
        "one run a point, nominal timing"


def sweep_variants(args: argparse.Namespace) -> list:
    """The variants a sweep runs: every ``--variant``, then ``--variants``' names, in order
    (``[None]``: the model's first)."""
    names = list(args.variant or [])
    if args.variants is not None:
        listed = [v.strip() for v in args.variants.split(",")]
        if not all(listed):
            raise ModelError(f"--variants {args.variants}: an empty name (expected A,B,...)")
        names += listed
    return names or [None]


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..report.atomic import write_atomic
    from ..sim.model import load_model, split_set
    from ..explore.sweep import METRICS, COUNTS, parse_grid, plot_sweep, render_sweep, rows_csv, sweep
    _check_parallel(args)
    if args.metric not in METRICS + COUNTS:
        raise ModelError(f"--metric {args.metric}: unknown (one of "
                         f"{', '.join(METRICS + COUNTS)})")
    model = load_model(args.model)
    grid = parse_grid(model, args.grid)
    both = sorted({k for k, _ in map(split_set, args.set)} & set(grid))
    if both:
        raise ModelError(f"--set {both[0]} and --grid {both[0]}: a parameter is either fixed or "
                         "swept, not both")
    if args.plot:
        from .commands import picture_format
        from ..report.figures import FORMATS
        picture_format(args.plot, FORMATS, "--plot")
    variants = list(dict.fromkeys(model.check_variant(v) for v in sweep_variants(args)))
    rows = sweep(model, variants, grid, args.set, seed=args.seed, jitter=args.jitter,
                 strategy=args.strategy, depth=args.depth, runs=args.runs, jobs=args.jobs,
                 scheduler=args.scheduler, max_ops=args.max_ops, max_time=args.max_time,
                 progress=not args.quiet)
    variant = ", ".join(variants)
    several = len(variants) > 1
    if args.csv:
        write_atomic(args.csv, rows_csv(rows))
    seed = rows[0].results[0].seed if rows else None
    if args.plot:
        timing = timing_label(args, seed, counted=args.metric in COUNTS)
        plot_sweep(rows, args.metric, args.plot,
                   title=f"{model.name} [{variant}]: {args.metric} across the grid ({timing})")
    if args.format == "json":
        head = {"variants": variants} if several else {"variant": variant}
        sys.stdout.write(json.dumps({"model": model.path, **head,
                                     "grid": {k: list(v) for k, v in grid.items()},
                                     "rows": [r.to_dict(several) for r in rows]}, indent=2) + "\n")
    elif args.format == "csv":
        sys.stdout.write(rows_csv(rows))
    else:
        text = (f"{model.name} [{variant}]: {len(rows)} point{'s' * (len(rows) != 1)}; metrics: "
                f"{timing_label(args, seed)}\n")
        text += render_sweep(rows, args.metric)
        text += "".join(f"wrote {path}\n" for path in (args.csv, args.plot) if path)
        sys.stdout.write(terminal(text))
    return 1 if any(r.verdict != "clean" for r in rows) else 0


def cmd_shrink(args: argparse.Namespace) -> int:
    from ..explore.shrink import render_shrink, shrink, shrink_model
    opts = dict(seed=args.seed, jitter=args.jitter, max_ops=args.max_ops, max_time=args.max_time,
                require_manifest=args.manifest, hazard_index=args.hazard,
                progress=not args.quiet)
    from ..oplog import is_oplog_path
    if not is_oplog_path(args.input):
        res = shrink_model(args.input, args.output, args.variant, args.set,
                           strategy=args.strategy, depth=args.depth, **opts)
    else:
        if args.variant or args.set:
            raise ModelError("--variant and --set apply to a model input (.py), not an op log")
        if not strategies.get(args.strategy).applies_to_oplog:
            raise ModelError("--strategy applies to a model input (.py), not an op log")
        res = shrink(args.input, args.output, **opts)
    sys.stdout.write(terminal(render_shrink(res)))
    return 0
