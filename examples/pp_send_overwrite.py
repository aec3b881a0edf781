"""A 2-rank pipeline-parallel step shaped like vLLM's regression (PR #49274), on CPU with gloo.

Rank 0 (the first stage) computes its hidden state in place into one buffer and sends it to
rank 1 with ``dist.isend``, keeping the handle; vLLM's refactor dropped the ``wait()`` on the
previous step's handles, so the next step's forward rewrites the buffer while gloo may still be
sending it. Rank 1 receives each step and checks what it got: with a large tensor the race
strikes most steps (``rank1: corrupted steps: ...``). ``--fixed`` waits the previous step's send
before the next forward, as vLLM's fix does.

Run it checked by streamsim (2 commands)::

    streamsim record -o run.jsonl -- torchrun --nproc-per-node 2 examples/pp_send_overwrite.py
    streamsim check run.jsonl

or plainly: ``torchrun --nproc-per-node 2 examples/pp_send_overwrite.py [--fixed]``.
"""
from __future__ import annotations

import argparse

import torch
import torch.distributed as dist


def forward(hidden: torch.Tensor, step: int) -> None:
    """The first stage's forward pass: writes the whole hidden state in place."""
    hidden.fill_(float(step))
    hidden.add_(1.0)


def first_stage(hidden: torch.Tensor, steps: int, fixed: bool) -> None:
    pending: list = []  # the sends of the previous step
    for step in range(steps):
        if fixed:
            for work in pending:
                work.wait()
            pending.clear()
        forward(hidden, step)
        pending.append(dist.isend(hidden, dst=1))
    for work in pending:  # (the racy version waits too, only too late: a dropped gloo handle
        work.wait()       # would hang the sender)


def second_stage(received: torch.Tensor, steps: int) -> list[int]:
    corrupted = []
    for step in range(steps):
        dist.recv(received, src=0)
        if not bool((received == step + 1.0).all()):
            corrupted.append(step)
            print(f"rank1: step {step} expected {step + 1.0:g} everywhere, got {seen(received)}")
    return corrupted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixed", action="store_true", help="wait the previous send first")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--mib", type=int, default=16, help="size of the hidden state (MiB)")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    n = (args.mib << 20) // 4
    if dist.get_rank() == 0:
        first_stage(torch.empty(n), args.steps, args.fixed)
    else:
        corrupted = second_stage(torch.empty(n), args.steps)
        print(f"rank1: corrupted steps: {corrupted} of {args.steps}", flush=True)
    dist.destroy_process_group()


def seen(received: torch.Tensor) -> str:
    """What a received buffer holds: each value and its share of the elements."""
    values, counts = torch.unique(received, return_counts=True)
    return ", ".join(f"{v:g} in {c / received.numel():.1%}"
                     for v, c in zip(values.tolist(), counts.tolist()))


if __name__ == "__main__":
    main()
