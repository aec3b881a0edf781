"""models/vllm_pp.py against the domain note's expected outcomes (docs/models/vllm-pp.md).

Rows of the note's table, at the defaults (pp=4, tp=1, 12k-token prompt, chunk 8192, cudagraph) and over
the grid pp {2, 4} x tp {1, 2} x prompt {2048, 12288} x buffer placement {cudagraph, persistent,
allocator}; the decode-only latent case; the fold-back deadlock; the PR #54962 unit test on the model and
the happens-before property it cannot check.

Hazard kinds follow issue order (SEMANTICS.md): the send of step t is issued before the forward of
step t+1, so every such pair is a WAR with the send first, even where the forward started first
(the send sat behind an earlier rendezvous send on its comm stream).
"""
from __future__ import annotations

import functools
import itertools
import os

import pytest

from streamsim import ModelError, simulate
from streamsim.analysis.hb import analyse
from streamsim.analysis.liveness import deadlock_from_stall
from streamsim.sim.model import load_model

MODEL_PATH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models", "vllm_pp.py")
MODEL = load_model(MODEL_PATH)
VPP = MODEL.module

SAFE = ("pre_49274", "fixed_54962", "copy_before_send", "wait_after_send")
ALL = tuple(VPP.VARIANTS)


@functools.lru_cache(maxsize=None)
def _run(variant: str, sets: tuple):
    trace = simulate(MODEL, variant, dict(sets))
    return trace, analyse(trace).hazards


def run(variant: str, **sets):
    return _run(variant, tuple(sorted(sets.items())))


def params(**sets):
    return MODEL.resolve(sets)


def non_last_stages(p) -> range:
    return range(p.pp - 1)


def stage_of(rank: int, p) -> int:
    return rank // p.tp


def send_and_other(trace, h):
    """(the isend op, the other op) of a hazard, or (None, None) when no isend is involved."""
    a, b = trace.op(h.first), trace.op(h.second)
    if a.kind == "isend":
        return a, b
    if b.kind == "isend":
        return b, a
    return None, None


def is_forward(op) -> bool:
    return op.kind == "launch" and op.name.endswith("forward")


def assert_clean_end(trace):
    assert trace.stall is None, trace.stall
    assert not [n for n in trace.notes if n.kind == "unmatched-send"], trace.notes


# -- the model file ----------------------------------------------------------------------------------
def test_variants_and_params_are_declared_in_order_with_help():
    assert list(VPP.VARIANTS) == ["pre_49274", "regressed_49274", "fixed_54962", "copy_before_send",
                                  "ring_no_wait", "wait_after_send"]
    assert all(VPP.VARIANTS.values())
    names = [p.name for p in VPP.PARAMS]
    for name in ("pp", "tp", "prompt_tokens", "chunk_tokens", "decode_steps", "requests",
                 "hidden_size", "layers", "dtype_bytes", "buffer_placement", "topology",
                 "ring_slots", "max_inflight", "nccl_eager_bytes", "gloo_eager_bytes"):
        assert name in names
    assert all(p.help for p in VPP.PARAMS)
    p = params()
    assert (p.pp, p.tp, p.prompt_tokens, p.chunk_tokens, p.buffer_placement) == \
        (4, 1, 12288, 8192, "cudagraph")
    assert MODEL.params["buffer_placement"].choices == ("cudagraph", "persistent", "allocator")
    assert MODEL.params["topology"].choices == ("linear", "fold_back")


def test_default_sizes_straddle_the_eager_thresholds():
    p = params()
    row = p.hidden_size * p.dtype_bytes
    assert p.chunk_tokens * row > p.nccl_eager_bytes  # chunked-prefill sends are rendezvous
    assert row * p.requests <= p.nccl_eager_bytes  # decode sends are eager
    assert 16 * row * p.requests <= p.nccl_eager_bytes  # so is a 16-token prefill
    assert p.metadata_bytes > p.gloo_eager_bytes  # a blocking metadata send_object waits
    assert VPP.ENGINE_MSG_BYTES <= p.gloo_eager_bytes  # the engine loop's message never does


def test_schedule_chunks_the_prompt_then_decodes():
    assert VPP.schedule(params()) == [8192, 4096] + [1] * 8
    assert VPP.schedule(params(requests=2)) == [8192, 8192, 8192] + [2] * 8
    assert VPP.schedule(params(prompt_tokens=16, decode_steps=2, requests=3)) == [48, 3, 3]


