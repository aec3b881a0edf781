"""vLLM pipeline parallelism: `Worker.execute_model` before, during and after the PR #49274 regression.

Each rank runs the V1 GPU worker loop (`vllm/v1/worker/gpu_worker.py`): receive the previous stage's
intermediate tensors (`hidden_states`, `residual`), run this stage's layers, send the outputs on with
`GroupCoordinator.isend_tensor_dict` (`vllm/distributed/parallel_state.py`). The README's section
"The main job" and notebook 2 tell the story; in short:

* before PR #49274 the metadata went by a *blocking* gloo `send_object`, the worker kept the tensor handles
  in `self._pp_send_work` and waited them at the top of the next `execute_model`;
* PR #49274 made the metadata an `isend_object`, returned `[metadata_handle, *tensor_handles]` into a FIFO
  `_pending_isends` reaped lazily, and dropped `_pp_send_work` with its wait: nothing orders the next
  forward after the previous NCCL send any more, and the forward rewrites the buffers the send still reads;
* PR #54962 restores `self._pp_send_work = handles[1:]` and the wait at the top; the metadata handle is
  left to the reaper (waiting it would block the host on gloo again).

What is simulated, per rank (rank = stage * tp + tp_rank):

* a host thread running :func:`worker_main` (the engine loop around `Worker.execute_model`);
* the compute stream (forward, copies, sampler), one NCCL stream per p2p peer pair (ProcessGroupNCCL
  gives every send/recv pair its own 2-rank communicator and stream, key "low:high", see
  `getKeySendRecv` in ProcessGroupNCCL.cpp; so a stage's next receive is *not* queued behind its previous
  send), the TP group's NCCL stream (receive-side all-gather), and the gloo channel of the CPU group.

Engine loop (EngineCore.step_with_batch_queue): at most ``max_inflight`` batches (default pp) are in
flight. The first stage's host starts step t only after the last stage has finished step
t - max_inflight: the last stage's host, after `sampled_token_ids.tolist()` (a stream synchronize), sends a
small "step done" message on the `engine` channel (vLLM's shared-memory output queue, never rendezvous) and
the first stage's host receives it before step t. With ``topology=fold_back`` (a virtual pipeline: the last
stage sends its outputs back to stage 0, which runs the last virtual chunk ``pp - 1`` iterations later) the
batch is finished by stage 0 itself, so the bound needs no message there.

Findings beyond the note's table (pinned in tests/test_vllm_pp.py): a send ring at least as deep as
``max_inflight`` is ordered by the engine loop even without waits; ``wait_after_send`` can hang a fold_back
pipeline on the device (each wait puts a rendezvous send's completion in the compute stream, which the
receiver's irecv waits for); and with ``pp=2`` fold_back hangs every variant, because both directions share
ranks 0 and 1's single p2p communicator and stream.

Simplifications (documented, deliberate): one static token schedule (a request may sit in several
in-flight batches); the size tensor and the payload of `send_object` are one message of
``metadata_bytes``; forward time is linear in tokens and divided by tp.

For tests: :func:`workers_of` returns the Worker objects of a Simulation built by :func:`build`; every
Worker keeps ``calls`` (one :class:`Call` per `execute_model`: the action log, the handles returned, and
``_pp_send_work`` after the call). :func:`seed_unit_test` runs the PR #54962 unit test on the model.
"""
from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from greenlet import getcurrent

from streamsim import ModelError, Param, Simulation
from streamsim import during  # (the access-window helper)

MiB = 1 << 20

