"""Throughput and growth of whole commands: ``check`` on the random program and ``run`` on the vLLM
model, each at two sizes 10x apart.

    python benchmarks/run.py [--check 100000 1000000] [--run 8x48 32x560] [--repeat 3]

* ``check --no-fix-cost`` of the random stream program of ``benchmarks/programs.py`` at 100k and
  1M lines;
* ``run models/vllm_pp.py --variant regressed_49274 --set tp=2`` with ``requests x decode_steps``
  = 8x48 (about 51k trace ops) and 32x560 (about 573k), fixes costed as by default.

Each command runs in a fresh process (``timing.py``), the sizes interleaved, best of ``--repeat``
(median beside it). Time is the time inside ``main()`` (the process less interpreter start-up);
ops/s are op-log lines/s for check and trace ops/s for run (the trace's size is counted by a
separate simulation). Growth = (time per op at the large size) / (time per op at the small one);
target <= 1.2 (issue 18). Prints the figures; exits 0 whatever they are. Where one run's time goes,
stage by stage (the simulation against the analysis after it): ``benchmarks/split.py``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from programs import write_random_program  # noqa: E402
from timing import time_command  # noqa: E402

TARGET_GROWTH = 1.2
MODEL = ["models/vllm_pp.py", "--variant", "regressed_49274", "--set", "tp=2"]


def model_args(size: str) -> list[str]:
    requests, steps = size.split("x")
    return [*MODEL, "--set", f"requests={requests}", "--set", f"decode_steps={steps}"]


def model_ops(size: str) -> int:
    sys.path.insert(0, ROOT)
    from streamsim import simulate
    args = model_args(size)
    sets = [a for prev, a in zip(args, args[1:]) if prev == "--set"]
    return len(simulate(os.path.join(ROOT, MODEL[0]), MODEL[2], sets).ops)


def measure(label: str, cases: list[tuple[str, list[str], int]], repeat: int, unit: str) -> None:
    """cases: (name, streamsim args, ops); prints ops/s per case and the growth."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            for name, args, _ in cases:
                r = time_command(args, os.path.join(tmp, "report"))
                times[name].append(r["main"])
                cpus[name].append(r["cpu"])
    per_op, cpu_per_op = [], []
    for name, args, ops in cases:
        best, med, cpu = min(times[name]), statistics.median(times[name]), min(cpus[name])
        per_op.append(best / ops)
        cpu_per_op.append(cpu / ops)
        print(f"  {label} {name:>12}: {ops:>9,} {unit}, {best:7.2f} s best ({med:.2f} median; "
              f"CPU {cpu:.2f} s), {ops / best:>9,.0f} {unit}/s")
    growth = per_op[-1] / per_op[0]
    print(f"  growth of time per op, large/small: {growth:.2f} (target <= {TARGET_GROWTH}: "
          f"{'met' if growth <= TARGET_GROWTH else 'MISSED'}); of CPU time per op "
          f"{cpu_per_op[-1] / cpu_per_op[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", type=int, nargs=2, default=[100_000, 1_000_000], metavar="LINES")
    ap.add_argument("--run", nargs=2, default=["8x48", "32x560"], metavar="REQUESTSxSTEPS")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"whole commands, best of {args.repeat} interleaved runs, time inside main():")
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for n in args.check:
            log = os.path.join(tmp, f"random{n}.jsonl")
            write_random_program(log, n)
            cases.append((f"{n:,} lines", ["check", log, "--no-fix-cost"], n))
        measure("check --no-fix-cost", cases, args.repeat, "lines")
    cases = [(f"{size} (r x d)", ["run", *model_args(size)], model_ops(size)) for size in args.run]
    measure("run vllm_pp tp=2", cases, args.repeat, "trace ops")


if __name__ == "__main__":
    main()
