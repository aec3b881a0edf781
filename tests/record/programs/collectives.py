"""2 ranks on gloo: barrier, reduce, gather and scatter, a blocking receive from any source and an
async one, each waited before its tensors are touched again (clean); then one async ``reduce``
whose tensor is overwritten before its wait (racy: on the destination the reduce's write races
the overwrite, on the other rank its read does). Each rank prints what it got, so the test can
compare the recorded peers and roots with the truth."""
import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
rank = dist.get_rank()
x = torch.full((4,), float(rank + 1))
dist.barrier()
dist.reduce(x, dst=0)  # rank 0: the sum
gathered = [torch.zeros(4) for _ in range(2)] if rank == 0 else None
dist.gather(x, gathered, dst=0)
out = torch.zeros(4)
parts = [torch.full((4,), 10.0 + i) for i in range(2)] if rank == 1 else None
dist.scatter(out, parts, src=1)
y = torch.zeros(4)
if rank == 0:
    source = dist.recv(y)  # from any source
    w = dist.irecv(y)  # from any source, async
    w.wait()
else:
    dist.send(x, 0)
    dist.send(out, 0)
    source = 0
z = torch.full((4,), 1.0)
work = dist.reduce(z, dst=0, async_op=True)
z.fill_(5.0)  # racy: before the wait
work.wait()
print(f"rank {rank}: source {source} out {out[0].item()}", flush=True)
dist.destroy_process_group()