PARAMS = [
    # -- deployment ------------------------------------------------------------------------------
    Param("pp", int, 4, "pipeline-parallel stages (pipeline_parallel_size, >= 2)"),
    Param("tp", int, 1, "tensor-parallel ranks per stage; each sends 1/tp of every tensor and the "
          "receiving stage all-gathers on its TP group"),
    # -- workload -------------------------------------------------------------------------------
    Param("prompt_tokens", int, 12288, "prompt length of every request (prefilled in chunks)"),
    Param("chunk_tokens", int, 8192, "chunked-prefill chunk size = the scheduler's token budget per "
          "step (max_num_batched_tokens)"),
    Param("decode_steps", int, 8, "decode steps of every request after its prefill"),
    Param("requests", int, 1, "concurrent requests (prefill chunks scheduled first, then decodes)"),
    # -- model slice ------------------------------------------------------------------------------
    Param("hidden_size", int, 8192, "hidden size (8192: a 70B-class model)"),
    Param("layers", int, 20, "decoder layers per stage (80 layers / pp 4); the forward writes "
          "hidden_states in its last layer and updates residual from the end of its first layer on"),
    Param("dtype_bytes", int, 2, "bytes per element (2: bf16)"),
    # -- the design under test ---------------------------------------------------------------------
    Param("buffer_placement", str, "cudagraph", "where the sent tensors live: cudagraph (static "
          "graph-pool outputs rewritten by every step), persistent (the outgoing residual is the "
          "runner's persistent receive buffer), allocator (a fresh block per step, kept alive until "
          "its send ends)", ("cudagraph", "persistent", "allocator")),
    Param("topology", str, "linear", "linear pipeline, or fold_back: the last stage also sends its "
          "outputs back to stage 0, which receives them pp-1 iterations later (virtual pipeline)",
          ("linear", "fold_back")),
    Param("ring_slots", int, 3, "K: send-ring slots of copy_before_send / ring_no_wait (a slot is "
          "reused K steps later)"),
    Param("max_inflight", int, 0, "batches in flight in the engine loop (0 = pp: vLLM keeps pp_size "
          "batches in flight); fold_back needs >= pp and is bounded by stage 0's own loop"),
    Param("nccl_eager_bytes", int, 4 * MiB, "NCCL p2p sends up to this size complete without the "
          "receiver (they fit the peer's staging buffer, NCCL_BUFFSIZE = 4 MiB); larger ones are "
          "rendezvous"),
    Param("gloo_eager_bytes", int, 256, "gloo object sends up to this size complete without the "
          "receiver; the metadata (metadata_bytes) is above it, so a blocking send_object waits"),
    Param("metadata_bytes", int, 512, "pickled metadata list of a tensor dict (keys, dtypes, shapes)"),
    # -- costs (microseconds; bandwidths in gigabytes per second) ------------------------------------
    Param("forward_fixed_us", float, 10000.0, "per-step forward cost independent of tokens (reading "
          "the stage's ~35 GB of weights), divided by tp"),
    Param("forward_us_per_token", float, 55.0, "forward cost per scheduled token (~35 GFLOP per "
          "token per stage), divided by tp"),
    Param("sample_us", float, 1500.0, "last stage: compute_logits + sampler kernels"),
    Param("prepare_inputs_us", float, 400.0, "host time per step to build the input tensors "
          "(_prepare_inputs)"),
    Param("launch_us", float, 80.0, "host time to launch the forward (CUDA-graph replay)"),
    Param("copy_us_per_mb", float, 0.8, "device-to-device copy cost per MiB (intermediate tensors "
          "into the runner's persistent buffers; outputs into a send-ring slot)"),
    Param("nccl_latency_us", float, 15.0, "NCCL p2p and all-gather latency"),
    Param("nccl_gb_per_s", float, 50.0, "NCCL p2p bandwidth between stages (GB/s)"),
    Param("tp_gb_per_s", float, 150.0, "NCCL all-gather bandwidth inside a stage's TP group (GB/s)"),
    Param("gloo_latency_us", float, 40.0, "gloo (CPU group) message latency"),
    Param("gloo_gb_per_s", float, 1.0, "gloo bandwidth (GB/s)"),
    Param("output_queue_us", float, 30.0, "engine-loop message latency (the 'step done' message on "
          "vLLM's shared-memory queue; never rendezvous)"),
]

VARIANTS = {
    "pre_49274": "before PR #49274: blocking gloo metadata send; wait the previous tensor handles at "
                 "the top of execute_model",
    "regressed_49274": "PR #49274: non-blocking metadata; handles dropped into the _pending_isends "
                       "reaper, no wait before the next forward",
    "fixed_54962": "PR #54962: self._pp_send_work = handles[1:], waited at the top; the metadata "
                   "handle is left to the reaper",
    "copy_before_send": "copy the outputs into a ring of K slots and send the copy; before reusing a "
                        "slot wait the send that last used it",
    "ring_no_wait": "the same ring of K slots, with no wait at all",
    "wait_after_send": "wait the tensor handles right after sending (safe, serialising)",
}

BASELINE = "regressed_49274"  # `streamsim compare` costs each variant against the fastest wrong one

ENGINE_MSG_BYTES = 64  # the engine loop's "step done" message (token ids of a few requests)


# =============================================================================================
# Workload: the scheduler's token count per step
# =============================================================================================
def schedule(p) -> list[int]:
    """Tokens per step of a simple chunked-prefill scheduler with a budget of ``chunk_tokens``:
    prefill chunks first (requests in order), then one token for each request past its prefill."""
    prefill_left = [p.prompt_tokens] * p.requests
    decode_left = [p.decode_steps] * p.requests
    steps: list[int] = []
    while any(prefill_left) or any(decode_left):
        budget, tokens, prefilled = p.chunk_tokens, 0, set()
        for r in range(p.requests):
            if prefill_left[r] and budget:
                n = min(prefill_left[r], budget)
                prefill_left[r] -= n
                budget -= n
                tokens += n
                prefilled.add(r)
        for r in range(p.requests):
            if not prefill_left[r] and decode_left[r] and budget and r not in prefilled:
                decode_left[r] -= 1
                budget -= 1
                tokens += 1
        steps.append(tokens)
    return steps


@dataclass(frozen=True)
class SchedulerOutput:
    step: int
    total_num_scheduled_tokens: int


# =============================================================================================
# Tensors and handles, as the worker code holds them
# =============================================================================================
class Tensor:
    """A torch tensor as the model sees it: bytes [offset, offset + nbytes) of a storage."""

    __slots__ = ("buf", "offset", "nbytes", "itemsize", "fresh")

    def __init__(self, buf, offset: int, nbytes: int, itemsize: int, fresh: bool = False):
        self.buf, self.offset, self.nbytes, self.itemsize = buf, offset, nbytes, itemsize
        self.fresh = fresh  # a caching-allocator block of its own (freed when the last owner drops it)

    @property
    def view(self):
        return self.buf.view(self.offset, self.nbytes)

    def during(self, start: float, end: float):
        return during(self.view, start, end)

    def numel(self) -> int:
        return self.nbytes // self.itemsize

    def reshape(self, rows: int, _cols: int = -1) -> "_Rows":
        """``tensor.reshape(rows, -1)``: index it to get one row (a contiguous 1/rows slice)."""
        return _Rows(self, rows)


