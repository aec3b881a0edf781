"""vLLM async scheduling: pinned host buffers that the device still reads, or has not written yet.

Mirrors `vllm/v1/worker/gpu_model_runner.py` (vllm-project/vllm), class `GPUModelRunner`, with
`--async-scheduling`, a hybrid (Mamba) model and speculative decoding (an MTP/EAGLE drafter), one
GPU worker. With async scheduling the host prepares step N+1 while the GPU still runs step N, so a
pinned (page-locked) CPU tensor reused every step is shared with copies still in flight:

* host-to-device: `_update_states` (via `InputBatch._make_sampling_metadata`, `copy_slice` of
  `temperature_cpu_tensor`) and `_prepare_inputs` (`self.input_ids.copy_to_gpu`, `CpuGpuBuffer` in
  `vllm/v1/utils.py`) rewrite pinned tensors that step N's non-blocking copies may not have read
  yet (PRs #24527 and #25279, "Fix async scheduling CPU tensor race"; #31841 for `is_mm_embed`);
* device-to-host: `_update_states_after_model_execute` copies `num_accepted_tokens` into the pinned
  `input_batch.num_accepted_tokens_cpu_tensor` with `non_blocking=True`, and the next step's
  `_build_attention_metadata` reads it before the copy has landed (PR #36013).

The engine loop is `EngineCore.step_with_batch_queue` with `max_concurrent_batches` batches in
flight: before scheduling step N the host waits for the output of step N - max_concurrent_batches
(`AsyncGPUModelRunnerOutput.get_output`: `async_copy_ready_event.synchronize()` on
`async_output_copy_stream`). That wait is the only thing that orders the host after the device.

Variants:

* ``racy``: neither protection (before #24527/#25279 and #36013);
* ``event_sync``: #25279's `synchronize_input_prep` (`prepare_inputs_event.synchronize()` before
  the reused tensors are written, `record()` after their copies are enqueued) and #36013's
  `num_accepted_tokens_event` (`record()` after the copy, `synchronize()` before the read);
* ``double_buffer``: two pinned buffers per reused input, alternating per step, as #31841 did for
  `is_mm_embed` (and Model Runner V2 does for all inputs); no input event. The device-to-host read
  keeps #36013's event: a second buffer cannot make data that has not landed arrive sooner;
* ``device_side_counts``: the double buffers, and the accepted counts consumed on the device (a
  kernel reads `num_accepted_tokens.gpu` in stream order) instead of read on the host, as current
  vLLM main does under async scheduling and vllm-ascend PR #13153 proposes: nothing to wait for.

Simplifications: a fixed batch (every step the same size); one pinned tensor stands for each
group (`temperature_cpu_tensor` for the sampling tensors, `input_ids` for the `_prepare_inputs`
buffers); the host work of each function is one `host_work` of fixed cost.
"""
from __future__ import annotations

from contextlib import contextmanager

from streamsim import ModelError, Param

PARAMS = [
    Param("steps", int, 8, "engine steps (decode steps of a fixed batch)"),
    Param("max_concurrent_batches", int, 2, "batches in flight in step_with_batch_queue (2 with "
          "async scheduling): the host waits the output of step N - this before scheduling N"),
    Param("num_tokens", int, 192, "scheduled tokens per step (64 requests x (1 + 2 draft tokens))"),
    Param("schedule_us", float, 500.0, "host: Scheduler.schedule() and the hand-off to the worker"),
    Param("get_output_us", float, 200.0, "host: get_output() and update_from_output() of an "
          "earlier step"),
    Param("update_states_us", float, 300.0, "host: _update_states (writes the sampling tensors)"),
    Param("prepare_inputs_us", float, 700.0, "host: _prepare_inputs (writes input_ids etc.)"),
    Param("build_attn_metadata_us", float, 3000.0, "host: _build_attention_metadata after it read "
          "the accepted counts (a hybrid model's many attention groups; vllm-ascend #13153 "
          "measured ~5 ms of such CPU work)"),
    Param("launch_us", float, 100.0, "host: launching the forward (CUDA-graph replay)"),
    Param("forward_us", float, 8000.0, "GPU: the target model's forward"),
    Param("sample_us", float, 300.0, "GPU: sampler and rejection sampler"),
    Param("draft_us", float, 1500.0, "GPU: the drafter (propose_draft_token_ids) after sampling; "
          "0 = no drafter work queued behind the sampler"),
    Param("copy_us", float, 5.0, "GPU: one small host<->device copy (a few KB)"),
]

