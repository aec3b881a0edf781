"""Benchmark of many agents: `streamsim check` on N one-line ranks (issue 19, 10,000 ranks).

Each rank issues one kernel (``{"op":"launch","rank":r,"name":"k","writes":["x"]}``): 2N ops and 2N
agents (a host thread and a compute stream per rank), so every cost per agent pair shows. Each size
runs in a fresh process with its address space capped (``--limit-gb``, default 4), so that a table
of agents x agents fails fast with a MemoryError instead of swapping the machine.

    python benchmarks/agents.py [--ranks 10000] [--small 2500] [--limit-gb 4]

Prints, per size and stage (parse, replay, analysis, liveness, metrics, JSON report): seconds, and
the process's peak RSS; then the growth of each stage's time from the small size to the large one
(``--ranks / --small`` when linear). The exit status is 0 when every stage completed.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__":  # run from a checkout: use its streamsim
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

STAGES = ("parse", "replay", "analysis", "liveness", "metrics", "report")


def write_log(path: str, ranks: int) -> None:
    with open(path, "w") as f:
        for r in range(ranks):
            f.write('{"op":"launch","rank":%d,"name":"k","writes":["x"]}\n' % r)


def child(path: str) -> None:
    """Time each stage of `check` on the log at ``path``; print one JSON line (a stage that runs
    out of memory is named, and the stages that do not need its result still run)."""
    from streamsim.analysis.hb import analyse_hazards
    from streamsim.analysis.liveness import deadlock_from_stall, warnings
    from streamsim.analysis.metrics import compute_metrics
    from streamsim.gcpause import gc_paused
    from streamsim.oplog import load_oplog, simulate_oplog
    out: dict = {"seconds": {}}
    state: dict = {}
    steps = {
        "parse": lambda: state.update(log=load_oplog(path)),
        "replay": lambda: state.update(trace=simulate_oplog(state["log"])),
        "analysis": lambda: analyse_hazards(state["trace"]),
        "liveness": lambda: (warnings(state["trace"]), deadlock_from_stall(state["trace"])),
        "metrics": lambda: compute_metrics(state["trace"]),
        "report": lambda: _json_report(path),
    }
    for name in STAGES:
        if name == "report" and "failed" in out:  # (the report runs every stage again)
            break
        t = time.perf_counter()
        try:
            with gc_paused():  # as a pipeline run pauses the collector (its stages leave that to it)
                steps[name]()
        except MemoryError:
            out["failed"] = f"{name}: MemoryError"
            if name in ("parse", "replay"):  # the other stages need what these make
                break
            continue
        out["seconds"][name] = time.perf_counter() - t
    with open("/proc/self/status") as f:  # (VmHWM: ru_maxrss keeps the pre-exec peak)
        out["peak_mb"] = next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024
    print(json.dumps(out))


def _json_report(path: str) -> None:
    """The whole command's JSON report (everything again, end to end, as `check` does)."""
    from streamsim.pipeline import check_oplog
    from streamsim.report.jsonout import dumps_json
    dumps_json(check_oplog(path))


def measure(ranks: int, limit_gb: float, folder: str) -> dict:
    path = os.path.join(folder, f"ranks{ranks}.jsonl")
    write_log(path, ranks)
    limit = int(limit_gb * 2**30)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path],
                          capture_output=True, text=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"seconds": {}, "failed": f"exit {done.returncode}: {done.stderr.strip()[-300:]}",
                "peak_mb": float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=10_000)
    ap.add_argument("--small", type=int, default=2_500)
    ap.add_argument("--limit-gb", type=float, default=4.0)
    ap.add_argument("--child", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        small, large = (measure(n, args.limit_gb, folder) for n in (args.small, args.ranks))
    print(f"check on N one-line ranks (2N ops, 2N agents), address space capped at "
          f"{args.limit_gb:g} GB")
    print(f"{'stage':10} {args.small:>10,} ranks {args.ranks:>10,} ranks   growth "
          f"(linear: {args.ranks / args.small:.1f})")
    for stage in STAGES:
        a, b = small["seconds"].get(stage), large["seconds"].get(stage)
        grow = f"{b / a:7.1f}" if a and b else "      -"
        print(f"{stage:10} {_s(a):>16} {_s(b):>16}  {grow}")
    print(f"{'peak RSS':10} {small['peak_mb']:>13,.0f} MB {large['peak_mb']:>13,.0f} MB")
    failed = [f"{n:,} ranks: {r['failed']}" for n, r in ((args.small, small), (args.ranks, large))
              if "failed" in r]
    for line in failed:
        print("FAILED", line)
    return 1 if failed else 0


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


if __name__ == "__main__":
    sys.exit(main())
