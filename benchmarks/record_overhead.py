"""What recording costs: µs of overhead an op, lines an op, bytes a line (issue 25).

    python benchmarks/record_overhead.py [--steps 30] [--repeat 3]

The workload is a small CPU training loop (a 3-layer MLP, forward, backward, SGD step: a few
hundred aten ops a step, the backward ops on the same thread), timed without and with
``streamsim.record`` in interleaved rounds, best of ``--repeat``. Overhead an op = (recorded -
plain) / ops the mode saw; lines an op = lines written / ops seen; bytes a line = the log's size
/ its lines. Also checks that recording leaves the trained parameters unchanged (same seed).
Prints the figures; exits 0 whatever they are (a benchmark, not a test).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

import streamsim


def train(steps: int) -> torch.Tensor:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    plain_best = rec_best = float("inf")
    train(2)  # (warm up)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.jsonl")
        for _ in range(args.repeat):
            t = time.perf_counter()
            plain = train(args.steps)
            plain_best = min(plain_best, time.perf_counter() - t)
            t = time.perf_counter()
            with streamsim.record(path) as rec:
                recorded = train(args.steps)
            rec_best = min(rec_best, time.perf_counter() - t)
        size = os.path.getsize(path)
        lines = sum(1 for line in open(path, "rb") if line.startswith(b"{"))
        report = streamsim.check_oplog(path)
    ops = rec.ops
    print(f"workload: {args.steps} MLP training steps, {ops} ops seen ({ops // args.steps} a step)")
    print(f"plain {plain_best * 1e3:.1f} ms, recorded {rec_best * 1e3:.1f} ms "
          f"({rec_best / plain_best:.1f}x)")
    print(f"overhead: {(rec_best - plain_best) / ops * 1e6:.1f} us/op")
    print(f"log: {lines} lines, {lines / ops:.2f} lines/op, {size / lines:.0f} B/line, "
          f"{size / 1e6:.1f} MB")
    print(f"parameters unchanged by recording: {torch.equal(plain, recorded)}")
    print(f"check: {len(report.findings.hazards)} hazards, "
          f"{'no deadlock' if report.findings.deadlock is None else 'deadlock'}")


if __name__ == "__main__":
    main()
