"""vLLM pipeline parallelism: `Worker.execute_model` before, during and after the PR #49274 regression.

Each rank runs the GPU worker loop (`vllm/v1/worker/gpu_worker.py`, `Worker.execute_model`):
receive the previous stage's intermediate tensors (`hidden_states`, `residual`), run this stage's
layers, send the outputs on with `GroupCoordinator.isend_tensor_dict`
(`vllm/distributed/parallel_state.py`).

* Before PR #49274 the metadata went by a *blocking* gloo `send_object`; the worker kept the tensor
  handles in `self._pp_send_work` and waited them at the top of the next `execute_model`.
* PR #49274 made the metadata an `isend_object`, returned `[metadata_handle, *tensor_handles]`
  into a FIFO `_pending_isends` reaped lazily (`_reap_completed_isends`), and dropped
  `_pp_send_work` with its wait: nothing orders the next forward after the previous send any more.
* PR #54962 restores `self._pp_send_work = handles[1:]` and the wait at the top (vLLM 0.34.0's
  `Worker.execute_model` has it); the metadata handle is left to the reaper.

Every assumption that changes a verdict is a parameter or a stated choice, with its source (the
model note `docs/models/vllm_pp.md` has the expected outcomes and the sweep):

* Which NCCL stream carries p2p ops (``p2p_streams``). vLLM 0.34.0 creates the PP
  `device_group` with `torch.distributed.new_group` (`GroupCoordinator.__init__`) under an
  `init_process_group` without `device_id` (`init_distributed_environment`, unless
  `VLLM_DISTRIBUTED_USE_SPLIT_GROUP=1`), so the group is lazily initialised and PyTorch 2.14's
  `ProcessGroupNCCL::pointToPoint` gives each pair of ranks its own 2-rank communicator and
  stream (`getKeySendRecv`, "low:high"): ``per_pair``, the default. ``per_group`` is the eager
  branch (`eagerInit_`: a bound device, `split_group`): every p2p op of the rank FIFO on the
  group's one stream, so a stage's next receive queues behind its previous send.
* Where the sent tensors live (``cudagraph_max_tokens``, ``residual_in_place``). vLLM replays CUDA
  graphs up to `max_cudagraph_capture_size` (`VllmConfig._set_cudagraph_sizes`: 512 on H100/H200
  defaults) with `cudagraph_mode=FULL_AND_PIECEWISE`: a decode-only batch runs a FULL graph whose
  outputs are persistent buffers written at its end (`ModelCudaGraphManager.store_capture_output`);
  a prefill or mixed batch a PIECEWISE graph whose outputs live in the global graph pool that every
  later replay reuses (`CUDAGraphWrapper`, one pool for all graphs); a larger batch runs eagerly and
  its outputs are fresh caching-allocator blocks, kept alive by the send (`recordStream`) and by
  `_pending_isends` until reaped, so nothing can overwrite them. A middle stage copies what it
  received into persistent `intermediate_tensors` buffers (`v[:n].copy_(...)` in the runner's
  `execute_model`); with the in-place `fused_add_rms_norm` kernel (selected when not compiling with
  Inductor: `get_default_ir_op_priority`) its outgoing residual *is* that buffer
  (``residual_in_place``; the default Inductor compile picks the out-of-place kernel but donates
  the receive buffers to `maybe_inplace`, which lets the output reuse them).
* The reaper (`_reap_completed_isends`, 0.34.0) waits `handles[0]` once the entry's tensor handles
  report `is_completed()`; gloo p2p is rendezvous at every size (gloo `Pair::send`), so that wait
  holds the host until the receiver's `recv_object` took the metadata (``gloo_eager_bytes = 0``).
* Access windows in the forward's order (`LlamaDecoderLayer.forward`, `llama.py`; DeepSeek-V2
  and GLM the same): the received tensors are read by layer 0's input norm (the first 1/L of the
  forward); the final residual is written by the last layer's post-attention norm,
  `hidden_states` by its MLP (the last 1/L, in two halves); an in-place residual buffer is
  written from the start.
* Scheduling (`EngineCore.step_with_batch_queue`, `vllm/v1/core/sched/scheduler.py`,
  `async_scheduler.py`): at most `max_concurrent_batches` batches in flight (pp + 1 with async
  scheduling, on by default); a request's next prefill chunk goes in the very next step; its first
  decode ``pp`` scheduler steps after its last chunk and each later one ``pp`` steps after the
  previous (`decode_stagger = pp_size`); a decode needs the token sampled by the request's previous
  batch.

What is simulated per rank (rank = stage * tp + tp_rank): a host thread running
:func:`worker_main`; the compute stream; the NCCL stream(s) of the PP group; the TP group's NCCL
stream (receive-side all-gather); the gloo channel of the CPU group; the engine's output queue.

Simplifications (deliberate): the sampled token reaches stage 0 as the engine loop's "step done"
message, a host-side wait (vLLM's async scheduling broadcasts it on the device, letting stage 0's
host run one step further ahead; the device-side order is the same); with ``topology=fold_back``
(a virtual pipeline vLLM does not run: the deadlock scenario of PR #49274's motivation) stage 0
runs the batches back to back without that dependency; the size tensor and payload of
`send_object` are one message of ``metadata_bytes``; graph capture sizes are not padded; forward
time is linear in tokens and divided by tp. At the end of the run each worker does what its next
calls would do with the handles it still holds (waits `_pp_send_work`, reaps `_pending_isends`):
the server goes on, so the run's boundary leaves no handle unwaited.

One module because the repository keeps one file per modelled system (`models/`, what `streamsim
run FILE` loads) and its parts (scheduler, GroupCoordinator, model runner, six worker variants,
engine loop) only mean something together; it reads in four sections: parameters and cost model;
the upstream classes it mirrors; the engine loop; build.

For tests: :func:`workers_of` returns the Worker objects of a Simulation built by :func:`build`;
every Worker keeps ``calls`` (one :class:`Call` per `execute_model`: the action log, the handles
returned, ``_pp_send_work`` after the call). :func:`seed_unit_test` runs PR #54962's unit test on
the model.
"""
from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from greenlet import getcurrent

