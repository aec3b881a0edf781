"""PyTorch pipelining: ScheduleInterleaved1F1B's receives and sends queued on one NCCL stream.

Mirrors `torch/distributed/pipelining/schedules.py` (pytorch/pytorch): the schedule
(`ScheduleInterleaved1F1B._calculate_single_rank_operations`, `_get_warmup_ops`,
`_get_1f1b_rank_ops`), its lowering (`_PipelineScheduleRuntime._prepare_schedule_with_comms`: the
`None` padding dropped as `_add_unshard_reshard` and `_add_reduce_grad` do, then `_add_send_recv`)
and the runtime (`_PipelineScheduleRuntime._step_microbatches`, `_perform_action`, `_batch_p2p`,
`_wait_batch_p2p`). Every SEND/RECV is a `dist.batch_isend_irecv` of one op, and
`ProcessGroupNCCL::pointToPoint` runs a batched op on the group's own communicator and stream
(`getKeyFromDevice`), so all of a rank's sends and receives queue on one NCCL stream, where a
posted receive holds the stream until its data arrives.

`_add_send_recv` appends a receive to the *receiver's* list when the *sender's* compute is lowered,
so rank 0 posts `RECV_F` of stage pp for microbatch m right after it sends stage 0's microbatch m:
its next send queues behind a receive that completes only after the microbatch went round every
rank. PR #165664 ("Update _add_send_recv", closed unmerged) describes the cascade and moves the
warm-up receives after the forwards.

Variants:

* ``shared_stream``: the lowering and the stream of today: one PP group, batched p2p on its stream;
* ``recv_after_forwards_165664``: PR #165664's IR, as its description shows it for rank 0: the
  receives the lowering put among a rank's warm-up forwards move after them, just before the first
  forward that consumes one;
* ``deferred_recv``: every receive is posted just before the compute action that consumes it (the
  idea of issue #172668 and PR #178815, without the rank-parity rule #178815 adds to avoid
  deadlocks, whose code the model does not have);
* ``per_pair_streams``: the lowering of today, with unbatched `isend`/`irecv` on a lazily
  initialised group: ProcessGroupNCCL gives each pair of ranks its own 2-rank communicator and
  stream (`getKeySendRecv`, "low:high"), as issue #175225 proposes.

This is a performance bug, not a data race: no variant has a data hazard; the cost is in step
latency and bubble. With rendezvous-sized activations (above NCCL's 4 MiB buffer, so a send holds
its stream until the receive runs), moving receives later on one shared stream closes a wait-for
cycle of sends around the ranks: the two reordering variants deadlock there (see the note,
docs/models/torch_pp_shared_stream.md).

Simplifications: no FSDP (UNSHARD/RESHARD are no-ops and left out), no REDUCE_GRAD, a stage's
forward and backward take fixed times, the loss is part of the last stage's forward.
"""
from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from streamsim import ModelError, P2POp, Param

MiB = 1 << 20

PARAMS = [
    Param("pp", int, 4, "pipeline ranks (pp_group_size)"),
    Param("stages_per_rank", int, 2, "local stages per rank (n_local_stages): stage s on rank s % pp"),
    Param("microbatches", int, 8, "n_microbatches (a multiple of pp)"),
    Param("forward_us", float, 1000.0, "one stage's forward of one microbatch"),
    Param("backward_us", float, 2000.0, "one stage's full backward of one microbatch"),
    Param("activation_mb", float, 8.0, "activation (and gradient) size per microbatch, MiB "
          "(1 x 2048 x 2048 bf16)"),
    Param("nccl_gb_per_s", float, 50.0, "p2p bandwidth between ranks (GB/s)"),
    Param("nccl_latency_us", float, 15.0, "p2p latency"),
    Param("nccl_eager_bytes", int, 4 * MiB, "a send up to this size completes without its receive "
          "(NCCL_BUFFSIZE, 4 MiB); a larger one holds its stream until the receive runs"),
    Param("steps", int, 1, "training steps (schedule.step calls)"),
]

VARIANTS = {
    "shared_stream": "today: one PP group; every batched send and receive on its one NCCL stream",
    "recv_after_forwards_165664": "PR #165664: warm-up receives moved after the warm-up forwards",
    "deferred_recv": "every receive posted just before the action that consumes it",
    "per_pair_streams": "unbatched isend/irecv on a lazy group: one stream per pair of ranks",
}

BASELINE = "shared_stream"

# =============================================================================================
# The schedule IR (schedules.py)
# =============================================================================================
class _Action(NamedTuple):
    stage_index: int
    computation_type: str  # F, B, SEND_F, RECV_F, SEND_B, RECV_B
    microbatch_index: int

    def __repr__(self) -> str:
        return f"{self.stage_index}{self.computation_type}{self.microbatch_index}"


