"""Explore throughput: simulated-and-analysed runs per wall second of the vLLM model.

Runs ``explore_schedules(models/vllm_pp.py)`` at the model's defaults (its first variant, default
parameters, strategy random, jitter 0.2) with ``--jobs 1`` and ``--jobs 2`` and prints runs/s for
each. Wall time covers everything ``streamsim explore`` does after loading the model: starting the worker
processes, the runs (simulate + analyse), and folding the results. One warm-up run first, so that
imports are not charged to ``--jobs 1``. CPU time a run (this process and its workers) is printed
too: unlike runs/s it does not depend on what else the machine is running.

Usage: ``python benchmarks/explore.py [--runs 40] [--variant V] [--strategy random|pct]
[--jobs 1 2]``.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

if __name__ == "__main__":  # run from a checkout: use its streamsim
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "vllm_pp.py")


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the worker processes)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--variant", default=None, help="default: the model's first variant")
    ap.add_argument("--strategy", choices=("random", "pct"), default="random")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()

    from streamsim.explore.hunt import explore_schedules
    from streamsim.explore.runs import RunSpec, run_one
    from streamsim.sim.model import load_model
    model = load_model(os.path.relpath(MODEL))
    variant = model.check_variant(args.variant)
    run_one(RunSpec(os.path.abspath(model.path), variant, dict(model.resolve(()))), 0)  # warm-up
    print(f"explore {model.path} --variant {variant} --runs {args.runs} --strategy "
          f"{args.strategy} (cores: {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f})")
    results = {}
    for jobs in args.jobs:
        c0, t0 = _cpu(), time.perf_counter()
        res = explore_schedules(model, variant, runs=args.runs, strategy=args.strategy, jobs=jobs)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        results[jobs] = res.results
        ops = sum(r.ops for r in res.results) / len(res.results)
        print(f"--jobs {jobs}: {args.runs / wall:7.2f} runs/s  ({wall:6.2f} s wall, "
              f"{1000 * cpu / args.runs:5.1f} ms CPU a run, {ops:,.0f} ops a run, "
              f"{len(res.patterns)} hazard patterns)")
    first = next(iter(results.values()))
    assert all(r == first for r in results.values()), "results differ between --jobs values"


if __name__ == "__main__":
    main()