@pytest.mark.parametrize("sets, message", [
    ({"pp": 1}, "pp=1"),
    ({"hidden_size": 8191, "tp": 2}, "hidden_size=8191"),
    ({"topology": "fold_back", "max_inflight": 2}, "max_inflight=2"),
    ({"ring_slots": 0}, "ring_slots=0"),
])
def test_bad_parameters_are_one_line_model_errors(sets, message):
    with pytest.raises(ModelError, match=message):
        simulate(MODEL, "fixed_54962", sets)


# -- the expected-outcomes table at the defaults ----------------------------------------------------------
@pytest.mark.parametrize("variant", ALL)
def test_every_linear_variant_ends_cleanly_at_the_defaults(variant):
    trace, _ = run(variant)
    assert_clean_end(trace)


@pytest.mark.parametrize("variant", SAFE)
def test_safe_variants_have_no_data_hazard_at_the_defaults(variant):
    _, hazards = run(variant)
    assert hazards == []


def regressed_pairs(trace, hazards, p):
    """Per non-last stage: the (send step, forward step) pairs with a hazard, and the manifest WARs."""
    pairs, manifest_war = {}, {}
    for h in hazards:
        send, other = send_and_other(trace, h)
        assert send is not None, f"unexpected hazard {h}"
        assert other.step > send.step, (send.describe(), other.describe())
        assert (h.kind, trace.op(h.first)) == ("WAR", send), h  # issued first: the send
        assert other.agent.name == "compute" and other.agent.rank == send.agent.rank
        assert h.buffer in ("hidden_states", "residual", "intermediate_tensors.residual")
        stage = stage_of(h.rank, p)
        if is_forward(other):
            pairs.setdefault(stage, set()).add((send.step, other.step))
        if h.manifest:
            manifest_war.setdefault(stage, []).append(h)
    return pairs, manifest_war


def test_regressed_49274_has_a_manifest_war_on_every_non_last_stage():
    trace, hazards = run("regressed_49274")
    p = params()
    pairs, manifest_war = regressed_pairs(trace, hazards, p)
    for stage in non_last_stages(p):
        assert any(f == s + 1 for s, f in pairs[stage]), (stage, pairs[stage])
        assert manifest_war.get(stage), f"stage {stage}: no manifest WAR"
        # the corrupted step is a chunked-prefill send: above the NCCL eager threshold
        assert any(trace.op(h.first).attrs["nbytes"] > p.nccl_eager_bytes
                   for h in manifest_war[stage])
    assert not any(stage_of(h.rank, p) == p.pp - 1 for h in hazards)  # the last stage sends nothing


def test_regressed_49274_is_latent_for_a_decode_only_run():
    sets = {"prompt_tokens": 16, "decode_steps": 32}
    trace, hazards = run("regressed_49274", **sets)
    p = params(**sets)
    assert_clean_end(trace)
    sends = [op for op in trace.ops if op.kind == "isend" and op.agent.kind == "stream"]
    assert sends and all(op.attrs["nbytes"] <= p.nccl_eager_bytes for op in sends)
    pairs, _ = regressed_pairs(trace, hazards, p)
    for stage in non_last_stages(p):
        assert any(f == s + 1 for s, f in pairs[stage])
    assert hazards and not any(h.manifest for h in hazards)


def ring_hazards(trace, hazards, k):
    """Every hazard is a copy into a slot vs the send from that slot k (or 2k, ...) steps earlier:
    a WAR with the send first (issue order), whichever started first."""
    for h in hazards:
        send, other = send_and_other(trace, h)
        assert send is not None, h
        assert (h.kind, trace.op(h.first)) == ("WAR", send), h
        assert other.name.startswith("copy_ into send_ring["), other.describe()
        assert h.buffer.startswith("send_ring[")
        assert (other.step - send.step) % k == 0 and other.step > send.step
    return hazards


def test_ring_no_wait_war_is_latent_at_the_default_ring_and_manifest_with_small_rings():
    p = params()
    assert p.ring_slots < p.pp  # below the engine's in-flight bound: the reuse is unordered
    trace, hazards = run("ring_no_wait")
    assert ring_hazards(trace, hazards, p.ring_slots)
    assert not any(h.manifest for h in hazards)
    for k in (1, 2):
        trace, hazards = run("ring_no_wait", ring_slots=k)
        assert any(h.manifest for h in ring_hazards(trace, hazards, k)), k


def test_a_ring_as_deep_as_the_in_flight_bound_is_ordered_by_the_engine_loop():
    """K >= max_inflight: the slot is reused only after the engine loop saw its batch finish, and that
    message chain (send -> ... -> last stage's sync -> 'step done' -> stage 0) orders the reuse."""
    _, hazards = run("ring_no_wait", ring_slots=4)
    assert hazards == []