from streamsim import ModelError, Param, Params, Simulation
from streamsim import during  # (the access-window helper)

MiB = 1 << 20


# =============================================================================================
# Parameters and cost model
# =============================================================================================
PARAMS = [
    # -- deployment ------------------------------------------------------------------------------
    Param("pp", int, 4, "pipeline-parallel stages (pipeline_parallel_size, >= 2)"),
    Param("tp", int, 1, "tensor-parallel ranks per stage; each sends 1/tp of every tensor and the "
          "receiving stage all-gathers on its TP group"),
    Param("p2p_streams", str, "per_pair", "NCCL stream of the PP group's isend/irecv: per_pair (a "
          "lazily initialised group, vLLM's default new_group without device_id: one 2-rank "
          "communicator and stream per pair) or per_group (an eagerly initialised group, e.g. "
          "VLLM_DISTRIBUTED_USE_SPLIT_GROUP=1: one stream, FIFO for every p2p op of the rank)",
          ("per_pair", "per_group")),
    # -- workload -------------------------------------------------------------------------------
    Param("prompt_tokens", int, 12288, "prompt length of every request (prefilled in chunks)"),
    Param("chunk_tokens", int, 8192, "the scheduler's token budget per step "
          "(max_num_batched_tokens; 8192 on H100/H200): prompts are prefilled in chunks of it"),
    Param("decode_steps", int, 8, "decode steps of every request after its prefill"),
    Param("requests", int, 4, "concurrent requests (the same prompt and decode length)"),
    Param("arrival_steps", int, 0, "request r arrives at scheduler step r * arrival_steps (0: all "
          "at the start; 1 with short prompts: requests at different phases, a full pipeline)"),
    # -- model slice ------------------------------------------------------------------------------
    Param("hidden_size", int, 8192, "hidden size (8192: a 70B-class model)"),
    Param("layers", int, 20, "decoder layers per stage (80 layers / pp 4): sets the access windows "
          "(inputs read in the first 1/layers, outputs written in the last)"),
    Param("dtype_bytes", int, 2, "bytes per element (2: bf16)"),
    # -- where the sent tensors live ---------------------------------------------------------------
    Param("cudagraph_max_tokens", int, 512, "max_cudagraph_capture_size: batches up to it replay a "
          "CUDA graph (FULL for decode-only, outputs in persistent buffers; PIECEWISE otherwise, "
          "outputs in the shared graph pool); larger ones run eagerly, outputs in fresh blocks "
          "(512: the H100/H200 default; 8192: SM100 prefill graphs; 0: enforce_eager)"),
    Param("residual_in_place", bool, True, "in-place fused_add_rms_norm (the vllm_c kernel without "
          "Inductor; Inductor's maybe_inplace may reuse the donated input too): an eager step's "
          "outgoing residual on a non-first stage is the runner's persistent receive buffer, "
          "rewritten by the next step's copy_ (True: the one modelled placement under which a "
          "lone 8.2k-12k prompt is corrupted and shorter ones are not, as PR #54962 reports)"),
    # -- the design under test ---------------------------------------------------------------------
    Param("topology", str, "linear", "linear pipeline, or fold_back: the last stage also sends its "
          "outputs back to stage 0, which receives them pp-1 iterations later (virtual pipeline)",
          ("linear", "fold_back")),
    Param("ring_slots", int, 3, "K: send-ring slots of copy_before_send / ring_no_wait (a slot is "
          "reused K steps later)"),
    Param("max_inflight", int, 0, "batches in flight in the engine loop (0 = pp + 1: vLLM's "
          "max_concurrent_batches with async scheduling, on by default; pp without it)"),
    Param("nccl_eager_bytes", int, 4 * MiB, "NCCL p2p sends up to this size complete without the "
          "receiver (they fit the peer's staging buffer, NCCL_BUFFSIZE = 4 MiB; not guaranteed "
          "by NCCL); larger ones are rendezvous"),
    Param("gloo_eager_bytes", int, 0, "gloo object sends up to this size complete without the "
          "receiver (0: gloo's Pair::send waits for the peer's receive at every size)"),
    Param("metadata_bytes", int, 512, "pickled metadata list of a tensor dict (keys, dtypes, shapes)"),
    # -- costs (microseconds; bandwidths in gigabytes per second) ------------------------------------
    Param("forward_fixed_us", float, 10000.0, "per-step forward cost independent of tokens (reading "
          "the stage's ~35 GB of weights), divided by tp"),
    Param("forward_us_per_token", float, 55.0, "forward cost per scheduled token (~35 GFLOP per "
          "token per stage), divided by tp"),
    Param("sample_us", float, 1500.0, "last stage: compute_logits + sampler kernels"),
    Param("prepare_inputs_us", float, 400.0, "host time per step to build the input tensors "
          "(_prepare_inputs)"),
    Param("launch_us", float, 80.0, "host time to launch the forward"),
    Param("copy_us_per_mb", float, 0.8, "device-to-device copy cost per MiB (intermediate tensors "
          "into the runner's persistent buffers; outputs into a send-ring slot)"),
    Param("nccl_latency_us", float, 15.0, "NCCL p2p and all-gather latency"),
    Param("nccl_gb_per_s", float, 50.0, "NCCL p2p bandwidth between stages (GB/s; 50: one "
          "InfiniBand NDR port per GPU, stages on different nodes; NVLink 4 is ~200-450)"),
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
    "wait_after_send": "wait the tensor handles right after sending: the compute stream waits for "
                       "the send before the next step's work (the host does not block)",
}

