"""Two libraries on 2 gloo ranks, one start-up: a 2-stage ``torch.distributed.pipelining``
program (ScheduleGPipe then Schedule1F1B, 2 steps of 4 micro-batches each), then 2 steps of a
DistributedDataParallel training loop (its reducer issues its all-reduces from C++ during
backward and waits them in C++, where Python never sees the wait). ``--defer`` injects a bug
and runs GPipe alone: the schedule's receive (and send) waits deferred to the end of the step,
so a stage computes on a buffer still being received."""
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
D = 256


class Stage(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(D, D)

    def forward(self, x):
        return torch.relu(self.layer(x))  # the stage's forward: reads its received input


pending = []
if "--defer" in sys.argv:
    import torch.distributed.pipelining.schedules as schedules

    def deferred_wait(works):
        pending.extend(works)
    schedules._wait_batch_p2p = deferred_wait

x, target = torch.randn(16, D), torch.randn(16, D)
for cls in ((ScheduleGPipe,) if "--defer" in sys.argv else (ScheduleGPipe, Schedule1F1B)):
    stage = PipelineStage(Stage(), rank, world, torch.device("cpu"))
    schedule = cls(stage, n_microbatches=4, loss_fn=lambda out, t: ((out - t) ** 2).mean())
    for step in range(2):
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=target, losses=[])
        for work in pending:  # (the deferred waits, too late)
            work.wait()
        pending.clear()

if "--defer" not in sys.argv:
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 64), torch.randn(16, 8)
    for step in range(2):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
dist.destroy_process_group()
