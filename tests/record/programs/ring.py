"""A 4-rank ring on gloo: each rank sends its block to the next rank with ``dist.isend`` and
starts an async ``all_reduce`` of its statistics, then (racy) updates both in place before
waiting their handles; ``--fixed`` waits first. Two missing waits: two root causes. Each rank
checks what it got (the block its neighbour had when it sent, the sum of the statistics as they
were): ``rank R: corrupted: N`` counts the steps where the race struck."""
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
fixed = "--fixed" in sys.argv
block, stats, inbox = torch.ones(1 << 20), torch.ones(1 << 18), torch.zeros(1 << 20)
corrupted = 0
for step in range(3):
    block.fill_(float(2 ** step))
    stats.fill_(1.0)
    send = dist.isend(block, (rank + 1) % world)
    recv = dist.irecv(inbox, (rank - 1) % world)
    reduce = dist.all_reduce(stats, async_op=True)
    if fixed:
        send.wait()
        reduce.wait()
    block.mul_(3)  # the next block, computed in place
    stats.div_(world)  # the statistics, normalised in place
    if not fixed:  # (once only: a second wait on a gloo send waits for a send never made)
        send.wait()
        reduce.wait()
    recv.wait()
    want = float(2 ** step)
    corrupted += not bool((inbox == want).all()) or not bool((stats == 1.0).all())
print(f"rank {rank}: corrupted: {corrupted}", flush=True)
dist.destroy_process_group()