class _Rows:
    def __init__(self, t: Tensor, rows: int):
        self.t, self.rows = t, rows

    def __getitem__(self, i: int) -> Tensor:
        n = self.t.nbytes // self.rows
        return Tensor(self.t.buf, self.t.offset + i * n, n, self.t.itemsize, self.t.fresh)


@dataclass(frozen=True)
class TensorMetadata:
    nbytes: int


class Handle:
    """A ``torch.distributed.Work`` as vLLM holds it. Like the fake handles of the PR #54962 unit test,
    ``wait()`` logs ``wait:<name>`` (``prev-`` when the handle is from an earlier step)."""

    def __init__(self, worker: "Worker", work, kind: str, step: int, tensors=()):
        self.worker, self.work, self.kind, self.step = worker, work, kind, step
        self.tensors = list(tensors)  # a Work keeps its tensors alive until it is dropped

    def wait(self) -> None:
        prev = "prev-" if self.step < self.worker.step else ""
        self.worker.log(f"wait:{prev}{self.kind}")
        self.work.wait()  # NCCL: the current stream waits (the host does not); gloo: the host blocks

    def is_completed(self) -> bool:
        return self.work.is_completed()

    def __repr__(self) -> str:
        return f"Handle({self.kind}, step {self.step}, {self.work.name})"


# =============================================================================================
# vllm/distributed/parallel_state.py
# =============================================================================================
class GroupCoordinator:
    """The PP group of one rank (PR #49274 and later: non-blocking metadata).

    ``device_group`` is NCCL (one 2-rank communicator and stream per peer pair), ``cpu_group`` gloo.
    """

    def __init__(self, worker: "Worker", ranks: list[int], rank_in_group: int,
                 is_first_rank: bool, is_last_rank: bool):
        self.worker = worker
        self.host = worker.host
        self.ranks = ranks
        self.rank_in_group = rank_in_group
        self.world_size = len(ranks)
        self.is_first_rank, self.is_last_rank = is_first_rank, is_last_rank
        self.cpu_group = self.host.group("cpu")
        self._pending_isends: deque[tuple[list[Handle], list[Tensor]]] = deque()

    # -- CPU group (gloo) --------------------------------------------------------------------------
    def send_object(self, obj, dst: int) -> None:
        """Blocking gloo send (size tensor + payload): rendezvous above the gloo eager threshold."""
        self.worker.cluster.mailbox(self.ranks[self.rank_in_group], self.ranks[dst]).append(obj)
        self.cpu_group.send_object(self.worker.p.metadata_bytes, self.ranks[dst],
                                   name=f"send_object(metadata) to rank{self.ranks[dst]}")

    def isend_object(self, obj, dst: int) -> Handle:
        """PR #49274: the non-blocking form; returns a gloo handle (its wait would block the host)."""
        self.worker.cluster.mailbox(self.ranks[self.rank_in_group], self.ranks[dst]).append(obj)
        work = self.cpu_group.isend_object(self.worker.p.metadata_bytes, self.ranks[dst],
                                           name=f"isend_object(metadata) to rank{self.ranks[dst]}")
        return Handle(self.worker, work, "metadata", self.worker.step)

    def recv_object(self, src: int):
        """Blocking gloo receive: the host waits until the object arrives."""
        self.cpu_group.recv_object(self.ranks[src],
                                   name=f"recv_object(metadata) from rank{self.ranks[src]}")
        return self.worker.cluster.mailbox(self.ranks[src],
                                           self.ranks[self.rank_in_group]).popleft()

    # -- device group (NCCL p2p) -------------------------------------------------------------------
    def _p2p_group(self, peer: int):
        me = self.ranks[self.rank_in_group]
        return self.host.group(p2p_group_name(me, peer))

    def device_isend(self, tensor: Tensor, dst: int) -> Handle:
        """``torch.distributed.isend(tensor, dst, group=device_group)``: reads ``tensor`` for the
        whole transfer, on the pair's NCCL stream (which first waits for the current stream)."""
        work = self._p2p_group(dst).isend(tensor.view, dst)
        return Handle(self.worker, work, "tensor", self.worker.step, [tensor])

    def device_recv(self, tensor: Tensor, src: int) -> None:
        """``torch.distributed.recv``: irecv, then ``wait()``: the current stream waits, not the host."""
        self._p2p_group(src).irecv(tensor.view, src).wait()

    def _reap_pending_isends(self) -> None:
        """PR #49274: drop the entries whose tensor sends completed (FIFO, lazily). This keeps the
        tensors' storage alive until then; it orders nothing the next forward depends on."""
        while self._pending_isends:
            handles, tensors = self._pending_isends[0]
            if not all(h.is_completed() for h in handles[1:]):
                break
            self._pending_isends.popleft()
            self.worker.release(tensors)

    def isend_tensor_dict(self, tensor_dict: dict[str, Tensor], dst: int | None = None,
                          all_gather_group: "TPGroup | None" = None) -> list[Handle]:
        """PR #49274: send the metadata without blocking, then one NCCL isend per tensor; returns
        ``[metadata_handle, *tensor_handles]`` (also kept in ``_pending_isends``)."""
        self._reap_pending_isends()
        all_gather_size = 1 if all_gather_group is None else all_gather_group.world_size
        all_gather_rank = 0 if all_gather_group is None else all_gather_group.rank_in_group
        if dst is None:
            dst = (self.rank_in_group + 1) % self.world_size
        metadata_list, tensor_list = _split_tensor_dict(tensor_dict)
        # `metadata_list` lives in CPU memory: send it on the CPU group, without blocking (#49274)
        metadata_handle = self.isend_object(metadata_list, dst=dst)
        self.worker.log("isend")
        tensor_handles = []
        for tensor in tensor_list:
            if tensor.numel() == 0:
                continue  # Skip sending empty tensors.
            # send-allgather: send only a slice, then do allgather.
            use_all_gather = (all_gather_group is not None
                              and tensor.numel() % all_gather_size == 0)
            if use_all_gather:
                tensor = tensor.reshape(all_gather_size, -1)[all_gather_rank]
            tensor_handles.append(self.device_isend(tensor, dst=self.ranks[dst]))
        handles = [metadata_handle, *tensor_handles]
        self._pending_isends.append((handles, tensor_list))
        self.worker.calls[-1].handles = handles
        return handles

    def recv_tensor_dict(self, src: int | None = None,
                         all_gather_group: "TPGroup | None" = None) -> dict[str, Tensor]:
        """Receive the metadata (the host blocks), then each tensor (the stream waits), all-gathered
        on the TP group when the sender sent slices."""
        all_gather_size = 1 if all_gather_group is None else all_gather_group.world_size
        all_gather_rank = 0 if all_gather_group is None else all_gather_group.rank_in_group
        if src is None:
            src = (self.rank_in_group - 1) % self.world_size
        recv_metadata_list = self.recv_object(src=src)
        tensor_dict: dict[str, Tensor] = {}
        for key, value in recv_metadata_list:
            tensor = self.worker.empty(f"recv.{key}", value.nbytes)  # torch.empty(value.size, ...)
            if tensor.numel() == 0:
                tensor_dict[key] = tensor
                continue
            # send-allgather: send only a slice, then do allgather.
            use_all_gather = (all_gather_group is not None
                              and tensor.numel() % all_gather_size == 0)
            orig = tensor
            if use_all_gather:
                tensor = tensor.reshape(all_gather_size, -1)[all_gather_rank]
            self.device_recv(tensor, src=self.ranks[src])
            if use_all_gather:
                # do the allgather
                tensor = all_gather_group.all_gather(tensor, out=orig)
            tensor_dict[key] = tensor
        return tensor_dict