def test_copy_before_send_waits_the_slot_it_reuses():
    _, hazards = run("copy_before_send", ring_slots=1)
    assert hazards == []


@pytest.mark.parametrize("variant", ALL)
def test_allocator_placement_is_clean_at_the_defaults(variant):
    trace, hazards = run(variant, buffer_placement="allocator")
    assert_clean_end(trace)
    assert hazards == []
    assert any(op.kind == "free" for op in trace.ops)  # fresh blocks really go back


# -- fold-back (virtual pipeline): the deadlock PR #49274 fixed --------------------------------------------
def test_pre_49274_deadlocks_with_fold_back_through_the_blocking_metadata_sends():
    trace, _ = run("pre_49274", topology="fold_back")
    deadlock = deadlock_from_stall(trace)
    assert deadlock is not None and deadlock.cycle is not None
    p = params()
    hosts = {b.agent for b in deadlock.blocked if b.agent.kind == "host"}
    assert hosts == set(deadlock.cycle) and len(hosts) == p.pp
    for b in deadlock.blocked:
        assert trace.op(b.op).kind == "send_object"
        assert "metadata" in trace.op(b.op).name


def test_pre_49274_deadlocks_with_fold_back_at_pp_2_too():
    trace, _ = run("pre_49274", topology="fold_back", pp=2)
    deadlock = deadlock_from_stall(trace)
    assert deadlock is not None and len(deadlock.cycle) == 2


@pytest.mark.parametrize("variant", [v for v in ALL if v != "pre_49274"])
def test_non_blocking_metadata_variants_do_not_deadlock_with_fold_back(variant):
    trace, hazards = run(variant, topology="fold_back")
    assert_clean_end(trace)
    if variant in SAFE:
        assert hazards == []


def test_regressed_fold_back_corrupts_the_last_stage_too():
    """With fold_back the last stage sends (back to stage 0), so it has the WAR as well."""
    trace, hazards = run("regressed_49274", topology="fold_back")
    p = params()
    assert {stage_of(h.rank, p) for h in hazards} == set(range(p.pp))


def test_wait_after_send_can_hang_a_fold_back_pipeline_on_the_device():
    """Waiting each rendezvous send right away puts its completion in the compute stream; the receiver's
    irecv waits for its own compute stream (ProcessGroupNCCL's enqueue sync), so with more than pp-1
    rendezvous-sized steps the waits close a cycle through every stage's streams. (Not in the note's
    table, which is about linear pipelines; a finding of the model.)"""
    trace, _ = run("wait_after_send", topology="fold_back", requests=4)
    deadlock = deadlock_from_stall(trace)
    assert deadlock is not None and deadlock.cycle is not None
    assert any(a.kind == "stream" for a in deadlock.cycle)


@pytest.mark.parametrize("variant", ["regressed_49274", "fixed_54962", "wait_after_send"])
def test_fold_back_at_pp_2_hangs_every_variant_on_the_shared_pair_communicator(variant):
    """With pp=2 both directions use ranks 0 and 1's one p2p communicator (ProcessGroupNCCL key "0:1"),
    so its stream is FIFO for both: stage 0's fold-back receive queues behind its next rendezvous send,
    stage 1's receive behind its fold-back send. Two rendezvous-sized steps hang the device in every
    variant (metadata handling is not the cause); decode-sized (eager) traffic does not."""
    trace, _ = run(variant, topology="fold_back", pp=2)
    deadlock = deadlock_from_stall(trace)
    assert deadlock is not None
    assert {str(a) for a in deadlock.cycle} == {"rank0/nccl:pp:0-1", "rank1/nccl:pp:0-1"}
    trace, _ = run(variant, topology="fold_back", pp=2, prompt_tokens=16, decode_steps=32)
    assert_clean_end(trace)


# -- the grid ----------------------------------------------------------------------------------------------
# The whole grid of issue 4: pp 2 and 4, tp 1 and 2, prompt 2k and 12k, every buffer placement
# (24 points, about 20 s of CPU), every variant at each point.
PLACEMENTS = ["cudagraph", "persistent", "allocator"]
GRID = list(itertools.product([2, 4], [1, 2], [2048, 12288], PLACEMENTS))