BASELINE = "regressed_49274"  # `streamsim compare` costs each variant against the fastest wrong one

ENGINE_MSG_BYTES = 64  # the engine loop's "step done" message (token ids of a few requests)


def forward_us(p, tokens: int) -> float:
    """A stage's forward: weights read once per step plus a per-token cost, split across tp."""
    return (p.forward_fixed_us + p.forward_us_per_token * tokens) / p.tp


def copy_us(p, nbytes: int) -> float:
    return p.copy_us_per_mb * nbytes / MiB


# =============================================================================================
# The upstream classes: tensors and handles as the worker code holds them
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
# The upstream classes: vllm/distributed/parallel_state.py
# =============================================================================================
class GroupCoordinator:
    """The PP group of one rank (PR #49274 and later: non-blocking metadata).

    ``device_group`` is NCCL (its p2p streams per ``p2p_streams``), ``cpu_group`` gloo.
    """

    def __init__(self, worker: "Worker", ranks: list[int], rank_in_group: int,
                 is_first_rank: bool, is_last_rank: bool, device_group: str):
        self.worker = worker
        self.host = worker.host
        self.ranks = ranks
        self.rank_in_group = rank_in_group
        self.world_size = len(ranks)
        self.is_first_rank, self.is_last_rank = is_first_rank, is_last_rank
        self.device_group = self.host.group(device_group)
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
    def device_isend(self, tensor: Tensor, dst: int) -> Handle:
        """``torch.distributed.isend(tensor, dst, group=device_group)``: reads ``tensor`` for the
        whole transfer, on the group's p2p stream (which first waits for the current stream)."""
        work = self.device_group.isend(tensor.view, dst)  # every tensor's send: one model line
        return Handle(self.worker, work, "tensor", self.worker.step, [tensor])

    def device_recv(self, tensor: Tensor, src: int) -> None:
        """``torch.distributed.recv``: irecv, then ``wait()``: the current stream waits, not the host."""
        self.device_group.irecv(tensor.view, src).wait()

    def _reap_completed_isends(self) -> None:
        """vLLM 0.34.0: drop completed entries oldest first. Once every tensor handle of the oldest
        entry reports ``is_completed()``, wait its metadata handle (gloo: the host blocks until the
        receiver's ``recv_object`` has taken it) to drop the retained refs; entries without tensor
        handles are dropped without waiting. It keeps the tensors' storage alive until then; it
        orders nothing the next forward depends on."""
        while self._pending_isends:
            handles, tensors = self._pending_isends[0]
            tensor_handles = handles[1:]
            if not tensor_handles:
                self._pending_isends.popleft()
                continue
            if not all(h.is_completed() for h in tensor_handles):
                break  # the oldest send is still in flight: FIFO, the rest are no further along
            handles[0].work.wait()  # (the Work itself: the worker's call log shows its own waits)
            self._pending_isends.popleft()
            self.worker.release(tensors)

    def drain_pending_isends(self) -> None:
        """The run's end: what later ``_reap_completed_isends`` calls would do with what is left."""
        while self._pending_isends:
            handles, tensors = self._pending_isends.popleft()
            for handle in handles[1:]:
                handle.work.wait()
            handles[0].work.wait()
            self.worker.release(tensors)

    def isend_tensor_dict(self, tensor_dict: dict[str, Tensor], dst: int | None = None,
                          all_gather_group: "TPGroup | None" = None) -> list[Handle]:
        """PR #49274: send the metadata without blocking, then one NCCL isend per tensor; returns
        ``[metadata_handle, *tensor_handles]`` (also kept in ``_pending_isends``)."""
        self._reap_completed_isends()
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
# The upstream classes: the GPU model runner (vllm/v1/worker/gpu/model_runner.py)
# =============================================================================================
class IntermediateTensors:
    def __init__(self, tensors: dict[str, Tensor]):
        self.tensors = tensors