F, B = "F", "B"
SEND_F, RECV_F, SEND_B, RECV_B = "SEND_F", "RECV_F", "SEND_B", "RECV_B"


def _get_warmup_ops(rank, n_local_stages, microbatches_per_round, pp_group_size, n_microbatches,
                    multiply_factor=2):
    warmups_ops_last_stage = (n_local_stages - 1) * microbatches_per_round
    warmup_ops = warmups_ops_last_stage + multiply_factor * ((pp_group_size - 1) - rank)
    return min(warmup_ops, n_microbatches * n_local_stages)


def _get_1f1b_rank_ops(n_local_stages, pp_group_size, warmup_ops, fwd_bwd_ops, cooldown_ops, rank,
                       forward_stage_index, backward_stage_index):
    fwd_stage_mb_index: dict[int, int] = defaultdict(int)
    bwd_stage_mb_index: dict[int, int] = defaultdict(int)
    rank_ops: list = [None for _ in range(rank)]
    post_warmup_ops = (n_local_stages * pp_group_size + 2 * (pp_group_size - 1 - rank)) - (
        warmup_ops + rank)
    total_ops = warmup_ops + fwd_bwd_ops + cooldown_ops
    for op in range(total_ops):
        if op < warmup_ops:
            fwd_stage_index = forward_stage_index(op)
            fwd_stage_mb_index[fwd_stage_index] = (mb_index := fwd_stage_mb_index[fwd_stage_index]) + 1
            rank_ops.append(_Action(fwd_stage_index, F, mb_index))
            if op == warmup_ops - 1:
                rank_ops.extend([None] * post_warmup_ops)
        elif warmup_ops <= op < warmup_ops + fwd_bwd_ops:
            fwd_stage_index = forward_stage_index(op)
            fwd_stage_mb_index[fwd_stage_index] = (fwd_mb := fwd_stage_mb_index[fwd_stage_index]) + 1
            rank_ops.append(_Action(fwd_stage_index, F, fwd_mb))
            bwd_stage_index = backward_stage_index(op)
            bwd_stage_mb_index[bwd_stage_index] = (bwd_mb := bwd_stage_mb_index[bwd_stage_index]) + 1
            rank_ops.append(_Action(bwd_stage_index, B, bwd_mb))
        else:
            rank_ops.append(None)
            bwd_stage_index = backward_stage_index(op)
            bwd_stage_mb_index[bwd_stage_index] = (bwd_mb := bwd_stage_mb_index[bwd_stage_index]) + 1
            rank_ops.append(_Action(bwd_stage_index, B, bwd_mb))
    return rank_ops


