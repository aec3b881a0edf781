"""An op log's optional ``step`` field: read, replayed onto the ops, written back, and measured
(a recorded schedule gets step metrics, as a model's run does)."""
from __future__ import annotations

import json

import pytest

from streamsim import check_oplog, compute_metrics, oplog_text, parse_oplog, run_model, \
    simulate_oplog
from streamsim.sim.errors import ModelError



def _log(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


def test_step_labels_the_line_and_the_stream_op_it_enqueues():
    trace = simulate_oplog(parse_oplog(_log(
        {"op": "launch", "name": "a", "writes": ["x"], "dur": 5, "step": 0},
        {"op": "launch", "name": "b", "writes": ["x"], "dur": 5, "step": 1},
        {"op": "launch", "name": "c", "writes": ["x"], "dur": 5}), "s.jsonl"))
    steps = sorted((op.name, op.agent.kind, op.step) for op in trace.ops)
    assert steps == [("a", "host", 0), ("a", "stream", 0), ("b", "host", 1), ("b", "stream", 1),
                     ("c", "host", None), ("c", "stream", None)]  # no field: no step
    m = compute_metrics(trace)
    assert (m.steps, m.mean_step_us) == (2, 5.0)


@pytest.mark.parametrize("bad, message", [
    (-1, "field 'step' must be a non-negative integer, got -1"),
    ("1", "field 'step' must be a non-negative integer, got string"),
    (1.5, "field 'step' must be a non-negative integer, got number"),
])
def test_a_bad_step_is_one_error_naming_the_line(bad, message):
    with pytest.raises(ModelError) as e:
        parse_oplog(_log({"op": "launch", "name": "a"}, {"op": "launch", "step": bad}), "s.jsonl")
    assert str(e.value) == f"s.jsonl:2: {message}"


def test_a_model_run_written_as_an_op_log_keeps_its_steps_and_step_metrics(tmp_path,
                                                                            pipeline_model):
    """The writer carries each host action's step, so `check` on a dumped run measures the same
    steps as `run` did (before, the log could not say a step: "0 steps, mean step 0.0 us")."""
    model = pipeline_model(steps=3, written="hidden.during(0.9, 1.0)")
    report = run_model(model, fix_cost=False)
    text = oplog_text(report.trace)
    assert '"step":2' in text
    log = tmp_path / "pipe.jsonl"
    log.write_text(text)
    again = check_oplog(str(log))
    assert again.metrics.timing() == report.metrics.timing() and again.metrics.steps == 3
    assert [op.step for op in again.trace.ops if op.kind != "alloc"] == \
        [op.step for op in report.trace.ops]  # (but the alloc lines of the model's buffers)