class ModelRunnerOutput:
    def __init__(self, step: int):
        self.step = step


FULL, PIECEWISE, NONE = "FULL", "PIECEWISE", "NONE"  # CUDAGraphMode of a batch
OUTPUT_KEYS = ("hidden_states", "residual")


class GPUModelRunner:
    """One stage's layers and where their outputs live (see the module docstring):

    * ``cudagraph_outputs.*``: a FULL graph's persistent outputs, written at the end of its replay;
    * ``cudagraph_pool``: the global graph pool; a PIECEWISE graph's outputs live in it and every
      replay (FULL or PIECEWISE) may reuse any of it during its whole forward;
    * fresh blocks (``hidden_states@n``, ``residual@n``) for a batch that runs eagerly;
    * ``intermediate_tensors.*`` (non-first stages): the persistent buffers received tensors are
      copied into; the eager residual *is* that buffer with ``residual_in_place``.
    """

    def __init__(self, worker: "Worker", prefix: str, cluster: "Cluster"):
        self.worker = worker
        p, host = worker.p, worker.host
        self.prefix = prefix
        row = p.hidden_size * p.dtype_bytes
        self.row_bytes = row
        self.graph_outputs = {k: host.buffer(f"{prefix}cudagraph_outputs.{k}",
                                             cluster.full_tokens * row, worker.compute)
                              for k in OUTPUT_KEYS}
        self.graph_pool = host.buffer(f"{prefix}cudagraph_pool", 2 * cluster.pool_tokens * row,
                                      worker.compute)
        self.intermediate_tensors = None
        if not worker.pp_group.is_first_rank:
            self.intermediate_tensors = {
                k: host.buffer(f"{prefix}intermediate_tensors.{k}", cluster.max_tokens * row,
                               worker.compute)
                for k in OUTPUT_KEYS}

    def _view(self, buf, num_tokens: int, slot: int = 0) -> Tensor:
        """``num_tokens`` rows of ``buf``, the ``slot``-th such block (two outputs in the pool)."""
        n = num_tokens * self.row_bytes
        return Tensor(buf, slot * n, n, self.worker.p.dtype_bytes)

    def cudagraph_mode(self, batch: "Batch") -> str:
        """``FULL_AND_PIECEWISE``: FULL for a decode-only batch, PIECEWISE for prefill or mixed,
        NONE (eager) above ``max_cudagraph_capture_size``."""
        if batch.tokens > self.worker.p.cudagraph_max_tokens:
            return NONE
        return FULL if batch.decode_only else PIECEWISE

    def copy_intermediate_tensors(self, num_tokens: int,
                                  intermediate_tensors: IntermediateTensors) -> dict[str, Tensor]:
        """``v[:n].copy_(intermediate_tensors.tensors[k][:n])``: into the persistent buffers."""
        host, p = self.worker.host, self.worker.p
        out = {}
        for k, v in intermediate_tensors.tensors.items():
            dst = self._view(self.intermediate_tensors[k], num_tokens)
            host.copy(dst.view, v.view, dur=copy_us(p, v.nbytes), name=f"copy_ into {dst.buf.name}")
            out[k] = dst
        return out

    def _output_tensors(self, num_tokens: int, mode: str, inputs: dict[str, Tensor] | None):
        """The tensors the forward returns, and so the ones a non-last stage sends."""
        if mode == FULL:
            return {k: self._view(self.graph_outputs[k], num_tokens) for k in OUTPUT_KEYS}
        if mode == PIECEWISE:
            return {k: self._view(self.graph_pool, num_tokens, i)
                    for i, k in enumerate(OUTPUT_KEYS)}
        out = {"hidden_states": self.worker.empty(f"{self.prefix}hidden_states",
                                                  num_tokens * self.row_bytes)}
        if self.worker.p.residual_in_place and inputs is not None:
            out["residual"] = inputs["residual"]  # fused_add_rms_norm updated the receive buffer
        else:
            out["residual"] = self.worker.empty(f"{self.prefix}residual",
                                                num_tokens * self.row_bytes)
        return out

    def _accesses(self, mode: str, inputs: dict[str, Tensor] | None, outputs: dict[str, Tensor]):
        """Reads and writes of the forward, with their windows (fractions of its duration)."""
        last = 1.0 / self.worker.p.layers  # the share of one layer
        reads = [t.during(0.0, last) for t in (inputs or {}).values()]  # layer 0's input norm
        if mode == NONE:
            hidden, residual = outputs["hidden_states"], outputs["residual"]
            in_place = inputs is not None and residual is inputs.get("residual")
            return reads, [hidden.during(1.0 - last / 2, 1.0),  # the last layer's MLP
                           # the last post-attention norm; in place: every norm from layer 0 on
                           residual.during(0.0 if in_place else 1.0 - last, 1.0 - last / 2)]
        writes = [during(self.graph_pool, 0.0, 1.0)]  # any replay may reuse any of the pool
        if mode == FULL:  # outputs copied into the persistent buffers at the end of the replay
            writes += [t.during(1.0 - last / 2, 1.0) for t in outputs.values()]
        return reads, writes

    def execute_model(self, batch: "Batch",
                      intermediate_tensors: IntermediateTensors | None = None):
        worker, host, p = self.worker, self.worker.host, self.worker.p
        num_tokens = batch.tokens
        host.host_work("_prepare_inputs", dur=p.prepare_inputs_us)
        inputs = None
        if intermediate_tensors is not None:
            inputs = self.copy_intermediate_tensors(num_tokens, intermediate_tensors)
        mode = self.cudagraph_mode(batch)
        outputs = self._output_tensors(num_tokens, mode, inputs)
        reads, writes = self._accesses(mode, inputs, outputs)
        worker.log("forward")
        host.sleep(p.launch_us, "launch forward (eager)" if mode == NONE else
                   f"launch forward ({mode} CUDA graph replay)")
        dur = forward_us(p, num_tokens)
        host.launch(f"{self.prefix}forward", reads=reads, writes=writes, dur=dur)  # one model line
        if intermediate_tensors is not None:  # the received tensors are dropped (torch.empty blocks)
            worker.release(intermediate_tensors.tensors.values())
        if not worker.pp_group.is_last_rank:
            return IntermediateTensors(outputs)
        # last rank: logits and sampling; `sampled_token_ids.tolist()` syncs the host with the stream
        host.launch(f"{self.prefix}compute_logits+sample",
                    reads=[outputs["hidden_states"].view], dur=p.sample_us)
        worker.compute.synchronize()
        worker.release(outputs.values())
        return ModelRunnerOutput(batch.step)