class GroupCoordinatorPre49274(GroupCoordinator):
    """Before PR #49274: the metadata goes by a blocking ``send_object``; only tensor handles return."""

    def isend_tensor_dict(self, tensor_dict: dict[str, Tensor], dst: int | None = None,
                          all_gather_group: "TPGroup | None" = None) -> list[Handle]:
        all_gather_size = 1 if all_gather_group is None else all_gather_group.world_size
        all_gather_rank = 0 if all_gather_group is None else all_gather_group.rank_in_group
        if dst is None:
            dst = (self.rank_in_group + 1) % self.world_size
        metadata_list, tensor_list = _split_tensor_dict(tensor_dict)
        # `metadata_list` lives in CPU memory: send it on the CPU group. Blocking: above the gloo
        # eager threshold the host waits here until the receiver posts its recv_object.
        self.send_object(metadata_list, dst=dst)
        self.worker.log("isend")
        tensor_handles = []
        for tensor in tensor_list:
            if tensor.numel() == 0:
                continue  # Skip sending empty tensors.
            # send-allgather: send only a slice, then do allgather.
            use_all_gather = (all_gather_group is not None
                              and tensor.numel() % all_gather_size == 0)
            if use_all_gather:
                tensor = tensor.reshape(all_gather_size, -1)[all_gather_rank]
            tensor_handles.append(self.device_isend(tensor, dst=self.ranks[dst]))
        self.worker.calls[-1].handles = tensor_handles
        return tensor_handles


def _split_tensor_dict(tensor_dict: dict[str, Tensor]):
    metadata_list = [(k, TensorMetadata(v.nbytes)) for k, v in tensor_dict.items()]
    return metadata_list, list(tensor_dict.values())


class TPGroup:
    """The stage's TP group: only its all-gather (receive side of send-allgather) is modelled."""

    def __init__(self, worker: "Worker", ranks: list[int], rank_in_group: int):
        self.worker, self.ranks = worker, ranks
        self.world_size, self.rank_in_group = len(ranks), rank_in_group

    def all_gather(self, tensor: Tensor, out: Tensor) -> Tensor:
        """``all_gather_into_tensor``: a synchronous op, so the current stream waits for it."""
        p = self.worker.p
        dur = p.nccl_latency_us + (self.world_size - 1) * tensor.nbytes / (p.tp_gb_per_s * 1e3)
        group = self.worker.host.group(f"tp{self.worker.stage}")
        group.all_gather([out.view], [tensor.view], dur=dur, name=f"all_gather({out.buf.name})").wait()
        return out


# The process groups of the rank whose host program is running (vLLM's module-level accessors).
_CURRENT_WORKER: "weakref.WeakKeyDictionary[Any, Worker]" = weakref.WeakKeyDictionary()


def get_pp_group() -> GroupCoordinator:
    return _CURRENT_WORKER[getcurrent()].pp_group


def get_tp_group() -> TPGroup | None:
    return _CURRENT_WORKER[getcurrent()].tp_group


# =============================================================================================
# vllm/v1/worker/gpu_model_runner.py
# =============================================================================================
class IntermediateTensors:
    def __init__(self, tensors: dict[str, Tensor]):
        self.tensors = tensors


