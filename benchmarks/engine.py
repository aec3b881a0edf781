"""Engine throughput benchmark: simulated ops per wall second, peak memory, and growth with size.

Builds a synthetic pipeline-style model (RANKS ranks, each with a compute and a side stream; kernels
with reads/writes; per 36-op iteration two events recorded, one waited by the side stream and one
synchronized by the host an iteration later, as a scheduler reading sampled tokens; p2p
isend/irecv pairs between neighbouring ranks in a ring, the receive waited on the compute stream
and the send waited an iteration later), simulates it at two sizes (N and N/10 ops), and prints:

* ops/s: trace ops / wall seconds of ``Simulation.run()`` (building the trace included), best and
  median of ``--repeat`` runs per size, the sizes interleaved (also CPU time, for a loaded machine);
* peak memory: the growth of the process's peak resident set size (``resource.getrusage``
  ``ru_maxrss``) during the run, measured in a fresh subprocess per size so that one run's peak
  does not hide the other's;
* growth ratio: (wall time per op at N) / (wall time per op at N/10); 1.0 is linear.

Each run is a fresh subprocess. The exit status is 0 when the targets are met by the best runs.

Usage: ``python benchmarks/engine.py [--ops 200000] [--ratio 10] [--repeat 5] [--profile]``.
Targets: >= 100,000 ops/s and a growth ratio <= 1.3.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

if __name__ == "__main__":  # run from a checkout: use its streamsim
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

RANKS = 4
OPS_PER_ITER = 36  # trace ops one rank issues per iteration (host actions + stream ops), see _program


def _program(host, iters: int) -> None:
    """One rank: per iteration 10 kernels, an event record/wait, a side kernel, a ring isend/irecv,
    and a host sync on the previous iteration's end (as a scheduler reading sampled tokens)."""
    rank, n = host.rank, RANKS
    right, left = (rank + 1) % n, (rank - 1) % n
    g = host.group("ring")
    side = host.stream("side")
    ev = host.event("ready")
    step_done = [host.event("step_done0"), host.event("step_done1")]
    bufs = [host.buffer(f"act{i}", 1 << 16) for i in range(4)]
    send_buf, recv_buf = host.buffer("send", 1 << 14), host.buffer("recv", 1 << 14)
    pending = None
    for it in range(iters):
        host.step = it
        for k in range(5):  # 10 ops
            host.launch("layer", reads=[bufs[k % 4]], writes=[bufs[(k + 1) % 4]], dur=20.0)
        ev.record()  # 2 ops
        side.wait_event(ev)  # 2 ops
        host.launch("aux", stream=side, reads=[bufs[1]], writes=[bufs[2][0:1024]], dur=15.0)  # 2
        host.launch("pack", reads=[bufs[0]], writes=[send_buf], dur=5.0)  # 2
        if pending is not None:
            pending.wait()  # 2 ops: the previous send must end before we overwrite its buffer
        if rank % 2 == 0:  # alternate order so that rendezvous-free eager sends never deadlock
            pending = g.isend(send_buf, dst=right)  # 2
            recv = g.irecv(recv_buf, src=left)  # 2
        else:
            recv = g.irecv(recv_buf, src=left)
            pending = g.isend(send_buf, dst=right)
        recv.wait()  # 2
        host.launch("unpack", reads=[recv_buf], writes=[bufs[0]], dur=5.0)  # 2
        host.host_work("schedule", dur=3.0)  # 1
        if it > 0:  # the scheduler reads the previous step's output (async scheduling, one step
            step_done[(it - 1) % 2].synchronize()  # in flight): 1 op; bounds the host's run-ahead
        host.launch("layer", reads=[bufs[0]], writes=[bufs[1]], dur=20.0)  # 2 (-1 on iteration 0)
        host.launch("layer", reads=[bufs[1]], writes=[bufs[2]], dur=20.0)  # 2
        step_done[it % 2].record()  # 2
    if pending is not None:
        pending.wait()
    host.synchronize()


def build(iters: int, seed: int | None = None):
    from streamsim import Simulation
    sim = Simulation(seed=seed, jitter=0.05 if seed is not None else 0.0)
    sim.group("ring", list(range(RANKS)))
    for r in range(RANKS):
        sim.spawn(r, _program, iters)
    return sim


def measure(ops: int) -> dict:
    """Simulate a model of about ``ops`` trace ops in this process; return wall time and memory."""
    iters = max(1, round(ops / (RANKS * OPS_PER_ITER)))
    sim = build(iters)
    from streamsim.gcpause import gc_paused
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c0, t0 = time.process_time(), time.perf_counter()
    with gc_paused():  # as a pipeline run pauses the collector (the engine leaves that to it)
        trace = sim.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert trace.stall is None, trace.stall
    return {"ops": len(trace.ops), "iters": iters, "wall": wall, "cpu": cpu,
            "maxrss_delta_kib": rss1 - rss0, "end_time": trace.end_time}


def measure_in_subprocess(ops: int) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(ops)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def profile(ops: int) -> None:
    import cProfile
    import pstats
    sim = build(max(1, round(ops / (RANKS * OPS_PER_ITER))))
    prof = cProfile.Profile()
    prof.enable()
    sim.run()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200_000, help="trace ops of the large run")
    ap.add_argument("--ratio", type=int, default=10, help="the small run has ops/ratio ops")
    ap.add_argument("--repeat", type=int, default=5, help="runs per size (best and median shown)")
    ap.add_argument("--profile", action="store_true", help="cProfile the large run instead")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child)))
        return 0
    if args.profile:
        profile(args.ops)
        return 0
    sizes = {"large": args.ops, "small": max(1, args.ops // args.ratio)}
    runs: dict[str, list[dict]] = {label: [] for label in sizes}
    for _ in range(args.repeat):  # interleaved, so that both sizes see the same machine load
        for label, ops in sizes.items():
            runs[label].append(measure_in_subprocess(ops))
    per_op: dict[str, dict[str, float]] = {}
    for label, rs in runs.items():
        n = rs[0]["ops"]
        walls = sorted(r["wall"] for r in rs)
        per_op[label] = {"best": walls[0] / n, "median": statistics.median(walls) / n,
                         "cpu": min(r["cpu"] for r in rs) / n}
        rss = max(r["maxrss_delta_kib"] for r in rs)
        print(f"{label:>5}: {n:>9,} ops: {1 / per_op[label]['best']:>9,.0f} ops/s best, "
              f"{1 / per_op[label]['median']:>9,.0f} median (wall, {len(rs)} runs; CPU time: "
              f"{1 / per_op[label]['cpu']:,.0f}); peak RSS growth (ru_maxrss delta in a fresh "
              f"process) {rss / 1024:.1f} MiB = {rss * 1024 / n:.0f} B/op")
    growth = {k: per_op["large"][k] / per_op["small"][k] for k in ("best", "median", "cpu")}
    print(f"growth: time per op at {runs['large'][0]['ops']:,} ops / at {runs['small'][0]['ops']:,} "
          f"ops = {growth['best']:.2f} best, {growth['median']:.2f} median, {growth['cpu']:.2f} CPU "
          "(1.0 = linear)")
    ok = (1 / per_op["large"]["best"] >= 100_000 and growth["best"] <= 1.3
          and runs["large"][0]["ops"] >= 200_000)
    print("targets (>= 100,000 ops/s at >= 200,000 ops, growth <= 1.3; best runs):",
          "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