# =============================================================================================
# The upstream classes: vllm/v1/worker/gpu_worker.py and the proposed alternatives
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
    """The GPU worker of one rank (one virtual chunk of it, with ``topology=fold_back``)."""

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
        self.pp_group = self.coordinator(self, column, stage, is_first, is_last,
                                         pp_group_name(p, tp_rank))
        self.tp_group = (TPGroup(self, [stage * p.tp + r for r in range(p.tp)], tp_rank)
                         if p.tp > 1 else None)
        self.model_runner = GPUModelRunner(self, "v1." if chunk else "", cluster)

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

    def __call__(self, batch: "Batch"):
        """The executor's call: ``execute_model`` plus the bookkeeping tests read (``calls``)."""
        self.step = batch.step
        _CURRENT_WORKER[getcurrent()] = self
        self.calls.append(Call(self.step, host_time=self.host.now))
        output = self.execute_model(batch)
        self.calls[-1].pp_send_work = list(self._pp_send_work)
        return output

    def execute_model(self, scheduler_output: "Batch"):
        raise NotImplementedError

    def shutdown(self) -> None:
        """The end of the run (the server goes on): what its next calls would do with the handles
        it still holds, the next ``execute_model``'s wait of ``_pp_send_work`` and later reaps of
        ``_pending_isends`` (through the Works: no call of this run logs them)."""
        _CURRENT_WORKER[getcurrent()] = self
        for handle in self._pp_send_work:
            handle.work.wait()
        self.release(t for h in self._pp_send_work for t in h.tensors)
        self._pp_send_work = []
        self.pp_group.drain_pending_isends()


