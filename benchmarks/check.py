"""Benchmark of `streamsim check`: parse, replay and analyse a synthetic op log, at two sizes.

The op log: one rank, one host thread launching kernels round-robin on 8 streams over 1,000 buffers,
an event record + wait every 10 ops (see :func:`write_oplog`). Each size runs in a fresh process so
that its peak RSS is its own.

    python benchmarks/check.py [--ops 500000] [--small 50000]

Prints, per size: ops, seconds and ops/s for parsing (JSON Lines -> checked lines), replay (the
engine) and analysis (vector clocks + FastTrack; best of ``--repeat`` runs on the same trace, median
beside it), peak RSS; then the growth ratio of the analysis time per op (large / small; 1.0 is
perfectly linear), the *read floor* (the time merely to read the trace's fields once: what any
analysis of this trace representation pays first) and the verdict on issue 3's target, in op-log
ops (lines) as the issue counts them.
The exit status is 0 when the target is met by the best runs.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def write_oplog(path: str, n_ops: int, streams: int = 8, buffers: int = 1000, seed: int = 0) -> int:
    """Write the synthetic op log; return the number of op lines.

    Buffer b belongs to stream b % streams; a kernel reads and writes its own stream's buffers.
    Every 10th op records an event on one stream, the next stream waits it, and then reads a buffer
    of the first one: ordered, unless the first stream rewrites it later (a few real hazards).
    """
    rnd = random.Random(seed)
    per = buffers // streams
    lines = 0
    with open(path, "w") as f:
        for i in range(n_ops):
            k = i % streams
            if i % 10 == 9:
                ev = f"e{i // 10 % 64}"
                nxt = (k + 1) % streams
                f.write(json.dumps({"op": "record", "stream": f"s{k}", "event": ev}) + "\n")
                f.write(json.dumps({"op": "wait_event", "stream": f"s{nxt}", "event": ev}) + "\n")
                f.write(json.dumps({"op": "launch", "stream": f"s{nxt}", "name": "consume",
                                    "reads": [f"b{k + streams * rnd.randrange(per)}"],
                                    "writes": [f"b{nxt + streams * rnd.randrange(per)}"],
                                    "dur": 2.0}) + "\n")
                lines += 3
                continue
            r, w = (k + streams * rnd.randrange(per) for _ in range(2))
            f.write(json.dumps({"op": "launch", "stream": f"s{k}", "name": "k",
                                "reads": [f"b{r}"], "writes": [f"b{w}"],
                                "dur": round(rnd.uniform(1.0, 5.0), 3)}) + "\n")
            lines += 1
    return lines


TARGET_LINES_PER_S = 300_000  # issue 3: analysis of at least 300,000 op-log ops/s, linear growth
TARGET_GROWTH = 1.3


def read_floor(trace) -> float:
    """Seconds to read, once, what any analysis needs of each op (agent, program index, sequence
    positions, issuer) and of each access (view, mode) into plain lists: the least a columnar or
    compiled pass must pay before it computes anything, on this trace of Python objects."""
    t0 = time.perf_counter()
    n = len(trace.ops)
    dense = {id(ag): i for i, ag in enumerate(trace.agents)}
    agent, index, start, end, issuer = [0] * n, [0] * n, [0] * n, [0] * n, [-1] * n
    acc_op, acc_view, acc_write = [], [], []
    view_row: dict[int, int] = {}
    for op in trace.ops:
        o = op.id
        agent[o] = dense[id(op.agent)]
        index[o], start[o], end[o] = op.index, op.start_seq, op.end_seq
        if op.issuer is not None:
            issuer[o] = op.issuer
        for acc in op.accesses:
            v = id(acc.view)
            row = view_row.get(v)
            if row is None:
                row = view_row[v] = len(view_row)
            acc_op.append(o)
            acc_view.append(row)
            acc_write.append(acc.mode == "write")
    return time.perf_counter() - t0


def measure(n_ops: int, repeat: int) -> dict:
    """Run one size in this process and return its figures."""
    from streamsim.analysis.hb import analyse_hazards
    from streamsim.oplog import load_oplog, simulate_oplog

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.jsonl")
        lines = write_oplog(path, n_ops)
        t0 = time.perf_counter()
        log = load_oplog(path)
        t1 = time.perf_counter()
        trace = simulate_oplog(log)
        t2 = time.perf_counter()
        runs, counts = [], set()
        for _ in range(repeat):  # the same trace each time: the pass keeps no state between runs
            t3 = time.perf_counter()
            hazards = analyse_hazards(trace, fixes=False)
            runs.append(time.perf_counter() - t3)
            counts.add(len(hazards))
            del hazards
        assert len(counts) == 1, counts  # (deterministic: every run finds the same hazards)
        floor = min(read_floor(trace) for _ in range(repeat))
    return {"read_floor_s": floor,
            "lines": lines, "trace_ops": len(trace.ops), "hazards": counts.pop(),
            "parse_s": t1 - t0, "replay_s": t2 - t1, "analyse_s": min(runs),
            "analyse_median_s": statistics.median(runs),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=500_000,
                    help="kernels at the large size (every 10th also records and waits an event: "
                         "1.2 op-log lines per kernel)")
    ap.add_argument("--small", type=int, default=None, help="kernels at the small size (default: ops/10)")
    ap.add_argument("--repeat", type=int, default=3, help="analysis runs per size (best and median)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child: measure one size, print JSON
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.repeat)))
        return
    sizes = [args.small or args.ops // 10, args.ops]
    results = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--repeat", str(args.repeat)],
                             check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out))
    print("parse: op-log lines/s; replay and analysis: trace ops/s (a launch line is two trace ops,")
    print("its host action and its stream op); after parsing: op-log lines/s of replay + analysis")
    print(f"analysis: best of {args.repeat} runs (median in brackets), in trace ops/s and op-log "
          "lines/s")
    print(f"{'lines':>9} {'trace ops':>10} {'parse':>9} {'replay':>9} {'analysis':>19} "
          f"{'lines/s':>9} {'analysis s':>10} {'after parsing':>13} {'peak RSS MB':>12} "
          f"{'hazards':>8}")
    for r in results:
        n = r["trace_ops"]
        print(f"{r['lines']:>9,} {n:>10,} {r['lines'] / r['parse_s']:>9,.0f} "
              f"{n / r['replay_s']:>9,.0f} {n / r['analyse_s']:>9,.0f} "
              f"({n / r['analyse_median_s']:>7,.0f}) {r['lines'] / r['analyse_s']:>9,.0f} "
              f"{r['analyse_s']:>10.2f} {r['lines'] / (r['replay_s'] + r['analyse_s']):>13,.0f} "
              f"{r['peak_rss_mb']:>12,.0f} {r['hazards']:>8,}")
    small, large = results
    growth = (large["analyse_s"] / large["trace_ops"]) / (small["analyse_s"] / small["trace_ops"])
    median_growth = ((large["analyse_median_s"] / large["trace_ops"])
                     / (small["analyse_median_s"] / small["trace_ops"]))
    replay = (large["replay_s"] / large["trace_ops"]) / (small["replay_s"] / small["trace_ops"])
    print(f"growth of time per op, large/small: analysis {growth:.2f}x best, {median_growth:.2f}x "
          f"median; replay {replay:.2f}x (1.00 = linear)")
    floor = large["read_floor_s"]
    print(f"read floor at the large size: {floor:.2f} s to read each op's and access's fields once "
          f"into lists ({large['lines'] / floor:,.0f} op-log lines/s): no pass over this trace of "
          "Python objects, columnar or compiled, can be faster")
    rate = large["lines"] / large["analyse_s"]
    ok = rate >= TARGET_LINES_PER_S and growth <= TARGET_GROWTH
    print(f"target (analysis >= {TARGET_LINES_PER_S:,} op-log ops/s at the large size, growth <= "
          f"{TARGET_GROWTH}; best runs): {'met' if ok else 'MISSED'} ({rate:,.0f} op-log ops/s, "
          f"{growth:.2f}x)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