@pytest.mark.parametrize("pp, tp, prompt, placement", GRID)
def test_expected_outcomes_over_the_grid(pp, tp, prompt, placement):
    sets = {"pp": pp, "tp": tp, "prompt_tokens": prompt, "buffer_placement": placement}
    p = params(**sets)
    for variant in ALL:
        trace, hazards = run(variant, **sets)
        assert_clean_end(trace)
        if variant in SAFE or placement == "allocator":
            assert hazards == [], (variant, hazards[:3])
    # regressed: a WAR between the send of step t and the forward of step t+1 on every non-last
    # stage, manifest there (chunked prefill above the eager threshold)
    trace, hazards = run("regressed_49274", **sets)
    if placement != "allocator":
        pairs, _ = regressed_pairs(trace, hazards, p)
        manifest_stages = {stage_of(h.rank, p) for h in hazards if h.manifest}
        for stage in non_last_stages(p):
            assert any(f == s + 1 for s, f in pairs[stage]), (stage, pairs.get(stage))
            assert stage in manifest_stages, stage
    # ring_no_wait with a ring shorter than the in-flight bound: a WAR copy-vs-send K steps earlier
    k = 1
    trace, hazards = run("ring_no_wait", ring_slots=k, **sets)
    assert_clean_end(trace)
    if placement == "allocator":
        assert hazards == []
    else:
        assert ring_hazards(trace, hazards, k)
        assert {stage_of(h.rank, p) for h in hazards} == set(non_last_stages(p))


# -- PR #54962's unit test on the model, and the property it cannot check ----------------------------------
def _ops_by_handle(trace, rank):
    return {op.handle: op for op in trace.ops
            if op.agent.rank == rank and op.agent.kind == "stream" and op.handle}


def _forward(trace, rank, step):
    (op,) = [op for op in trace.ops if op.agent.rank == rank and op.agent.name == "compute"
             and op.name == "forward" and op.step == step]
    return op


def test_seed_unit_test_reproduced_on_the_model():
    trace, worker, call = VPP.seed_unit_test(step=1)
    assert worker.pp_group.is_first_rank
    metadata, *tensor_handles = call.handles
    assert metadata.kind == "metadata" and [h.kind for h in tensor_handles] == ["tensor", "tensor"]
    # wait-previous-tensor-handles, forward, isend
    assert call.log == ["wait:prev-tensor"] * len(tensor_handles) + ["forward", "isend"]
    # the worker keeps exactly handles[1:]
    assert call.pp_send_work == call.handles[1:]
    # the metadata handle is never waited (not at this step, not later, not by the reaper)
    assert not any("metadata" in entry for c in worker.calls for entry in c.log)
    assert all(not c.handles[0].work.waited for c in worker.calls if c.handles)
    by_handle = _ops_by_handle(trace, 0)
    meta_op = by_handle[metadata.work.name]
    assert not any(meta_op.id in op.after for op in trace.ops if op.kind in ("wait", "query"))
    # "with a previous send pending": the waits were issued before the previous sends ended
    prev = next(c for c in worker.calls if c.step == 0)
    waits = [op for op in trace.ops if op.agent == _host(trace, 0) and op.kind == "wait"
             and op.step == 1]
    assert len(waits) == len(prev.handles) - 1
    assert all(w.start < by_handle[h.work.name].end for w in waits for h in prev.handles[1:])


def _host(trace, rank):
    return next(a for a in trace.agents if a.rank == rank and a.kind == "host")


@pytest.mark.parametrize("variant, ordered", [("fixed_54962", True), ("pre_49274", True),
                                             ("wait_after_send", True),
                                             ("regressed_49274", False)])
def test_next_forward_happens_after_the_previous_send(variant, ordered):
    """The property the unit test cannot check: the send of step t happens before the forward of step
    t+1 in the happens-before sense (vector clocks of streamsim.analysis.hb), on every non-last stage."""
    trace, workers = VPP.run(variant)
    hb = analyse(trace, keep_clocks=True).hb
    p = params()
    for stage in non_last_stages(p):
        rank = stage * p.tp
        worker = workers[rank][0]
        by_handle = _ops_by_handle(trace, rank)
        for call in worker.calls[:-1]:
            sends = [by_handle[h.work.name] for h in call.handles if h.kind == "tensor"]
            forward = _forward(trace, rank, call.step + 1)
            assert sends
            assert all(hb.ordered(s.id, forward.id) == ordered for s in sends), \
                (variant, stage, call.step)


def test_runs_are_deterministic():
    for variant in ALL:
        a = simulate(MODEL, variant)
        b = simulate(MODEL, variant)
        assert a.ops == b.ops and a.end_time == b.end_time