VARIANTS = {
    "racy": "no event: reused pinned inputs rewritten and accepted counts read with copies in "
            "flight",
    "event_sync": "PR #25279's prepare_inputs_event and PR #36013's num_accepted_tokens_event: "
                  "the host synchronizes before touching the pinned tensors",
    "double_buffer": "two pinned buffers per reused input, alternating per step (PR #31841's "
                     "remedy); the accepted counts keep PR #36013's event",
    "device_side_counts": "double buffers, and the accepted counts used on the GPU in stream "
                          "order (no host read, no host wait)",
}

BASELINE = "racy"

INT32, INT64, FP32 = 4, 8, 4


class CpuGpuBuffer:
    """`vllm/v1/utils.py` CpuGpuBuffer: a pinned CPU tensor and its device twin."""

    def __init__(self, host, name: str, nbytes: int, copy_us: float):
        self.name, self.copy_us = name, copy_us
        self.cpu = host.buffer(f"{name}.cpu", nbytes)
        self.gpu = host.buffer(f"{name}.gpu", nbytes)

    def copy_to_gpu(self, host):
        host.copy(self.gpu, self.cpu, dur=self.copy_us,
                  name=f"copy_to_gpu {self.name}")
        return self.gpu


class GPUModelRunner:
    """The worker's model runner: execute_model + sample_tokens of one step."""

    def __init__(self, host, p, variant: str):
        self.host, self.p, self.variant = host, p, variant
        self.compute = host.current_stream()
        # Separate cuda stream for overlapping transfer of sampled token ids from GPU to CPU
        self.async_output_copy_stream = host.stream("async_output_copy_stream")
        # cuda event to synchronize use of reused CPU tensors between steps
        self.prepare_inputs_event = host.event("prepare_inputs_event")
        self.num_accepted_tokens_event = host.event("num_accepted_tokens_event")
        n = p.num_tokens
        slots = 1 if variant in ("racy", "event_sync") else 2
        # InputBatch.temperature_cpu_tensor / temperature, and the runner's input_ids buffer
        self.temperature = [CpuGpuBuffer(host, f"temperature[{i}]" if slots > 1 else
                                         "temperature", n * FP32, p.copy_us) for i in range(slots)]
        self.input_ids = [CpuGpuBuffer(host, f"input_ids[{i}]" if slots > 1 else "input_ids",
                                       n * INT64, p.copy_us) for i in range(slots)]
        self.num_accepted_tokens = CpuGpuBuffer(host, "num_accepted_tokens", n * INT32, p.copy_us)
        self.num_accepted_tokens_cpu_tensor = host.buffer("input_batch.num_accepted_tokens_cpu",
                                                          n * INT32)
        self.logits = host.buffer("logits", n * 256 * 1024)
        self.draft_token_ids = host.buffer("draft_token_ids", n * INT64)
        self.prev_sampled_token_ids = None

    # -- execute_model ---------------------------------------------------------------------------
    def execute_model(self, step: int):
        host, p = self.host, self.p
        slot = step % len(self.input_ids)
        with self.synchronize_input_prep():
            self._update_states(slot)
            self._prepare_inputs(slot)
            self._build_attention_metadata()
        host.sleep(p.launch_us, "launch forward")
        host.launch("model forward", reads=[self.input_ids[slot].gpu], writes=[self.logits],
                    dur=p.forward_us)

    @contextmanager
    def synchronize_input_prep(self):
        """PR #25279: wait the prior step's input copies before rewriting their CPU tensors."""
        if self.variant != "event_sync":  # (self.prepare_inputs_event is None)
            yield
            return
        # Ensure prior step has finished with reused CPU tensors.
        self.prepare_inputs_event.synchronize()
        try:
            yield
        finally:
            self.prepare_inputs_event.record()

    def _update_states(self, slot: int):
        # InputBatch._make_sampling_metadata: copy_slice(temperature_cpu_tensor, temperature)
        buf = self.temperature[slot]
        self.host.host_work("_update_states", writes=[buf.cpu],
                            dur=self.p.update_states_us)
        buf.copy_to_gpu(self.host)

    def _prepare_inputs(self, slot: int):
        host, buf = self.host, self.input_ids[slot]
        host.host_work("_prepare_inputs", writes=[buf.cpu],
                       dur=self.p.prepare_inputs_us)
        buf.copy_to_gpu(host)
        if self.prev_sampled_token_ids is not None:
            # async scheduling: the previous step's sampled ids are only on the GPU
            host.launch("scatter prev_sampled_token_ids",
                        reads=[self.prev_sampled_token_ids], writes=[buf.gpu], dur=self.p.copy_us)

    def _build_attention_metadata(self):
        host, p = self.host, self.p
        if self.variant == "device_side_counts":
            # the counts stay on the device: a kernel reads them in stream order
            host.launch("fix up num_accepted_tokens", reads=[self.num_accepted_tokens.gpu],
                        dur=p.copy_us)
            host.sleep(p.build_attn_metadata_us, "_build_attention_metadata")
            return
        if self.variant != "racy":
            self.num_accepted_tokens_event.synchronize()  # PR #36013
        host.host_work("_build_attention_metadata", reads=[self.num_accepted_tokens_cpu_tensor],
                       dur=p.build_attn_metadata_us)

    # -- sample_tokens ------------------------------------------------------------------------------------
    def sample_tokens(self, step: int):
        host, p = self.host, self.p
        slot = step % len(self.temperature)
        sampled_token_ids = host.buffer(f"sampled_token_ids (step {step})", self.p.num_tokens * INT64)
        host.launch("sampler + rejection sampler",
                    reads=[self.logits, self.temperature[slot].gpu],
                    writes=[sampled_token_ids, self.num_accepted_tokens.gpu], dur=p.sample_us)
        self._update_states_after_model_execute()
        output = AsyncGPUModelRunnerOutput(self, sampled_token_ids, step)
        self.propose_draft_token_ids(sampled_token_ids)
        self.prev_sampled_token_ids = sampled_token_ids
        return output

    def _update_states_after_model_execute(self):
        if self.variant == "device_side_counts":
            return
        self.host.copy(self.num_accepted_tokens_cpu_tensor, self.num_accepted_tokens.gpu,
                       dur=self.p.copy_us,
                       name="D2H num_accepted_tokens")
        if self.variant != "racy":
            self.num_accepted_tokens_event.record()  # PR #36013

    def propose_draft_token_ids(self, sampled_token_ids):
        self.host.launch("drafter", reads=[sampled_token_ids],
                         writes=[self.draft_token_ids], dur=self.p.draft_us)