class ModelRunnerOutput:
    def __init__(self, step: int):
        self.step = step


class GPUModelRunner:
    """One stage's layers. With CUDA graphs the outputs are views of static graph-pool buffers that every
    replay rewrites; received tensors are copied into the persistent ``intermediate_tensors``."""

    def __init__(self, worker: "Worker", prefix: str, max_tokens: int):
        self.worker = worker
        p, host = worker.p, worker.host
        self.prefix = prefix
        row = p.hidden_size * p.dtype_bytes
        self.row_bytes = row
        self.graph_outputs = {k: host.buffer(f"{prefix}{k}", max_tokens * row, worker.compute)
                              for k in ("hidden_states", "residual")}
        self.intermediate_tensors = None
        if not worker.pp_group.is_first_rank:
            self.intermediate_tensors = {
                k: host.buffer(f"{prefix}intermediate_tensors.{k}", max_tokens * row, worker.compute)
                for k in ("hidden_states", "residual")}

    def _view(self, buf, num_tokens: int, fresh: bool = False) -> Tensor:
        return Tensor(buf, 0, num_tokens * self.row_bytes, self.worker.p.dtype_bytes, fresh)

    def sync_and_slice_intermediate_tensors(self, num_tokens: int,
                                            intermediate_tensors: IntermediateTensors):
        """``self.intermediate_tensors[k][:n].copy_(v[:n])``: into the persistent buffers."""
        host, p = self.worker.host, self.worker.p
        out = {}
        for k, v in intermediate_tensors.tensors.items():
            dst = self._view(self.intermediate_tensors[k], num_tokens)
            host.copy(dst.view, v.view, dur=p.copy_us_per_mb * v.nbytes / MiB,
                      name=f"copy_ into {dst.buf.name}")
            out[k] = dst
        return out

    def _output_tensors(self, num_tokens: int, inputs: dict[str, Tensor] | None):
        """Where the forward writes ``hidden_states`` and ``residual`` (``buffer_placement``)."""
        placement = self.worker.p.buffer_placement
        if placement == "allocator":  # fresh blocks: freed only when the last owner drops them
            return {k: self.worker.empty(f"{self.prefix}{k}", num_tokens * self.row_bytes)
                    for k in ("hidden_states", "residual")}
        out = {k: self._view(self.graph_outputs[k], num_tokens) for k in ("hidden_states", "residual")}
        if placement == "persistent" and inputs is not None:
            out["residual"] = inputs["residual"]  # updated in place: the receive buffer goes out again
        return out

    def execute_model(self, scheduler_output: SchedulerOutput,
                      intermediate_tensors: IntermediateTensors | None = None):
        worker, host, p = self.worker, self.worker.host, self.worker.p
        num_tokens = scheduler_output.total_num_scheduled_tokens
        host.host_work("_prepare_inputs", dur=p.prepare_inputs_us)
        inputs = None
        if intermediate_tensors is not None:
            inputs = self.sync_and_slice_intermediate_tensors(num_tokens, intermediate_tensors)
        outputs = self._output_tensors(num_tokens, inputs)
        L = p.layers
        reads = [t.during(0.0, 1.0 / L) for t in (inputs or {}).values()]
        writes = [outputs["hidden_states"].during(1.0 - 1.0 / L, 1.0),  # its last layer
                  outputs["residual"].during(1.0 / L, 1.0)]  # in place from the end of layer 1 on
        worker.log("forward")
        host.sleep(p.launch_us, "launch forward (CUDA graph replay)")
        host.launch(f"{self.prefix}forward", reads=reads, writes=writes,
                    dur=(p.forward_fixed_us + p.forward_us_per_token * num_tokens) / p.tp)
        if intermediate_tensors is not None:  # the received tensors are dropped (torch.empty blocks)
            worker.release(intermediate_tensors.tensors.values())
        if not worker.pp_group.is_last_rank:
            return IntermediateTensors(outputs)
        # last rank: logits and sampling; `sampled_token_ids.tolist()` syncs the host with the stream
        host.launch(f"{self.prefix}compute_logits+sample",
                    reads=[outputs["hidden_states"].view], dur=p.sample_us)
        worker.compute.synchronize()
        worker.release(outputs.values())
        return ModelRunnerOutput(scheduler_output.step)


# =============================================================================================
# vllm/v1/worker/gpu_worker.py
# =============================================================================================
@dataclass
class Call:
    """One ``execute_model`` call as a test sees it."""

    step: int
    log: list[str] = field(default_factory=list)
    handles: list[Handle] | None = None  # what isend_tensor_dict returned
    pp_send_work: list[Handle] | None = None  # self._pp_send_work after the call
    host_time: float = 0.0  # the host's clock when the call started


