"""models/vllm_async_pinned.py against its note's expected outcomes (docs/models/vllm_async_pinned.md).

One test per row of the note's table: which pinned buffer races with which copy under each
variant, manifest or latent, and what each fix costs in makespan and step latency.
"""
from __future__ import annotations

import functools
import os

import pytest

import streamsim
from streamsim import ModelError

MODEL = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models",
                     "vllm_async_pinned.py")
H2D_WAR = {("WAR", "temperature.cpu", "copy_to_gpu temperature", "_update_states"),
           ("WAR", "input_ids.cpu", "copy_to_gpu input_ids", "_prepare_inputs")}
D2H_RAW = ("RAW", "input_batch.num_accepted_tokens_cpu", "D2H num_accepted_tokens",
           "_build_attention_metadata")



@functools.lru_cache(maxsize=None)
def _report(variant: str, sets: tuple):
    return streamsim.run_model(MODEL, variant, dict(sets), fix_cost=False)


def report(variant: str, **sets):
    return _report(variant, tuple(sorted(sets.items())))


def by_site(variant: str, **sets) -> dict[tuple, object]:
    return {(rc.kind, rc.buffer, rc.first.label, rc.second.label): rc
            for rc in report(variant, **sets).findings.root_causes}


def cost(variant: str, **sets) -> float:
    return report(variant, **sets).metrics.makespan_us / report("racy", **sets).metrics.makespan_us - 1


def test_variants_in_order():
    model = streamsim.load_model(MODEL)
    assert list(model.variants) == ["racy", "event_sync", "double_buffer", "device_side_counts"]
    assert model.module.BASELINE == "racy"


def test_row_racy_two_host_to_device_wars_and_one_device_to_host_raw():
    rcs = by_site("racy")
    assert set(rcs) == H2D_WAR | {D2H_RAW}
    assert rcs[D2H_RAW].latent == 0  # the host reads stale counts at every step after the first
    for key in H2D_WAR:  # the drafter keeps step N's copies queued while the host writes N+1
        assert rcs[key].manifest > rcs[key].latent
    assert report("racy").findings.deadlock is None


def test_row_racy_without_a_drafter_leaves_the_input_races_latent():
    rcs = by_site("racy", draft_us=0.0)
    assert set(rcs) == H2D_WAR | {D2H_RAW}
    for key in H2D_WAR:
        assert rcs[key].manifest == 0
    assert rcs[D2H_RAW].latent == 0


def test_row_event_sync_is_safe_and_the_accepted_counts_event_costs_a_bubble():
    r = report("event_sync")
    assert r.findings.clean
    assert cost("event_sync") > 0.08
    assert r.metrics.mean_step_us > report("racy").metrics.mean_step_us
    assert r.metrics.bubble_share > report("racy").metrics.bubble_share + 0.05


def test_row_double_buffer_is_safe_and_costs_what_event_sync_costs():
    """The input event never stalls the GPU here: the stall is the accepted-counts event."""
    r = report("double_buffer")
    assert r.findings.clean
    assert r.metrics.makespan_us == report("event_sync").metrics.makespan_us
    assert not any(op.name.startswith("prepare_inputs_event") for op in r.trace.ops)


def test_row_device_side_counts_is_safe_at_no_cost():
    assert report("device_side_counts").findings.clean
    assert abs(cost("device_side_counts")) < 0.001


def test_row_three_batches_in_flight_break_double_buffering_without_a_host_wait():
    """max_concurrent_batches=3: a slot comes back after 2 steps but the host only waited step
    N-3's output; double_buffer is still ordered through the accepted-counts event."""
    rcs = by_site("device_side_counts", max_concurrent_batches=3)
    assert {(k[0], k[1]) for k in rcs} == {("WAR", "temperature[0].cpu"),
                                            ("WAR", "temperature[1].cpu"),
                                            ("WAR", "input_ids[0].cpu"), ("WAR", "input_ids[1].cpu")}
    assert report("double_buffer", max_concurrent_batches=3).findings.clean
    assert report("event_sync", max_concurrent_batches=3).findings.clean


def test_bad_parameters_are_one_line_model_errors():
    with pytest.raises(ModelError, match="max_concurrent_batches=0"):
        streamsim.simulate(MODEL, "racy", {"max_concurrent_batches": 0})
