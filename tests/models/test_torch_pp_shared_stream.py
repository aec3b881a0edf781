"""models/torch_pp_shared_stream.py against its note's expected outcomes
(docs/models/torch_pp_shared_stream.md): the lowering reproduces the IR PR #165664 quotes, and one
test per row of the table (bubble, step latency, deadlock; no data hazard anywhere)."""
from __future__ import annotations

import functools
import os

import pytest

import streamsim
from streamsim import ModelError, Params

MODEL = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models",
                     "torch_pp_shared_stream.py")
PP = streamsim.load_model(MODEL).module
ALL = ("shared_stream", "recv_after_forwards_165664", "deferred_recv", "per_pair_streams")
REORDERED = ("recv_after_forwards_165664", "deferred_recv")


@functools.lru_cache(maxsize=None)
def _report(variant: str, sets: tuple):
    return streamsim.run_model(MODEL, variant, dict(sets), fix_cost=False)


def report(variant: str, **sets):
    return _report(variant, tuple(sorted(sets.items())))


def rank0(pp: int, vpp: int = 2, mbs: int = 8) -> list[str]:
    order = PP.pipeline_order_with_comms(Params(pp=pp, stages_per_rank=vpp, microbatches=mbs))
    return [repr(a) for a in order[0]]


# -- the lowering ------------------------------------------------------------------------------
def test_lowering_gives_the_before_ir_of_pr_165664():
    """PR #165664 quotes rank 0 of pp=8 with 2 stages a rank: each RECV of stage 8 right after a
    SEND of stage 0 (the UNSHARD actions it also lists are FSDP's, left out here)."""
    assert rank0(8)[:12] == ["0F0", "0SEND_F0", "8RECV_F0", "0F1", "0SEND_F1", "8RECV_F1",
                             "0F2", "0SEND_F2", "8RECV_F2", "0F3", "0SEND_F3", "8RECV_F3"]


def test_recv_after_forwards_gives_the_now_ir_of_pr_165664():
    order = PP.pipeline_order_with_comms(Params(pp=8, stages_per_rank=2, microbatches=8))
    now = [repr(a) for a in PP.recv_after_forwards(order[0])]
    assert now[:8] == ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "0F2", "0SEND_F2", "0F3", "0SEND_F3"]
    assert sorted(now) == sorted(rank0(8))  # the same actions, only moved


def test_deferred_recv_puts_each_receive_right_before_its_consumer():
    order = PP.pipeline_order_with_comms(Params(pp=4, stages_per_rank=2, microbatches=8))
    for rank, actions in order.items():
        deferred = PP.deferred_recv(actions)
        assert sorted(map(repr, deferred)) == sorted(map(repr, actions))
        for i, a in enumerate(deferred):
            if a.computation_type in ("RECV_F", "RECV_B"):
                nxt = deferred[i + 1]
                assert (nxt.stage_index, nxt.microbatch_index) == (a.stage_index,
                                                                    a.microbatch_index)
                assert nxt.computation_type == ("F" if a.computation_type == "RECV_F" else "B")


# -- the expected-outcomes table -------------------------------------------------------------------
@pytest.mark.parametrize("variant", ALL)
def test_no_variant_has_a_data_hazard(variant):
    """A performance bug: every stage and microbatch has its own buffers, every wait is there."""
    for sets in ({}, {"activation_mb": 2.0}):
        assert report(variant, **sets).findings.hazards == ()


def test_row_shared_stream_cascades_into_the_bubble():
    shared, pairs = report("shared_stream"), report("per_pair_streams")
    assert shared.findings.deadlock is None and shared.trace.stall is None
    assert shared.metrics.bubble_share > pairs.metrics.bubble_share + 0.10
    assert shared.metrics.mean_step_us > 1.2 * pairs.metrics.mean_step_us


def test_row_per_pair_streams_removes_the_cascade():
    """With a stream per pair of ranks, rank 0's send to rank 1 no longer queues behind its
    receive from rank 3: the bubble is the schedule's own, (pp-1)/(vpp x microbatches) ~ 19%."""
    m = report("per_pair_streams").metrics
    assert m.bubble_share == pytest.approx(3 / 16, abs=0.02)


@pytest.mark.parametrize("variant", REORDERED)
def test_row_reordered_receives_deadlock_when_sends_are_rendezvous(variant):
    """8 MiB activations are above NCCL's buffer: each rank's stream holds a send that waits for a
    receive queued behind the next rank's send, round the ring."""
    d = report(variant).findings.deadlock
    assert d is not None and d.cycle is not None
    assert {str(a) for a in d.cycle} == {f"rank{r}/nccl:pp" for r in range(4)}


def test_row_with_eager_sends_every_fix_gains_and_per_pair_gains_most():
    steps = {v: report(v, activation_mb=2.0).metrics.mean_step_us for v in ALL}
    assert all(report(v, activation_mb=2.0).findings.deadlock is None for v in ALL)
    assert steps["shared_stream"] > steps["recv_after_forwards_165664"] > \
        steps["deferred_recv"] > steps["per_pair_streams"]


def test_row_two_ranks_have_one_pair_so_per_pair_streams_gain_nothing():
    sets = {"pp": 2, "microbatches": 4}
    assert report("per_pair_streams", **sets).metrics.makespan_us == \
        report("shared_stream", **sets).metrics.makespan_us


def test_row_one_stage_a_rank_has_no_cascade():
    """Without the looped schedule a receive is posted right before the forward that needs it."""
    assert report("per_pair_streams", stages_per_rank=1).metrics.makespan_us == \
        report("shared_stream", stages_per_rank=1).metrics.makespan_us


def test_bad_parameters_are_one_line_model_errors():
    with pytest.raises(ModelError, match="microbatches=6"):
        streamsim.simulate(MODEL, "shared_stream", {"microbatches": 6})