class Worker:
    """The V1 GPU worker of one rank (one virtual chunk of it, with ``topology=fold_back``)."""

    coordinator = GroupCoordinator

    def __init__(self, host, cluster: "Cluster", stage: int, tp_rank: int, chunk: int = 0):
        self.host, self.cluster, self.p = host, cluster, cluster.p
        self.stage, self.tp_rank, self.chunk = stage, tp_rank, chunk
        self.rank = host.rank
        self.step = -1
        self.calls: list[Call] = []
        self._pp_send_work: list[Handle] = []  # PR #54962 (and before #49274)
        p = self.p
        self.compute = host.stream("compute")
        column = [s * p.tp + tp_rank for s in range(p.pp)]
        fold = p.topology == "fold_back"
        is_first = stage == 0 and chunk == 0
        is_last = (stage == p.pp - 1 and not fold) or chunk == 1
        self.pp_group = self.coordinator(self, column, stage, is_first, is_last)
        self.tp_group = (TPGroup(self, [stage * p.tp + r for r in range(p.tp)], tp_rank)
                         if p.tp > 1 else None)
        self.model_runner = GPUModelRunner(self, "v1." if chunk else "", cluster.max_tokens)

    # -- helpers the model code calls --------------------------------------------------------------
    def log(self, entry: str) -> None:
        self.host.log.append(entry)
        self.calls[-1].log.append(entry)

    def empty(self, name: str, nbytes: int) -> Tensor:
        """``torch.empty``: a fresh caching-allocator block on the current (compute) stream."""
        n = self.cluster.allocations[self.rank] = self.cluster.allocations.get(self.rank, 0) + 1
        buf = self.host.buffer(f"{name}@{n}", nbytes, self.compute)
        return Tensor(buf, 0, nbytes, self.p.dtype_bytes, fresh=True)

    def release(self, tensors) -> None:
        """The last reference to these tensors is dropped: fresh blocks go back to the allocator."""
        for t in tensors:
            if t.fresh and t.buf.name not in self.cluster.freed[self.rank]:
                self.cluster.freed[self.rank].add(t.buf.name)
                self.host.free(t.buf)

    def __call__(self, scheduler_output: SchedulerOutput):
        """The executor's call: ``execute_model`` plus the bookkeeping tests read (``calls``)."""
        self.step = scheduler_output.step
        _CURRENT_WORKER[getcurrent()] = self
        self.calls.append(Call(self.step, host_time=self.host.now))
        output = self.execute_model(scheduler_output)
        self.calls[-1].pp_send_work = list(self._pp_send_work)
        return output

    def execute_model(self, scheduler_output: SchedulerOutput):
        raise NotImplementedError


class WorkerPre49274(Worker):
    coordinator = GroupCoordinatorPre49274

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput | None:
        # the previous step's sends must be done before this step's forward reuses their buffers
        for handle in self._pp_send_work:
            handle.wait()
        self.release(t for h in self._pp_send_work for t in h.tensors)  # the Work held the tensors
        self._pp_send_work = []

        intermediate_tensors = None
        forward_pass = scheduler_output.total_num_scheduled_tokens > 0
        if forward_pass and not get_pp_group().is_first_rank:
            intermediate_tensors = IntermediateTensors(
                get_pp_group().recv_tensor_dict(all_gather_group=get_tp_group()))

        output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)
        if isinstance(output, ModelRunnerOutput):
            return output

        assert isinstance(output, IntermediateTensors) and not get_pp_group().is_last_rank
        # blocking metadata send_object, then one isend per tensor: the tensor handles come back
        self._pp_send_work = get_pp_group().isend_tensor_dict(
            output.tensors, all_gather_group=get_tp_group())
        return None


class WorkerRegressed49274(Worker):
    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput | None:
        # PR #49274 removed self._pp_send_work and the wait that stood here
        intermediate_tensors = None
        forward_pass = scheduler_output.total_num_scheduled_tokens > 0
        if forward_pass and not get_pp_group().is_first_rank:
            intermediate_tensors = IntermediateTensors(
                get_pp_group().recv_tensor_dict(all_gather_group=get_tp_group()))

        output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)
        if isinstance(output, ModelRunnerOutput):
            return output

        assert isinstance(output, IntermediateTensors) and not get_pp_group().is_last_rank
        # the handles go to the _pending_isends reaper only: nothing waits the sends
        get_pp_group().isend_tensor_dict(output.tensors, all_gather_group=get_tp_group())
        return None


class WorkerFixed54962(Worker):
    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput | None:
        # PR #54962: wait the previous step's tensor sends before this forward overwrites them
        for handle in self._pp_send_work:
            handle.wait()
        self._pp_send_work = []

        intermediate_tensors = None
        forward_pass = scheduler_output.total_num_scheduled_tokens > 0
        if forward_pass and not get_pp_group().is_first_rank:
            intermediate_tensors = IntermediateTensors(
                get_pp_group().recv_tensor_dict(all_gather_group=get_tp_group()))

        output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)
        if isinstance(output, ModelRunnerOutput):
            return output

        assert isinstance(output, IntermediateTensors) and not get_pp_group().is_last_rank
        handles = get_pp_group().isend_tensor_dict(output.tensors, all_gather_group=get_tp_group())
        # handles[0] is the gloo metadata handle: left to the reaper (waiting it blocks the host)
        self._pp_send_work = handles[1:]
        return None


