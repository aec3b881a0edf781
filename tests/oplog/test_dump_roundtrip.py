"""A model's dumped op log replays to the same trace (issue 23, finding 4): `dump_oplog` writes the
cost model (op log v2's declarations) as well as every op, so that `check(dump(run(m)))` has the
same ops, times, hazards, root causes, deadlock and metrics as `run(m)`, for every model and
variant in models/ and the test suite's pipeline model. Before, the dump dropped each group's
latency, bandwidth and eager threshold and the launch overhead: the vLLM demo's overlap went from
its own figure to 2.7%, and a model that ran clean could deadlock in its own log. Then (issue 23
"a faithful dump", issue 27's memory) it dropped the model's allocations and sites: a buffer got an
alloc line only when freed, sized by what its ops touched, so peak memory differed (vllm_pp: 0 B
against 1.5 GiB on a rank), and a buffer named again while its namesake lived (`x#2`) split its
root cause from `x`'s; now the metrics, memory included, and the root causes are the model's."""
from __future__ import annotations

import pathlib

import pytest

from streamsim import check_oplog, dump_oplog, load_model, run_model
from streamsim.trace import HOST

MODELS = sorted(pathlib.Path(__file__).resolve().parents[2].joinpath("models").glob("*.py"))
CASES = [(m, v) for m in MODELS for v in load_model(str(m)).variants]


def timeline(trace) -> dict:
    """Per agent, its ops in order as (kind, start, end), without the zero-time `alloc` actions
    the writer adds to declare buffer sizes (a model's buffers need no action)."""
    out: dict = {}
    for op in trace.ops:
        if not (op.agent.kind == HOST and op.kind == "alloc"):
            out.setdefault(op.agent, []).append((op.kind, op.start, op.end))
    return out


def hazards(trace, findings) -> list:
    def where(op_id):
        op = trace.op(op_id)
        return (op.agent, op.kind, op.start, op.end)
    return sorted((h.kind, h.rank, h.buffer, h.range, where(h.first), where(h.second), h.manifest)
                  for h in findings.hazards)


def same_run(run, replay) -> None:
    if run.trace.stall is not None:  # a deadlocked run: see test_a_deadlocked_run_...
        assert replay.trace.stall is not None
        blocked = {b.agent for b in replay.trace.stall.blocked}  # (those with ops queued
        assert blocked and blocked <= {b.agent for b in run.trace.stall.blocked}  # behind: fewer)
        return
    assert timeline(replay.trace) == timeline(run.trace)
    assert hazards(replay.trace, replay.findings) == hazards(run.trace, run.findings)
    assert root_causes(replay.findings) == root_causes(run.findings)
    assert (replay.findings.deadlock is None) == (run.findings.deadlock is None)
    assert replay.metrics == run.metrics  # memory too: every host.buffer is an alloc line


def root_causes(findings) -> list:
    """Each root cause as a report shows it: its buffer, its two sites, how many instances (and
    which are manifest), its ranks and its fix. A model's buffers are grouped by the line that
    made them, which the dump's alloc lines carry (`site`, `label`): a buffer named again while
    its namesake lives (`x#2`) falls in the same root cause as in the model."""
    return [(rc.kind, rc.buffer, rc.first, rc.second, len(rc.instances), rc.manifest, rc.ranks,
             rc.fix, rc.fix_kind, rc.no_fix) for rc in findings.root_causes]


# A small grid beside the defaults: parameters that change the cost model the dump must carry
# (eager thresholds, tensor parallelism and its group, stream layout, world size, pipeline depth).
GRID = {
    "vllm_pp": ({"tp": 2, "p2p_streams": "per_group"}, {"topology": "fold_back", "pp": 3},
                {"nccl_eager_bytes": 0, "gloo_eager_bytes": 1024, "arrival_steps": 1}),
    "deepspeed_zero_ipg": ({"world_size": 3, "params": 6},),
    "torch_pp_shared_stream": ({"pp": 2, "microbatches": 4}, {"nccl_eager_bytes": 0}),
    "vllm_async_pinned": ({"steps": 3, "max_concurrent_batches": 1, "draft_us": 0.0},),
}
GRID_CASES = [(m, v, p) for m, v in CASES for p in GRID.get(m.stem, ())]


@pytest.mark.parametrize("model, variant", CASES, ids=[f"{m.stem}:{v}" for m, v in CASES])
def test_a_models_dumped_log_replays_to_the_same_run(model, variant, tmp_path):
    run = run_model(str(model), variant, fix_cost=False)
    path = tmp_path / "dumped.jsonl"
    dump_oplog(run.trace, path)
    same_run(run, check_oplog(str(path), fix_cost=False))


@pytest.mark.parametrize("model, variant, params", GRID_CASES,
                         ids=[f"{m.stem}:{v}:{','.join(p)}" for m, v, p in GRID_CASES])
def test_a_models_dumped_log_replays_to_the_same_run_off_its_defaults(model, variant, params,
                                                                       tmp_path):
    run = run_model(str(model), variant, params, fix_cost=False)
    path = tmp_path / "dumped.jsonl"
    dump_oplog(run.trace, path)
    same_run(run, check_oplog(str(path), fix_cost=False))


def test_a_deadlocked_runs_dump_keeps_its_deadlock_not_every_op(tmp_path):
    """What a deadlocked run's dump holds: the same deadlock (the same agents blocked), not the same
    ops. A host action whose stream op never started (the stream was already stuck) is written as
    a comment, since the format has no line for an op that did not run, and the replay stalls at
    the same place without the actions the model issued behind it. Pinned so that a change to
    this (a format for never-started ops) shows."""
    model = MODELS[0].parent / "torch_pp_shared_stream.py"
    run = run_model(str(model), "deferred_recv", fix_cost=False)
    path = tmp_path / "dl.jsonl"
    dump_oplog(run.trace, path)
    replay = check_oplog(str(path), fix_cost=False)
    assert "never reached its stream" in path.read_text()
    assert replay.trace.stall is not None and replay.trace.end_time == run.trace.end_time
    assert len(replay.trace.ops) < len(run.trace.ops)


def test_the_pipeline_model_round_trips_under_its_parameters(pipeline_model, tmp_path):
    model = pipeline_model()
    for steps in (1, 3):
        run = run_model(model, "racy", {"steps": steps}, fix_cost=False)
        path = tmp_path / f"p{steps}.jsonl"
        dump_oplog(run.trace, path)
        same_run(run, check_oplog(str(path), fix_cost=False))
