"""models/deepspeed_zero_ipg.py against its note's expected outcomes (docs/models/deepspeed_zero_ipg.md).

One test per row of the note's table, plus the mechanism each row rests on: which IPG slot every
bucket fills under each variant (the ping-pong PR #6993 broke), and that the root causes name the
reduce's kernels on the reduction stream and the gradient copy of the next bucket.
"""
from __future__ import annotations

import functools
import os

import pytest

import streamsim
from streamsim import ModelError

MODEL = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models",
                     "deepspeed_zero_ipg.py")
GRAD_COPY = "new_grad_tensor.copy_"
REDUCE_OPS = {"tensor.div_", "self.flatten", "buf.copy_(synced)",
              "copy_grads_in_partition"}


@functools.lru_cache(maxsize=None)
def _report(variant: str, sets: tuple):
    return streamsim.run_model(MODEL, variant, dict(sets), fix_cost=False)


def report(variant: str, **sets):
    return _report(variant, tuple(sorted(sets.items())))


def slots_filled(variant: str) -> list[str]:
    """The IPG slot each bucket's gradient copies write, bucket by bucket (rank 0, step 0)."""
    trace = report(variant).trace
    out: list[str] = []
    copies = [op for op in trace.ops if op.name == GRAD_COPY and str(op.agent) == "rank0/compute"
              and op.step == 0]
    for k in range(0, len(copies), 4):  # 4 parameters per bucket at the defaults
        slots = {a.view.buffer for a in copies[k].accesses if a.mode == "write"}
        out.append(slots.pop())
    return out


def root_cause_sites(variant: str, **sets) -> set[tuple[str, str, str, str]]:
    return {(rc.kind, rc.buffer, rc.first.label, rc.second.label)
            for rc in report(variant, **sets).findings.root_causes}


# -- the mechanism ---------------------------------------------------------------------------------
def test_variants_are_the_history_in_order():
    model = streamsim.load_model(MODEL)
    assert list(model.variants) == ["pre_5606", "regressed_6993", "overfix_7371", "fixed_7805",
                                    "record_stream_only"]
    assert model.module.BASELINE == "regressed_6993"


@pytest.mark.parametrize("variant, slots", [
    ("pre_5606", ["ipg_buffer[0]", "ipg_buffer[1]", "ipg_buffer[0]", "ipg_buffer[1]"]),
    ("fixed_7805", ["ipg_buffer[0]", "ipg_buffer[1]", "ipg_buffer[0]", "ipg_buffer[1]"]),
    ("regressed_6993", ["ipg_buffer[0]", "ipg_buffer[1]", "ipg_buffer[1]", "ipg_buffer[1]"]),
    ("overfix_7371", ["ipg_buffer[0]", "ipg_buffer[1]", "ipg_buffer[1]", "ipg_buffer[1]"]),
    ("record_stream_only", ["ipg_buffer[0]", "ipg_buffer[1]", "ipg_buffer[1]", "ipg_buffer[1]"]),
])
def test_the_index_reset_collapses_the_ping_pong(variant, slots):
    """clear() setting index = 0 before the swap makes every bucket after the first fill slot 1."""
    assert slots_filled(variant) == slots


# -- the expected-outcomes table -----------------------------------------------------------------
def test_row_regressed_6993_overwrites_buffer_1_while_its_reduce_reads_it():
    f = report("regressed_6993").findings
    assert not f.clean and f.deadlock is None
    sites = root_cause_sites("regressed_6993")
    assert {buf for _, buf, _, _ in sites} == {"ipg_buffer[1]"}
    # every root cause pairs a kernel of the reduce with the next bucket's gradient copy
    for kind, _, a, b in sites:  # in code order: the reduce's kernel, then the next copy
        assert a in REDUCE_OPS and b == GRAD_COPY, (kind, a, b)
    assert len(sites) == 4
    assert ("WAR", "ipg_buffer[1]", "self.flatten", GRAD_COPY) in sites
    assert ("WAW", "ipg_buffer[1]", "tensor.div_", GRAD_COPY) in sites
    assert sum(h.manifest for h in f.hazards) > 0
    assert {h.rank for h in f.hazards} == {0, 1}


def test_row_regressed_6993_is_as_fast_as_the_fix():
    """It computes garbage at full speed: same makespan as fixed_7805."""
    assert report("regressed_6993").metrics.makespan_us == \
        report("fixed_7805").metrics.makespan_us


def test_row_overfix_7371_is_safe_and_pays_for_it():
    over, fixed = report("overfix_7371"), report("fixed_7805")
    assert over.findings.clean
    cost = over.metrics.makespan_us / fixed.metrics.makespan_us - 1
    assert cost > 0.30, cost  # compute waits for every whole reduce: no overlap
    assert over.metrics.bubble_share > fixed.metrics.bubble_share + 0.15


def test_row_fixed_7805_is_safe_at_no_cost():
    r = report("fixed_7805")
    assert r.findings.clean and not r.findings.warnings
    assert r.metrics.makespan_us == report("pre_5606").metrics.makespan_us


def test_row_record_stream_only_leaves_the_regression_as_it_was():
    """record_stream orders frees; the slot is reused, not freed: same root causes as the regression."""
    assert root_cause_sites("record_stream_only") == root_cause_sites("regressed_6993")
    trace = report("record_stream_only").trace
    assert any(op.kind == "record_stream" for op in trace.ops)


def test_row_pre_5606_is_latent_when_a_reduce_fits_in_a_bucket_of_backward():
    f = report("pre_5606").findings
    assert f.hazards and not any(h.manifest for h in f.hazards)
    assert {rc.buffer for rc in f.root_causes} == {"ipg_buffer[0]", "ipg_buffer[1]"}


def test_row_pre_5606_strikes_when_the_reduce_outlasts_a_bucket_of_backward():
    """PR #5606: 'when the communication time is longer, it may result in a rewrite'."""
    f = report("pre_5606", nccl_gb_per_s=30.0).findings
    assert any(h.manifest for h in f.hazards)
    assert report("fixed_7805", nccl_gb_per_s=30.0).findings.clean


def test_bad_parameters_are_one_line_model_errors():
    with pytest.raises(ModelError, match="params=15"):
        streamsim.simulate(MODEL, "fixed_7805", {"params": 15})
    with pytest.raises(ModelError, match="param_numel"):
        streamsim.simulate(MODEL, "fixed_7805", {"param_numel": 60_000_000})