class _SendRing:
    """K send slots (``ring_slots``): static buffers, or fresh blocks with the caching allocator."""

    def __init__(self, worker: Worker):
        self.worker = worker
        p, host = worker.p, worker.host
        row = p.hidden_size * p.dtype_bytes
        prefix = worker.model_runner.prefix
        self.slots = [{k: host.buffer(f"{prefix}send_ring[{i}].{k}", worker.cluster.max_tokens * row,
                                      worker.compute) for k in ("hidden_states", "residual")}
                      for i in range(p.ring_slots)]
        self.pending: list[list[Handle]] = [[] for _ in range(p.ring_slots)]

    def slot(self, step: int) -> int:
        return step % len(self.slots)

    def copy_(self, index: int, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
        """Copy the outputs into slot ``index`` on the compute stream; return the copies."""
        worker, host, p = self.worker, self.worker.host, self.worker.p
        out = {}
        for k, v in tensors.items():
            if p.buffer_placement == "allocator":
                dst = worker.empty(f"{worker.model_runner.prefix}send_ring.{k}", v.nbytes)
            else:
                dst = Tensor(self.slots[index][k], 0, v.nbytes, p.dtype_bytes)
            host.copy(dst.view, v.view, dur=p.copy_us_per_mb * v.nbytes / MiB,
                      name=f"copy_ into {dst.buf.name}")
            out[k] = dst
        worker.release(tensors.values())  # the forward's own outputs are dropped after the copy
        return out


class WorkerCopyBeforeSend(Worker):
    wait_slot = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._send_ring = _SendRing(self)

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput | None:
        intermediate_tensors = None
        forward_pass = scheduler_output.total_num_scheduled_tokens > 0
        if forward_pass and not get_pp_group().is_first_rank:
            intermediate_tensors = IntermediateTensors(
                get_pp_group().recv_tensor_dict(all_gather_group=get_tp_group()))

        output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)
        if isinstance(output, ModelRunnerOutput):
            return output

        assert isinstance(output, IntermediateTensors) and not get_pp_group().is_last_rank
        slot = self._send_ring.slot(scheduler_output.step)
        if self.wait_slot:  # the send that last used this slot (K steps ago) must be done
            for handle in self._send_ring.pending[slot]:
                handle.wait()
        tensors = self._send_ring.copy_(slot, output.tensors)
        handles = get_pp_group().isend_tensor_dict(tensors, all_gather_group=get_tp_group())
        self._send_ring.pending[slot] = handles[1:]
        return None


class WorkerRingNoWait(WorkerCopyBeforeSend):
    wait_slot = False


class WorkerWaitAfterSend(Worker):
    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput | None:
        intermediate_tensors = None
        forward_pass = scheduler_output.total_num_scheduled_tokens > 0
        if forward_pass and not get_pp_group().is_first_rank:
            intermediate_tensors = IntermediateTensors(
                get_pp_group().recv_tensor_dict(all_gather_group=get_tp_group()))

        output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)
        if isinstance(output, ModelRunnerOutput):
            return output

        assert isinstance(output, IntermediateTensors) and not get_pp_group().is_last_rank
        handles = get_pp_group().isend_tensor_dict(output.tensors, all_gather_group=get_tp_group())
        for handle in handles[1:]:  # the compute stream waits for the sends right away
            handle.wait()
        return None


WORKER_CLASSES = {
    "pre_49274": WorkerPre49274,
    "regressed_49274": WorkerRegressed49274,
    "fixed_54962": WorkerFixed54962,
    "copy_before_send": WorkerCopyBeforeSend,
    "ring_no_wait": WorkerRingNoWait,
    "wait_after_send": WorkerWaitAfterSend,
}


# =============================================================================================
# The engine loop and the deployment
# =============================================================================================
def p2p_group_name(a: int, b: int) -> str:
    lo, hi = min(a, b), max(a, b)
    return f"pp:{lo}-{hi}"


class Cluster:
    """What the ranks share: parameters, the schedule, and the metadata objects in flight."""

    def __init__(self, p, variant: str):
        self.p, self.variant = p, variant
        self.steps = schedule(p)
        self.max_tokens = max(self.steps, default=1)
        self.max_inflight = p.max_inflight or p.pp
        self.fold_lag = p.pp - 1  # fold_back: stage 0 runs batch b's last chunk in iteration b + pp-1
        self._mail: dict[tuple[int, int], deque] = {}
        self.freed: dict[int, set[str]] = {}  # rank -> fresh blocks already given back
        self.allocations: dict[int, int] = {}  # rank -> fresh blocks allocated so far (for names)
        self.workers: dict[int, list[Worker]] = {}

    def mailbox(self, src: int, dst: int) -> deque:
        return self._mail.setdefault((src, dst), deque())


def worker_main(host, cluster: Cluster, stage: int, tp_rank: int) -> None:
    """A rank's host thread: the executor hands it one SchedulerOutput per engine step."""
    p = cluster.p
    cls = WORKER_CLASSES[cluster.variant]
    cluster.freed[host.rank] = set()
    worker = cls(host, cluster, stage, tp_rank)
    workers = cluster.workers[host.rank] = [worker]
    fold = p.topology == "fold_back"
    virtual = None
    if fold and stage == 0:  # the last virtual chunk: receives from the last stage, samples
        virtual = cls(host, cluster, stage, tp_rank, chunk=1)
        workers.append(virtual)
    engine = host.group("engine") if stage in (0, p.pp - 1) else None
    first_rank, last_rank = tp_rank, (p.pp - 1) * p.tp + tp_rank
    lag, inflight, steps = cluster.fold_lag, cluster.max_inflight, cluster.steps

    for t, tokens in enumerate(steps):
        host.step = t
        if stage == 0 and not fold and t >= inflight:
            # step_with_batch_queue: batch t - max_inflight has come back from the last stage
            engine.recv_object(last_rank, name=f"recv step {t - inflight} done")
        output = worker(SchedulerOutput(t, tokens))
        if virtual is not None and t >= lag:
            virtual(SchedulerOutput(t - lag, steps[t - lag]))
        if isinstance(output, ModelRunnerOutput) and not fold:
            engine.send_object(ENGINE_MSG_BYTES, first_rank, name=f"send step {t} done")
    # drain: the engine collects the batches still in flight
    T = len(steps)
    for t in range(T, T + (lag if virtual is not None else 0)):
        host.step = t
        virtual(SchedulerOutput(t - lag, steps[t - lag]))
    if stage == 0 and not fold:
        for t in range(max(0, T - inflight), T):
            host.step = T
            engine.recv_object(last_rank, name=f"recv step {t} done")


