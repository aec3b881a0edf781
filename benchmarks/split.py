"""Where a model run's time goes: the simulation against every stage after it (issue 26).

    python benchmarks/split.py [--variant regressed_49274] [--set requests=32 --set
                               decode_steps=256 --set tp=2] [--repeat 3] [--no-fix-cost]
                               [--root DIR ...]

Runs ``streamsim run models/vllm_pp.py --variant regressed_49274`` (the variant with hazards, so
that fixes are proposed and costed: about 269k trace ops with the ``--set`` values above, which
are the default; the model's default variant, ``pre_49274``, has none) through the library's own main path (``streamsim.pipeline.run_model``, then the CLI's
text rendering) with a timer wrapped around each stage function that path calls, and prints, in
CPU and wall seconds, each stage's own time (a stage nested in another is taken out of it):

The ``path`` column: ``native`` or ``python`` for the HB pass and the metrics, as they ran; every
other stage is reported ``python`` (the simulations: ``simpy``), fix costing's keying and shift
included, whose per-op scans run compiled where built (docs/native.md).

* ``simulate``: the simulation of the model (simpy);
* after the simulation: the HB pass (and which path it took: ``native`` = the compiled pass,
  ``python`` = the reference), the fixes proposed for its hazards, root causes, liveness
  (deadlock and warnings), metrics;
* fix costing: its re-simulations (``re-simulate``) and the analyses of the re-runs (keying the
  fixes, counting what hazards are left, deadlock, metrics, the shift of delayed ops);
* ``report``: the text report (the CLI's ``_render``);
* ``other``: what the timers do not cover (loading the model, building the Report, ...).

**After the simulation** counts everything but the simulation and the fix-costing re-simulations
(those are simulations themselves). Two ratios are printed: that part over the simulation (issue
26's target: <= 25%), and everything after the first simulation, re-simulations included, over
it.

Each repetition runs in a fresh process; with several ``--root`` (a streamsim checkout each, e.g.
``--root /work/main --root .``) the roots alternate, run after run, so a drifting machine loads
them alike. Per stage: the best and the median over the repetitions. Prints figures; exits 0
whatever they are. Not a test.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import compile_bytecode  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = "models/vllm_pp.py"
SETS = ["requests=32", "decode_steps=256", "tp=2"]
SIM, RESIM = "simulate", "fix cost: re-simulate"
ORDER = [SIM, "HB pass", "fixes", "root causes", "liveness", "metrics",
         "fix cost: keying", RESIM, "fix cost: HB pass of re-runs", "fix cost: liveness of re-runs",
         "fix cost: metrics of re-runs", "fix cost: shift", "report", "other"]


class Clock:
    """Exclusive CPU and wall time per stage label: a stage's time less its nested stages'."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.paths: dict[str, set[str]] = {}
        self._stack: list[list[float]] = []  # per open stage: [child wall, child cpu]

    def timed(self, label: Callable[..., str] | str, fn: Callable) -> Callable:
        """``fn`` with its time charged to ``label`` (or ``label(*args, **kwargs)``)."""
        def wrapper(*args, **kwargs):
            name = label(*args, **kwargs) if callable(label) else label
            self._stack.append([0.0, 0.0])
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                dw, dc = time.perf_counter() - w0, time.process_time() - c0
                child = self._stack.pop()
                self.wall[name] = self.wall.get(name, 0.0) + dw - child[0]
                self.cpu[name] = self.cpu.get(name, 0.0) + dc - child[1]
                if self._stack:
                    self._stack[-1][0] += dw
                    self._stack[-1][1] += dc
        return wrapper