def interleaved_1f1b_rank_ops(rank: int, p) -> list:
    """ScheduleInterleaved1F1B._calculate_single_rank_operations."""
    n_local_stages, pp_group_size = p.stages_per_rank, p.pp
    number_of_rounds = max(1, p.microbatches // pp_group_size)
    microbatches_per_round = p.microbatches // number_of_rounds
    warmup_ops = _get_warmup_ops(rank, n_local_stages, microbatches_per_round, pp_group_size,
                                 p.microbatches, multiply_factor=2)
    microbatch_ops = n_local_stages * p.microbatches
    fwd_bwd_ops = microbatch_ops - warmup_ops
    cooldown_ops = microbatch_ops - fwd_bwd_ops

    def forward_stage_index(step):
        local_index = (step // microbatches_per_round) % n_local_stages
        return (local_index * pp_group_size) + rank

    def backward_stage_index(step):
        local_index = (n_local_stages - 1
                       - ((step - warmup_ops) // microbatches_per_round) % n_local_stages)
        return (local_index * pp_group_size) + rank

    return _get_1f1b_rank_ops(n_local_stages, pp_group_size, warmup_ops, fwd_bwd_ops,
                              cooldown_ops, rank, forward_stage_index, backward_stage_index)


def _add_send_recv(compute_actions: dict[int, list], stage_to_rank, num_stages: int):
    comm_actions: dict[int, list] = {rank: [] for rank in compute_actions}
    prev_actions: dict[int, set] = {rank: set() for rank in compute_actions}

    def _has_comms(action):
        if action.computation_type == F:
            return (action.stage_index != num_stages - 1
                    and stage_to_rank(action.stage_index + 1) != stage_to_rank(action.stage_index))
        if action.computation_type == B:
            return (action.stage_index != 0
                    and stage_to_rank(action.stage_index - 1) != stage_to_rank(action.stage_index))
        return False

    def _get_comms(action):
        stage_idx, ctype, mb_idx = action
        send = _Action(stage_idx, SEND_F if ctype == F else SEND_B, mb_idx)
        recv_stage_idx = stage_idx + 1 if ctype == F else stage_idx - 1
        recv = _Action(recv_stage_idx, RECV_F if ctype == F else RECV_B, mb_idx)
        return send, recv

    def _ready_to_schedule(action, prev):
        if action is None:
            return True
        if action.computation_type == F and action.stage_index != 0:
            return (_Action(action.stage_index, RECV_F, action.microbatch_index) in prev
                    or _Action(action.stage_index - 1, F, action.microbatch_index) in prev)
        if action.computation_type == B and action.stage_index != num_stages - 1:
            return (_Action(action.stage_index, RECV_B, action.microbatch_index) in prev
                    or _Action(action.stage_index + 1, B, action.microbatch_index) in prev)
        return True

    while compute_actions:
        progress = False
        for rank in sorted(compute_actions):
            action = compute_actions[rank][0]
            if not _ready_to_schedule(action, prev_actions[rank]):
                continue
            if action is not None:
                comm_actions[rank].append(action)
                prev_actions[rank].add(action)
                if _has_comms(action):
                    send, recv = _get_comms(action)
                    comm_actions[rank].append(send)
                    prev_actions[rank].add(send)
                    comm_actions[stage_to_rank(recv.stage_index)].append(recv)
                    prev_actions[stage_to_rank(recv.stage_index)].add(recv)
            compute_actions[rank].pop(0)
            if len(compute_actions[rank]) == 0:
                del compute_actions[rank]
            progress = True
        if not progress:
            raise ModelError("Malformed compute schedule, can't schedule sends/recvs")
    return comm_actions


def pipeline_order_with_comms(p) -> dict[int, list[_Action]]:
    """_prepare_schedule_with_comms: the compute schedule, None padding dropped, then comms."""
    actions = {rank: [a for a in interleaved_1f1b_rank_ops(rank, p) if a is not None]
               for rank in range(p.pp)}
    return _add_send_recv(actions, lambda s: s % p.pp, p.pp * p.stages_per_rank)


def recv_after_forwards(order: list[_Action]) -> list[_Action]:
    """PR #165664's IR: receives posted among the warm-up forwards (before the first action that
    consumes a received input) move, in order, to just before that action."""
    consumer = next(i for i, a in enumerate(order) if _needs_recv(a, order))
    early = [a for a in order[:consumer] if a.computation_type in (RECV_F, RECV_B)]
    rest = [a for a in order[:consumer] if a.computation_type not in (RECV_F, RECV_B)]
    return rest + early + order[consumer:]


def deferred_recv(order: list[_Action]) -> list[_Action]:
    """Each receive posted just before the compute action that consumes it."""
    recvs = {(a.stage_index, a.computation_type, a.microbatch_index): a for a in order
             if a.computation_type in (RECV_F, RECV_B)}
    out = []
    for a in order:
        if a.computation_type in (RECV_F, RECV_B):
            continue
        key = (a.stage_index, RECV_F if a.computation_type == F else RECV_B, a.microbatch_index)
        if a.computation_type in (F, B) and key in recvs:
            out.append(recvs.pop(key))
        out.append(a)
    assert not recvs, recvs
    return out


def _needs_recv(action: _Action, order: list[_Action]) -> bool:
    want = RECV_F if action.computation_type == F else RECV_B
    return (action.computation_type in (F, B)
            and _Action(action.stage_index, want, action.microbatch_index) in order)


# =============================================================================================
# The runtime (_PipelineScheduleRuntime._step_microbatches)
# =============================================================================================
class PipelineStage:
    """One stage's buffers on its rank: inputs, outputs and gradients per microbatch."""

    def __init__(self, host, p, stage_index: int):
        self.stage_index, self.p = stage_index, p
        self.num_stages = p.pp * p.stages_per_rank
        self.is_first, self.is_last = stage_index == 0, stage_index == self.num_stages - 1
        nbytes = int(p.activation_mb * MiB)
        mbs = range(p.microbatches)
        self.fwd_input = [host.buffer(f"stage{stage_index}.input[{m}]", nbytes) for m in mbs]
        self.fwd_output = [host.buffer(f"stage{stage_index}.output[{m}]", nbytes) for m in mbs]
        self.bwd_input = [host.buffer(f"stage{stage_index}.grad_output[{m}]", nbytes) for m in mbs]
        self.bwd_output = [host.buffer(f"stage{stage_index}.grad_input[{m}]", nbytes) for m in mbs]

    def peer(self, delta: int) -> int:
        return (self.stage_index + delta) % self.p.pp


class PipelineRuntime:
    def __init__(self, host, p, variant: str, order: list[_Action]):
        self.host, self.p, self.variant, self.order = host, p, variant, order
        self.pp_group = host.group("pp")
        self.stages = {s: PipelineStage(host, p, s)
                       for s in range(host.rank, p.pp * p.stages_per_rank, p.pp)}
        self.fwd_recv_ops: dict = {}
        self.bwd_recv_ops: dict = {}

    def _p2p(self, kind: str, buf, peer: int, name: str):
        """_batch_p2p: dist.batch_isend_irecv of one P2POp (the group's own stream); in the
        per_pair_streams variant an unbatched isend/irecv (the pair's stream)."""
        g = self.pp_group
        if self.variant == "per_pair_streams":
            if kind == "isend":
                return [g.isend(buf, dst=peer, name=name)]
            return [g.irecv(buf, src=peer, name=name)]
        return g.batch_isend_irecv([P2POp(kind, buf, peer, name=name)])

    def _step_microbatches(self):
        host = self.host
        send_ops: list = []
        for action in self.order:
            stage_idx, comp_type, mb = action
            stage = self.stages[stage_idx]
            if comp_type == SEND_F:
                send_ops.append(self._p2p("isend", stage.fwd_output[mb], stage.peer(+1),
                                          f"SEND_F {stage_idx}:{mb}"))
            elif comp_type == SEND_B:
                send_ops.append(self._p2p("isend", stage.bwd_output[mb], stage.peer(-1),
                                          f"SEND_B {stage_idx}:{mb}"))
            elif comp_type == RECV_F:
                self.fwd_recv_ops[(stage_idx, mb)] = self._p2p(
                    "irecv", stage.fwd_input[mb], stage.peer(-1), f"RECV_F {stage_idx}:{mb}")
            elif comp_type == RECV_B:
                self.bwd_recv_ops[(stage_idx, mb)] = self._p2p(
                    "irecv", stage.bwd_input[mb], stage.peer(+1), f"RECV_B {stage_idx}:{mb}")
            elif comp_type == F:
                if not stage.is_first:
                    for work in self.fwd_recv_ops.pop((stage_idx, mb)):  # _wait_batch_p2p
                        work.wait()
                host.launch(f"F {stage_idx}:{mb}", reads=[stage.fwd_input[mb]],
                            writes=[stage.fwd_output[mb]], dur=self.p.forward_us)
            elif comp_type == B:
                if not stage.is_last:
                    for work in self.bwd_recv_ops.pop((stage_idx, mb)):
                        work.wait()
                host.launch(f"B {stage_idx}:{mb}", reads=[stage.bwd_input[mb],
                                                          stage.fwd_output[mb]],
                            writes=[stage.bwd_output[mb]], dur=self.p.backward_us)
        # send ops should be waited on before step() exits, mainly for hygiene
        while send_ops:
            for work in send_ops.pop():
                work.wait()


def rank_main(host, p, variant: str, order: list[_Action]) -> None:
    runtime = PipelineRuntime(host, p, variant, order)
    for step in range(p.steps):
        host.step = step
        runtime._step_microbatches()
    host.synchronize()


def build(sim, p, variant: str) -> None:
    _check(p)
    lowered = pipeline_order_with_comms(p)
    if variant == "recv_after_forwards_165664":
        lowered = {r: recv_after_forwards(o) for r, o in lowered.items()}
    elif variant == "deferred_recv":
        lowered = {r: deferred_recv(o) for r, o in lowered.items()}
    sim.group("pp", list(range(p.pp)), "nccl", latency=p.nccl_latency_us,
              bandwidth=p.nccl_gb_per_s * 1e3, eager_bytes=p.nccl_eager_bytes,
              p2p_streams="per_pair" if variant == "per_pair_streams" else "per_group")
    for rank in range(p.pp):
        sim.spawn(rank, rank_main, p, variant, lowered[rank])


def _check(p) -> None:
    def need(ok: bool, text: str) -> None:
        if not ok:
            raise ModelError(f"--set {text}")
    need(p.pp >= 2, f"pp={p.pp}: a pipeline needs >= 2 ranks")
    need(p.stages_per_rank >= 1, f"stages_per_rank={p.stages_per_rank}: must be >= 1")
    need(p.microbatches >= p.pp and p.microbatches % p.pp == 0,
         f"microbatches={p.microbatches}: must be a positive multiple of pp={p.pp}")
    need(p.steps >= 1, f"steps={p.steps}: must be >= 1")
    need(p.activation_mb > 0 and p.nccl_gb_per_s > 0, "activation_mb and nccl_gb_per_s must be > 0")
    for name in ("forward_us", "backward_us", "nccl_latency_us"):
        need(p[name] >= 0, f"{name}={p[name]}: must be >= 0")