class WorkerPre49274(Worker):
    coordinator = GroupCoordinatorPre49274

    def execute_model(self, scheduler_output: "Batch") -> ModelRunnerOutput | None:
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
    def execute_model(self, scheduler_output: "Batch") -> ModelRunnerOutput | None:
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
    def execute_model(self, scheduler_output: "Batch") -> ModelRunnerOutput | None:
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
    """K static send slots (``ring_slots``), each sized for the largest batch."""

    def __init__(self, worker: Worker):
        self.worker = worker
        p, host = worker.p, worker.host
        row = p.hidden_size * p.dtype_bytes
        prefix = worker.model_runner.prefix
        self.slots = [{k: host.buffer(f"{prefix}send_ring[{i}].{k}", worker.cluster.max_tokens * row,
                                      worker.compute) for k in OUTPUT_KEYS}
                      for i in range(p.ring_slots)]
        self.pending: list[list[Handle]] = [[] for _ in range(p.ring_slots)]

    def slot(self, step: int) -> int:
        return step % len(self.slots)

    def copy_(self, index: int, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
        """Copy the outputs into slot ``index`` on the compute stream; return the copies."""
        worker, host, p = self.worker, self.worker.host, self.worker.p
        out = {}
        for k, v in tensors.items():
            dst = Tensor(self.slots[index][k], 0, v.nbytes, p.dtype_bytes)
            host.copy(dst.view, v.view, dur=copy_us(p, v.nbytes), name=f"copy_ into {dst.buf.name}")
            out[k] = dst
        worker.release(tensors.values())  # the forward's own outputs are dropped after the copy
        return out


class WorkerCopyBeforeSend(Worker):
    wait_slot = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._send_ring = _SendRing(self)

    def execute_model(self, scheduler_output: "Batch") -> ModelRunnerOutput | None:
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
    def execute_model(self, scheduler_output: "Batch") -> ModelRunnerOutput | None:
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
# The engine loop: scheduler, batches in flight, one host program per rank
# =============================================================================================
@dataclass(frozen=True)
class Batch:
    """One scheduled batch (a ``SchedulerOutput``): what the engine hands every rank for a step."""

    step: int  # its index among the batches the engine runs
    total_num_scheduled_tokens: int
    prefill_tokens: int  # prompt tokens in it (chunks of requests still prefilling)
    decodes: int  # requests with one decode token in it
    needs: int = -1  # the latest batch whose sampled tokens its decodes need (-1: none)

    @property
    def tokens(self) -> int:
        return self.total_num_scheduled_tokens

    @property
    def decode_only(self) -> bool:
        return self.prefill_tokens == 0


def schedule(p) -> list[Batch]:
    """The batches vLLM's scheduler makes of this workload (``vllm/v1/core/sched/``): a budget of
    ``chunk_tokens`` per scheduler step, requests in arrival order (running before waiting);
    a request's next prefill chunk in the very next step; its first decode ``pp`` steps after its
    last chunk and each later decode ``pp`` steps after the previous (``decode_stagger``). A step
    with nothing eligible runs no batch (the engine waits for a batch to come back)."""
    prefill_left = [p.prompt_tokens] * p.requests
    decode_left = [p.decode_steps] * p.requests
    eligible = [0] * p.requests  # the first scheduler step a request may decode in
    last = [-1] * p.requests  # the batch that sampled its latest token
    batches: list[Batch] = []
    step = 0
    while any(prefill_left) or any(decode_left):
        budget, prefill, decodes, needs, b = p.chunk_tokens, 0, 0, -1, len(batches)
        for r in range(p.requests):
            if step < r * p.arrival_steps:
                break  # not arrived yet (nor any later request)
            if prefill_left[r] and budget:
                n = min(prefill_left[r], budget)
                prefill_left[r] -= n
                budget, prefill = budget - n, prefill + n
                if not prefill_left[r]:  # the last chunk samples the first token
                    eligible[r], last[r] = step + p.pp, b
            elif not prefill_left[r] and decode_left[r] and budget and step >= eligible[r]:
                decode_left[r] -= 1
                budget, decodes, needs = budget - 1, decodes + 1, max(needs, last[r])
                eligible[r], last[r] = step + p.pp, b
        if prefill or decodes:
            batches.append(Batch(b, prefill + decodes, prefill, decodes, needs))
        step += 1
    return batches


def pp_group_name(p, tp_rank: int) -> str:
    """The PP group of a TP rank's column of stages (vLLM's ``pp`` group; one per TP rank)."""
    return "pp" if p.tp == 1 else f"pp.tp{tp_rank}"


class Cluster:
    """What the ranks share: parameters, the schedule, and the metadata objects in flight."""

    def __init__(self, p, variant: str):
        self.p, self.variant = p, variant
        self.batches = schedule(p)
        self.max_tokens = max((b.tokens for b in self.batches), default=1)
        graphs = [b for b in self.batches if b.tokens <= p.cudagraph_max_tokens]
        self.full_tokens = max([b.tokens for b in graphs if b.decode_only] + [1])
        self.pool_tokens = max([b.tokens for b in graphs] + [1])
        self.max_inflight = p.max_inflight or p.pp + 1
        self.fold_lag = p.pp - 1  # fold_back: stage 0 runs batch b's last chunk in iteration b + pp-1
        self._mail: dict[tuple[int, int], deque] = {}
        self.freed: dict[int, set[str]] = {}  # rank -> fresh blocks already given back
        self.allocations: dict[int, int] = {}  # rank -> fresh blocks allocated so far (for names)
        self.workers: dict[int, list[Worker]] = {}

    def mailbox(self, src: int, dst: int) -> deque:
        return self._mail.setdefault((src, dst), deque())


def worker_main(host, cluster: Cluster, stage: int, tp_rank: int) -> None:
    """A rank's host thread: the executor hands it one batch per engine step.

    Stage 0 starts batch b once it has heard that batch b - max_inflight (the in-flight bound of
    ``step_with_batch_queue``) and the batch that sampled its decodes' tokens are done: the last
    stage's host sends "step done" after ``sampled_token_ids.tolist()`` (a stream synchronize) on
    the ``engine`` channel (vLLM's shared-memory output queue, never rendezvous). With
    ``topology=fold_back`` stage 0 finishes the batches itself and runs them back to back.
    """
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
    lag, inflight, batches = cluster.fold_lag, cluster.max_inflight, cluster.batches
    heard = -1  # stage 0: the last batch it has heard is done

    for batch in batches:
        host.step = batch.step
        if stage == 0 and not fold:
            # step_with_batch_queue: the queue has room, and the decodes' tokens are back
            while heard < max(batch.step - inflight, batch.needs):
                heard += 1
                engine.recv_object(last_rank, name=f"recv step {heard} done")
        output = worker(batch)
        if virtual is not None and batch.step >= lag:
            virtual(batches[batch.step - lag])
        if isinstance(output, ModelRunnerOutput) and not fold:
            engine.send_object(ENGINE_MSG_BYTES, first_rank, name=f"send step {batch.step} done")
    # drain: the engine collects the batches still in flight
    T = len(batches)
    for t in range(T, T + (lag if virtual is not None else 0)):
        host.step = t
        virtual(batches[t - lag])
    if stage == 0 and not fold:
        host.step = T
        while heard < T - 1:
            heard += 1
            engine.recv_object(last_rank, name=f"recv step {heard} done")
    for w in workers:
        w.shutdown()


# =============================================================================================
# Build
# =============================================================================================
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
    for r in range(p.tp):
        sim.group(pp_group_name(p, r), [s * p.tp + r for s in range(p.pp)], "nccl",
                  latency=p.nccl_latency_us, bandwidth=p.nccl_gb_per_s * 1e3,
                  eager_bytes=p.nccl_eager_bytes, p2p_streams=p.p2p_streams)
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
    for name in ("decode_steps", "arrival_steps", "max_inflight", "nccl_eager_bytes",
                 "gloo_eager_bytes", "metadata_bytes", "cudagraph_max_tokens"):
        need(p[name] >= 0, f"{name}={p[name]}: must be >= 0")
    for prm in PARAMS:
        if prm.type is float:
            need(p[prm.name] >= 0, f"{prm.name}={p[prm.name]}: must be >= 0")
    for name in ("nccl_gb_per_s", "tp_gb_per_s", "gloo_gb_per_s"):
        need(p[name] > 0, f"{name}={p[name]}: must be > 0")
    if p.topology == "fold_back":
        need((p.max_inflight or p.pp + 1) >= p.pp, f"max_inflight={p.max_inflight}: fold_back runs "
             "a batch's last chunk pp-1 iterations later, so it needs max_inflight >= pp")


# =============================================================================================
# For tests
# =============================================================================================
def workers_of(sim: Simulation) -> dict[int, list[Worker]]:
    """rank -> its Worker objects (two on stage 0 with fold_back), for a Simulation built here."""
    return _WORKERS[sim].workers


def params(overrides: dict | None = None) -> Params:
    """Default parameter values with ``overrides`` applied (a streamsim Params mapping)."""
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
    call.handles[1:]``; the worker never waits ``call.handles[0]`` (the metadata handle): the
    reaper does, once the tensor handles completed."""
    trace, workers = run("fixed_54962", overrides)
    worker = workers[0][0]
    call = next(c for c in worker.calls if c.step == step)
    return trace, worker, call