def _child(root: str, variant: str, sets: list[str], fix_cost: bool) -> dict[str, Any]:
    """One measured run with the streamsim of ``root``; the figures as a dict."""
    sys.path.insert(0, root)
    import streamsim.pipeline as pipeline
    from streamsim import native
    from streamsim.analysis import checks, fixes, hb
    from streamsim.cli import commands
    from streamsim.pipeline import fixcost

    clock = Clock()
    costing = [False]

    def phase(stage: str, cost_stage: str) -> Callable[..., str]:
        return lambda *a, **k: cost_stage if costing[0] else stage

    def wrap(mod: Any, attr: str, label) -> None:
        if hasattr(mod, attr):  # (an older or newer checkout may lack a stage function)
            setattr(mod, attr, clock.timed(label, getattr(mod, attr)))

    wrap(pipeline, "simulate", lambda *a, **k: RESIM if k.get("fixes") else SIM)
    wrap(hb, "_analyse", phase("HB pass", "fix cost: HB pass of re-runs"))
    # (the compiled pass is called from analyse_hazards, which checks imports by name, not
    # through _analyse: wrapped too, so that the first run's pass is not left in "other"; the
    # fixes it proposes are their own stage)
    wrap(checks, "analyse_hazards", phase("HB pass", "fix cost: HB pass of re-runs"))
    # (a re-run's hazards counted, not made: fix costing calls hb.hazard_count by its own name)
    wrap(fixcost, "hazard_count", "fix cost: HB pass of re-runs")
    wrap(fixes, "with_fix", "fixes")
    wrap(fixes, "with_fixes", "fixes")  # (the compiled fixes: with_fix only where they decline)
    wrap(checks, "root_causes", "root causes")
    for mod in (checks, fixcost):
        wrap(mod, "deadlock_from_stall", phase("liveness", "fix cost: liveness of re-runs"))
        wrap(mod, "compute_metrics", phase("metrics", "fix cost: metrics of re-runs"))
    wrap(checks, "warnings", "liveness")
    wrap(pipeline, "compute_metrics", "metrics")
    wrap(fixcost.Keying, "__init__", "fix cost: keying")
    wrap(fixcost, "fix_shift", "fix cost: shift")
    costs = pipeline._costs

    def marked_costs(*a, **k):
        costing[0] = True
        try:
            return costs(*a, **k)
        finally:
            costing[0] = False
    pipeline._costs = marked_costs

    def trace_path(attr: str, stage: str, cost_stage: str) -> None:
        """Note which path ``native.<attr>`` took (None: the reference's) under the stage it
        ran in, when this checkout has it (an older one may not)."""
        if not hasattr(native, attr):
            return
        compiled = getattr(native, attr)

        def traced(*a, **k):
            got = compiled(*a, **k)
            clock.paths.setdefault(cost_stage if costing[0] else stage, set()).add(
                "python" if got is None else "native")
            return got
        setattr(native, attr, traced)

    trace_path("hb_rows", "HB pass", "fix cost: HB pass of re-runs")
    trace_path("hb_hazards", "HB pass", "fix cost: HB pass of re-runs")  # (a check's hazards)
    trace_path("hazard_count", "fix cost: HB pass of re-runs",  # (counted, not made)
               "fix cost: HB pass of re-runs")
    trace_path("metrics", "metrics", "fix cost: metrics of re-runs")

    w0, c0 = time.perf_counter(), time.process_time()
    report = pipeline.run_model(os.path.join(root, MODEL), variant, sets, fix_cost=fix_cost)
    render = clock.timed("report", commands._render)
    # (json26 gave _render a json_version, which a text report ignores; a checkout from before
    # it takes three arguments)
    more = (4,) if "json_version" in inspect.signature(commands._render).parameters else ()
    text = render(report, "text", None, *more)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    clock.wall["other"] = wall - sum(clock.wall.values())
    clock.cpu["other"] = cpu - sum(clock.cpu.values())
    return {"wall": clock.wall, "cpu": clock.cpu, "total_wall": wall, "total_cpu": cpu,
            "paths": {k: sorted(v) for k, v in clock.paths.items()},
            "ops": len(report.trace.ops), "report_chars": len(text),
            "root_causes": len(report.findings.root_causes)}