class AsyncGPUModelRunnerOutput:
    """The step's output: sampled ids copied to the host on the output copy stream."""

    def __init__(self, runner: GPUModelRunner, sampled_token_ids, step: int):
        host = runner.host
        self.host, self._sampled_token_ids = host, sampled_token_ids
        self.async_copy_ready_event = host.event(f"async_copy_ready_event (step {step})")
        stream = runner.async_output_copy_stream
        with host.use_stream(stream):
            stream.wait_stream(runner.compute)
            self.sampled_token_ids_cpu = host.buffer(f"sampled_token_ids_cpu (step {step})",
                                                     sampled_token_ids.nbytes)
            host.copy(self.sampled_token_ids_cpu, sampled_token_ids, dur=runner.p.copy_us,
                      name="D2H sampled_token_ids")
            self.async_copy_ready_event.record()
        self.get_output_us = runner.p.get_output_us

    def get_output(self):
        host = self.host
        self.async_copy_ready_event.synchronize()
        host.host_work("get_output",
                       reads=[self.sampled_token_ids_cpu], dur=self.get_output_us)
        # Release the device tensor once the copy has completed.
        host.free(self._sampled_token_ids)


def engine_core(host, p, variant: str) -> None:
    """EngineCore.step_with_batch_queue: schedule a step while earlier ones are in flight."""
    runner = GPUModelRunner(host, p, variant)
    in_flight: list[AsyncGPUModelRunnerOutput] = []
    for step in range(p.steps):
        host.step = step
        if len(in_flight) >= p.max_concurrent_batches:
            in_flight.pop(0).get_output()
        host.sleep(p.schedule_us, "Scheduler.schedule()")
        runner.execute_model(step)
        in_flight.append(runner.sample_tokens(step))
    host.step = p.steps
    for output in in_flight:
        output.get_output()


def build(sim, p, variant: str) -> None:
    _check(p)
    sim.spawn(0, engine_core, p, variant)


def _check(p) -> None:
    def need(ok: bool, text: str) -> None:
        if not ok:
            raise ModelError(f"--set {text}")
    for name in ("steps", "max_concurrent_batches", "num_tokens"):
        need(p[name] >= 1, f"{name}={p[name]}: must be >= 1")
    for prm in PARAMS:
        if prm.type is float:
            need(p[prm.name] >= 0, f"{prm.name}={p[prm.name]}: must be >= 0")
