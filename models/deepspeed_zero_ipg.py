"""DeepSpeed ZeRO stage 1/2: the double-buffered gradient bucket, before and after PR #7805.

Mirrors `deepspeed/runtime/zero/stage_1_and_2.py` (deepspeedai/DeepSpeed), class
`DeepSpeedZeroOptimizer` and dataclass `IPGBucket`, with `overlap_comm=True`,
`contiguous_gradients=True`, `reduce_scatter=True` and `use_multi_rank_bucket_allreduce=True` (the
ZeRO-2 configs that shipped with `"overlap_comm": true`). Functions, with the upstream names:

* `setup_buckets` (`backward_prologue` before PR #7665): two fresh IPG buffers per micro-step, the
  second "to avoid data access conflict when overlap_comm is enabled";
* `reduce_independent_p_g_buckets_and_remove_grads` (the gradient hook): when the bucket is full,
  `reduce_ipg_grads()` then swap `bucket.index`; copy the gradient into `bucket.buffer[bucket.index]`;
* `reduce_ipg_grads`: `average_tensor` on the bucket's slot, then on the reduction stream
  `copy_grads_in_partition` per owned parameter, then `bucket.clear()`;
* `average_tensor`: the stream waits, then on `reduction_stream` `tensor.div_`, and
  `allreduce_and_scatter` -> `allreduce_and_copy_with_multiple_ranks` -> `allreduce_bucket`
  (`self.flatten` + `dist.all_reduce`) and `buf.copy_(synced)` for the slices this rank owns;
* `independent_gradient_partition_epilogue`: the last bucket, `get_accelerator().synchronize()`,
  `_release_ipg_buffers`.

Variants (the commits are in the DeepSpeed history):

* ``pre_5606``: `average_tensor` with the one-way wait of PR #2500 (the reduction stream waits the
  compute stream) and a working ping-pong;
* ``regressed_6993``: PR #6993 moved the index into `IPGBucket`, whose `clear()` sets `index = 0`;
  `reduce_ipg_grads` ends with `bucket.clear()`, so the swap that follows always gives 1: every
  bucket after the first fills `buffer[1]` while the previous bucket's reduce still reads it;
* ``overfix_7371``: PR #7371 kept the reset and added, after every `reduce_ipg_grads`, the pair
  `reduction_stream.wait_stream(current)`, `current.wait_stream(reduction_stream)`: the compute
  stream waits for the whole reduce it just enqueued (a device-side wait, not a host
  `synchronize()`), so no backward work overlaps any reduce;
* ``fixed_7805``: PR #7805 drops `self.index = 0` from `clear()` and #7371's waits;
* ``record_stream_only``: the regressed code plus PR #7965's `record_stream(reduction_stream)` on
  the all-reduce result and the copied-back slices: the fix a reviewer might reach for. It orders
  frees, and nothing here is freed while the reduce runs: the overwrite stays.

Simplifications: every parameter has the same size and lives wholly in one rank's partition (the
partition is the flat parameter group cut in `world_size` equal parts); one comm dtype (no
autocast buckets); `grads_in_partition` is one persistent buffer (upstream re-creates it each
micro-step; its lifetime is not the subject); the optimizer step is one kernel, its all-gather of
updated parameters is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from streamsim import ModelError, Param

PARAMS = [
    Param("world_size", int, 2, "data-parallel ranks (the dp process group)"),
    Param("params", int, 16, "parameters with a gradient, all the same size, in backward order "
          "last to first"),
    Param("param_numel", int, 12_500_000, "elements per parameter (12.5 M: 25 MB in bf16)"),
    Param("reduce_bucket_size", int, 50_000_000, "elements per IPG bucket (reduce_bucket_size; "
          "4 parameters fit at the defaults)"),
    Param("dtype_bytes", int, 2, "bytes per element of the gradients and buckets (bf16)"),
    Param("steps", int, 2, "training steps (one micro-step each: gradient_accumulation_steps=1)"),
    Param("backward_us", float, 700.0, "backward compute per parameter (one bucket of backward "
          "outlasts one reduce at the defaults)"),
    Param("hbm_gb_per_s", float, 1500.0, "device memory bandwidth of the copy, div_ and flatten "
          "kernels (GB/s; a kernel moves its bytes read plus written)"),
    Param("nccl_gb_per_s", float, 50.0, "all-reduce bus bandwidth of the dp group (GB/s)"),
    Param("nccl_latency_us", float, 15.0, "all-reduce latency"),
    Param("optimizer_us", float, 1000.0, "optimizer step on this rank's partition"),
]

VARIANTS = {
    "pre_5606": "PR #2500's one-way wait in average_tensor (reduction waits compute); the "
                "ping-pong works",
    "regressed_6993": "PR #6993: IPGBucket.clear() resets index to 0, so every bucket after the "
                      "first fills buffer[1]",
    "overfix_7371": "PR #7371: the reset stays; a two-way wait_stream after every "
                    "reduce_ipg_grads makes compute wait for each whole reduce",
    "fixed_7805": "PR #7805: clear() keeps the index, #7371's waits removed",
    "record_stream_only": "the regressed code plus PR #7965's record_stream(reduction_stream) "
                          "on the reduced buffers",
}

BASELINE = "regressed_6993"  # compare's cost column: what each fix costs against the racy code


@dataclass
class IPGBucket:
    buffer: list = field(default_factory=list)
    params: list = field(default_factory=list)
    elements: int = 0
    index: int = 0
    reset_index: bool = False  # PR #6993 .. #7805: `self.index = 0` in clear()

    def clear(self):
        self.params.clear()
        self.elements = 0
        if self.reset_index:
            self.index = 0


class DeepSpeedZeroOptimizer:
    """One rank's optimizer: the IPG bucket path of ZeRO 1/2 with overlap_comm."""

    def __init__(self, host, p, variant: str):
        self.host, self.p, self.variant = host, p, variant
        self.reduction_stream = host.stream("reduction_stream")
        self.compute = host.current_stream()
        self.dp_process_group = host.group("dp")
        self.reduce_bucket_size = p.reduce_bucket_size
        self.bucket = IPGBucket(reset_index=variant in ("regressed_6993", "overfix_7371",
                                                        "record_stream_only"))
        self.partition_id = self.dp_process_group.rank_in_group
        per_rank = p.params // p.world_size
        self.is_param_in_current_partition = [i // per_rank == self.partition_id
                                              for i in range(p.params)]
        self.grads_in_partition = host.buffer("grads_in_partition", per_rank * self.param_bytes,
                                              self.reduction_stream)
        self.grads_in_partition_offset = 0

    # -- costs ----------------------------------------------------------------------------------
    @property
    def param_bytes(self) -> int:
        return self.p.param_numel * self.p.dtype_bytes

    def hbm_us(self, nbytes: int) -> float:
        """A memory-bound kernel that reads and writes ``nbytes`` each."""
        return 2 * nbytes / (self.p.hbm_gb_per_s * 1e3)

    def allreduce_us(self, nbytes: int) -> float:
        n = self.p.world_size
        return self.p.nccl_latency_us + 2 * (n - 1) / n * nbytes / (self.p.nccl_gb_per_s * 1e3)

    # -- setup_buckets (backward_prologue) -------------------------------------------------------
    def setup_buckets(self):
        nbytes = self.reduce_bucket_size * self.p.dtype_bytes
        self.bucket.buffer = [self.host.buffer("ipg_buffer[0]", nbytes)]
        self.bucket.index = 0
        # Use double buffers to avoid data access conflict when overlap_comm is enabled.
        self.bucket.buffer.append(self.host.buffer("ipg_buffer[1]", nbytes))
        self.grads_in_partition_offset = 0

    # -- the gradient hook ---------------------------------------------------------------------------
    def reduce_independent_p_g_buckets_and_remove_grads(self, param: int, grad_reduc):
        host, bucket, numel = self.host, self.bucket, self.p.param_numel
        if bucket.elements + numel > self.reduce_bucket_size:
            self.reduce_ipg_grads()
            if self.variant == "overfix_7371":
                self.reduction_stream.wait_stream(self.compute)
                self.compute.wait_stream(self.reduction_stream)
            # Swap index between 0 and 1
            bucket.index = 1 - bucket.index
        # keeping the gradients contiguous to prevent memory fragmentation, and avoid flattening
        offset = bucket.elements * self.p.dtype_bytes
        new_grad_tensor = bucket.buffer[bucket.index].view(offset, self.param_bytes)
        host.copy(new_grad_tensor, grad_reduc, dur=self.hbm_us(self.param_bytes),
                  name="new_grad_tensor.copy_")
        host.free(grad_reduc)  # grad_reduc.data = new_grad_tensor.data: autograd's block goes back
        bucket.elements += numel
        bucket.params.append((param, offset))

    # -- reduce_ipg_grads ---------------------------------------------------------------------------------
    def reduce_ipg_grads(self):
        bucket = self.bucket
        used = bucket.elements * self.p.dtype_bytes
        self.average_tensor(bucket.buffer[bucket.index], used)
        with self.host.use_stream(self.reduction_stream):
            for param, offset in bucket.params:
                if self.is_param_in_current_partition[param]:
                    self.copy_grads_in_partition(bucket.buffer[bucket.index], offset)
                # else (stage 2) clear_grad_attribute(param): the grad is a view of the slot
            bucket.clear()

    def copy_grads_in_partition(self, slot, offset: int):
        # The allreduce buffer will be rewritten. Copy the gradients in partition to a new buffer
        dst = self.grads_in_partition.view(self.grads_in_partition_offset, self.param_bytes)
        self.host.copy(dst, slot.view(offset, self.param_bytes),
                       dur=self.hbm_us(self.param_bytes), name="copy_grads_in_partition")
        self.grads_in_partition_offset += self.param_bytes

    # -- average_tensor ---------------------------------------------------------------------------------
    def average_tensor(self, slot, used: int):
        host = self.host
        stream = self.reduction_stream
        stream.wait_stream(self.compute)
        if self.variant != "pre_5606":  # PR #5606: the compute stream waits for earlier reduces
            self.compute.wait_stream(stream)
        with host.use_stream(stream):
            tensor = slot[0:used]
            host.launch("tensor.div_", reads=[tensor], writes=[tensor],
                        dur=self.hbm_us(used))
            # rank_and_offsets: the bucket's slices, merged per owning rank, in bucket order
            owners: list[tuple[int, int, int]] = []
            for param, offset in self.bucket.params:
                owner = param // (self.p.params // self.p.world_size)
                if owners and owners[-1][0] == owner:
                    owners[-1] = (owner, owners[-1][1], owners[-1][2] + self.param_bytes)
                else:
                    owners.append((owner, offset, self.param_bytes))
            self.allreduce_and_copy_with_multiple_ranks(slot, owners, used)

    def allreduce_and_copy_with_multiple_ranks(self, slot, owners, used: int):
        host = self.host
        allreduced = self.allreduce_bucket(slot, owners, used)
        if self.variant == "record_stream_only":  # PR #7965
            host.record_stream(allreduced, self.reduction_stream)
        position = 0
        for bucket_rank, offset, nbytes in owners:
            if bucket_rank == self.partition_id:
                buf = slot.view(offset, nbytes)
                host.copy(buf, allreduced.view(position, nbytes), dur=self.hbm_us(nbytes),
                          name="buf.copy_(synced)")
                if self.variant == "record_stream_only":  # PR #7965
                    host.record_stream(slot, self.reduction_stream)
            position += nbytes
        host.free(allreduced)  # the flat tensor goes out of scope

    def allreduce_bucket(self, slot, owners, used: int):
        host = self.host
        tensor = host.buffer("allreduce_bucket.flat", used)  # self.flatten(bucket)
        host.launch("self.flatten", reads=[slot.view(o, n) for _, o, n in owners],
                    writes=[tensor], dur=self.hbm_us(used))
        # dist.all_reduce(tensor_to_allreduce, group=process_group): synchronous, so the current
        # (reduction) stream waits for ProcessGroupNCCL's stream
        work = self.dp_process_group.all_reduce(tensor, dur=self.allreduce_us(used),
                                                name="dist.all_reduce")
        work.wait()
        return tensor

    # -- the end of backward -------------------------------------------------------------------------------
    def independent_gradient_partition_epilogue(self):
        self.reduce_ipg_grads()
        self.host.synchronize()  # get_accelerator().synchronize() (overlap_comm)
        self._release_ipg_buffers()

    def _release_ipg_buffers(self):
        for buf in self.bucket.buffer:
            self.host.free(buf)
        self.bucket.buffer = []

    def step(self):
        self.host.launch("optimizer.step", reads=[self.grads_in_partition],
                         dur=self.p.optimizer_us)