def _after(figs: dict[str, float]) -> tuple[float, float]:
    """(after the simulation without re-simulations, after it with them), from stage times."""
    rest = sum(v for k, v in figs.items() if k not in (SIM, RESIM))
    return rest, rest + figs.get(RESIM, 0.0)


def _print(root: str, runs: list[dict[str, Any]]) -> None:
    first = runs[0]
    print(f"{root}: {first['ops']:,} trace ops, {first['root_causes']} root causes, "
          f"{len(runs)} runs (best / median, seconds)")
    labels = [k for k in ORDER if k in first["wall"]] + \
        sorted(k for k in first["wall"] if k not in ORDER)
    print(f"  {'stage':<32} {'CPU best':>9} {'median':>7} {'wall best':>9} {'median':>7}  path")
    for k in labels:
        cpu = [r["cpu"].get(k, 0.0) for r in runs]
        wall = [r["wall"].get(k, 0.0) for r in runs]
        path = "/".join(first["paths"].get(k, [])) or \
            ("simpy" if k in (SIM, RESIM) else "-" if k == "other" else "python")
        print(f"  {k:<32} {min(cpu):9.2f} {statistics.median(cpu):7.2f} {min(wall):9.2f} "
              f"{statistics.median(wall):7.2f}  {path}")
    for clock in ("cpu", "wall"):
        sims = [r[clock][SIM] for r in runs]
        after = [_after(r[clock])[0] for r in runs]
        with_re = [_after(r[clock])[1] for r in runs]
        totals = [r[f"total_{clock}"] for r in runs]
        ratio = [a / s for a, s in zip(after, sims)]
        ratio_re = [a / s for a, s in zip(with_re, sims)]
        print(f"  {clock:>4}: total {min(totals):.2f} s best ({statistics.median(totals):.2f} "
              f"median); simulation {min(sims):.2f}; after it (no re-simulations) "
              f"{min(after):.2f} = {min(ratio):.0%} of the simulation best, "
              f"{statistics.median(ratio):.0%} median (target <= 25%); with the re-simulations "
              f"{min(with_re):.2f} = {min(ratio_re):.0%} best, {statistics.median(ratio_re):.0%} "
              f"median")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        root, variant, fix_cost, *sets = sys.argv[2:]
        print(json.dumps(_child(root, variant, sets, fix_cost == "1")))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="regressed_49274")
    ap.add_argument("--set", action="append", dest="sets", metavar="KEY=VALUE")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-fix-cost", action="store_true")
    ap.add_argument("--root", action="append", dest="roots", metavar="DIR",
                    help="a streamsim checkout to measure (repeatable: they alternate)")
    args = ap.parse_args()
    roots = [os.path.abspath(r) for r in (args.roots or [ROOT])]
    sets = args.sets or SETS
    print(f"run {MODEL} --variant {args.variant} {' '.join('--set ' + s for s in sets)}"
          f"{' --no-fix-cost' if args.no_fix_cost else ''}, then its text report; "
          f"STREAMSIM_NATIVE={os.environ.get('STREAMSIM_NATIVE', 'unset')}")
    runs: dict[str, list[dict]] = {r: [] for r in roots}
    for root in roots:  # (each root's bytecode written first, as an install leaves it)
        compile_bytecode(root)
    for _ in range(args.repeat):
        for root in roots:
            out = subprocess.run([sys.executable, __file__, "--child", root, args.variant,
                                  "0" if args.no_fix_cost else "1", *sets],
                                 capture_output=True, text=True, cwd=root)
            if out.returncode:
                sys.exit(f"split.py: the run with {root} failed:\n{out.stderr[-3000:]}")
            runs[root].append(json.loads(out.stdout.splitlines()[-1]))
    for root in roots:
        _print(root, runs[root])


if __name__ == "__main__":
    main()
