"""models/megatron_dealloc.py (Megatron-LM PR #4047): the racy deallocation is found, the proposed
fix is the PR's wait at the PR's place, and compare shows each variant's time and memory cost."""
from __future__ import annotations

import os

from streamsim import compare_variants, load_model, run_model
from streamsim.analysis.metrics import MiB

MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "models", "megatron_dealloc.py")


def test_racy_frees_outputs_the_send_still_reads_and_the_fix_is_the_prs_wait():
    r = run_model(MODEL, "racy")
    assert r.findings.hazards and all(h.kind == "use-after-free" and h.manifest
                                      for h in r.findings.hazards)
    [rc] = r.findings.root_causes  # one missing wait, whichever microbatch (issue 27 point 1)
    assert (rc.first.label, rc.second.label) == ("send_forward", "free(output_tensor)")
    assert rc.fix_kind == "wait_handle"  # send_next_wait_handle.wait() before the free
    assert r.fix_cost.hazards_after == 0 and not r.fix_cost.deadlock_after


def test_each_variant_costs_time_or_memory():
    rows = {row.variant: row.report for row in compare_variants(load_model(MODEL), [
        "racy", "fixed_4047", "record_stream", "no_dealloc"])}
    assert [v for v, rep in rows.items() if rep.findings.clean] == [
        "fixed_4047", "record_stream", "no_dealloc"]
    peak = {v: rep.metrics.peak_bytes for v, rep in rows.items()}
    span = {v: rep.metrics.makespan_us for v, rep in rows.items()}
    # the PR's wait is stream-side: the host frees as early as before, so no memory moves
    assert peak["fixed_4047"] == peak["racy"] and span["fixed_4047"] > span["racy"]
    # without deallocation, the first stage keeps its 3 warm-up outputs until their backward
    assert peak["no_dealloc"][0] - peak["racy"][0] == 3 * 256 * MiB
    assert span["no_dealloc"] == span["racy"]
    # record_stream holds each block until its send has run, while the host runs ahead
    assert all(peak["record_stream"][r] > peak["no_dealloc"][r] for r in (0, 1, 2))