def train(host, p, variant: str) -> None:
    """One rank's training loop: backward with the gradient hooks, epilogue, optimizer step."""
    optimizer = DeepSpeedZeroOptimizer(host, p, variant)
    grad_bytes = p.param_numel * p.dtype_bytes
    for t in range(p.steps):
        host.step = t
        optimizer.setup_buckets()
        for param in reversed(range(p.params)):  # autograd produces the last layer's grads first
            grad = host.buffer(f"param[{param}].grad", grad_bytes)
            host.launch("backward", writes=[grad], dur=p.backward_us)
            optimizer.reduce_independent_p_g_buckets_and_remove_grads(param, grad)
        optimizer.independent_gradient_partition_epilogue()
        optimizer.step()


def build(sim, p, variant: str) -> None:
    _check(p)
    ranks = list(range(p.world_size))
    sim.group("dp", ranks, "nccl", latency=p.nccl_latency_us, bandwidth=p.nccl_gb_per_s * 1e3)
    for r in ranks:
        sim.spawn(r, train, p, variant)


def _check(p) -> None:
    def need(ok: bool, text: str) -> None:
        if not ok:
            raise ModelError(f"--set {text}")
    need(p.world_size >= 2, f"world_size={p.world_size}: data parallelism needs >= 2 ranks")
    need(p.params >= p.world_size and p.params % p.world_size == 0,
         f"params={p.params}: must be a positive multiple of world_size={p.world_size}")
    need(0 < p.param_numel <= p.reduce_bucket_size,
         f"param_numel={p.param_numel}: must be in 1..reduce_bucket_size (an extra-large "
         "parameter takes another path, not modelled)")
    for name in ("dtype_bytes", "steps"):
        need(p[name] >= 1, f"{name}={p[name]}: must be >= 1")
    for name in ("hbm_gb_per_s", "nccl_gb_per_s"):
        need(p[name] > 0, f"{name}={p[name]}: must be > 0")
    for name in ("backward_us", "nccl_latency_us", "optimizer_us"):
        need(p[name] >= 0, f"{name}={p[name]}: must be >= 0")