_WORKERS: "weakref.WeakKeyDictionary[Simulation, Cluster]" = weakref.WeakKeyDictionary()


def build(sim: Simulation, p, variant: str) -> None:
    """Declare the process groups and spawn one host program per rank."""
    _check(p)
    cluster = Cluster(p, variant)
    _WORKERS[sim] = cluster
    ranks = list(range(p.pp * p.tp))
    sim.group("cpu", ranks, "gloo", latency=p.gloo_latency_us, bandwidth=p.gloo_gb_per_s * 1e3,
              eager_bytes=p.gloo_eager_bytes)
    firsts = list(range(p.tp))
    lasts = [(p.pp - 1) * p.tp + r for r in range(p.tp)]
    sim.group("engine", firsts + lasts, "gloo", latency=p.output_queue_us, bandwidth=1e6,
              eager_bytes=1 << 30)
    pairs = set()
    for r in range(p.tp):
        column = [s * p.tp + r for s in range(p.pp)]
        links = list(zip(column, column[1:]))
        if p.topology == "fold_back":
            links.append((column[-1], column[0]))
        pairs.update(tuple(sorted(l)) for l in links)
    for a, b in sorted(pairs):
        sim.group(p2p_group_name(a, b), [a, b], "nccl", latency=p.nccl_latency_us,
                  bandwidth=p.nccl_gb_per_s * 1e3, eager_bytes=p.nccl_eager_bytes)
    if p.tp > 1:
        for s in range(p.pp):
            sim.group(f"tp{s}", [s * p.tp + r for r in range(p.tp)], "nccl",
                      latency=p.nccl_latency_us, bandwidth=p.tp_gb_per_s * 1e3)
    for s in range(p.pp):
        for r in range(p.tp):
            sim.spawn(s * p.tp + r, worker_main, cluster, s, r)


def _check(p) -> None:
    def need(ok: bool, text: str) -> None:
        if not ok:
            raise ModelError(f"--set {text}")
    need(p.pp >= 2, f"pp={p.pp}: pipeline parallelism needs at least 2 stages")
    need(p.tp >= 1, f"tp={p.tp}: must be >= 1")
    need(p.hidden_size % p.tp == 0, f"hidden_size={p.hidden_size}: must be divisible by tp={p.tp}")
    for name in ("prompt_tokens", "chunk_tokens", "requests", "layers", "dtype_bytes", "ring_slots"):
        need(p[name] >= 1, f"{name}={p[name]}: must be >= 1")
    for name in ("decode_steps", "max_inflight", "nccl_eager_bytes", "gloo_eager_bytes",
                 "metadata_bytes"):
        need(p[name] >= 0, f"{name}={p[name]}: must be >= 0")
    for prm in PARAMS:
        if prm.type is float:
            need(p[prm.name] >= 0, f"{prm.name}={p[prm.name]}: must be >= 0")
    for name in ("nccl_gb_per_s", "tp_gb_per_s", "gloo_gb_per_s"):
        need(p[name] > 0, f"{name}={p[name]}: must be > 0")
    if p.topology == "fold_back":
        need((p.max_inflight or p.pp) >= p.pp, f"max_inflight={p.max_inflight}: fold_back runs a "
             f"batch's last chunk pp-1 iterations later, so it needs max_inflight >= pp")


# =============================================================================================
# For tests
# =============================================================================================
def workers_of(sim: Simulation) -> dict[int, list[Worker]]:
    """rank -> its Worker objects (two on stage 0 with fold_back), for a Simulation built here."""
    return _WORKERS[sim].workers


def params(overrides: dict | None = None):
    """Default parameter values with ``overrides`` applied (a streamsim Params mapping)."""
    from streamsim import Params
    values = Params({prm.name: prm.default for prm in PARAMS})
    for k, v in (overrides or {}).items():
        if k not in values:
            raise ModelError(f"unknown parameter {k!r}")
        values[k] = v
    return values


def run(variant: str, overrides: dict | None = None, **sim_kw):
    """Build and run one variant here (not through the runner): returns (trace, workers)."""
    sim = Simulation(**sim_kw)
    values = params(overrides)
    build(sim, values, variant)
    trace = sim.run(source=__file__, meta={"model": "vllm_pp", "variant": variant,
                                           "params": dict(values)})
    return trace, workers_of(sim)


def seed_unit_test(step: int = 1, overrides: dict | None = None):
    """PR #54962's unit test on the model: the first rank's ``execute_model`` at ``step`` (a previous
    send pending) under fixed_54962. Returns (trace, worker, call): ``call.log`` must read
    wait:prev-tensor (one per tensor handle), forward, isend; ``call.pp_send_work ==
    call.handles[1:]``; ``call.handles[0]`` (the metadata handle) is never waited."""
    trace, workers = run("fixed_54962", overrides)
    worker = workers[0][0]
    call = next(c for c in worker.calls if c.step == step)
    return trace, worker, call
