"""host.microbatch: micro-batches of one step are told apart in reports, JSON and pictures."""
from __future__ import annotations

import json

import pytest

from streamsim import ModelError, dumps_json, render_text, run_model
from streamsim.report.jsonread import op_of

MODEL = '''"""Two micro-batches a step, one send buffer."""
VARIANTS = {"racy": "no wait"}


def build(sim, p, variant):
    sim.group("pp", [0, 1])

    def stage0(host):
        out = host.buffer("out", 1 << 20)
        for t in range(2):
            host.step = t
            for mb in range(2):
                host.microbatch = mb
                host.launch("forward", writes=[out], dur=100)
                host.group("pp").isend(out, dst=1)
        host.microbatch = None
        host.launch("tail", dur=1)

    def stage1(host):
        inp = host.buffer("inp", 1 << 20)
        for t in range(2):
            host.step = t
            for mb in range(2):
                host.microbatch = {bad}
                host.group("pp").irecv(inp, src=0).wait()
                host.launch("forward", reads=[inp], dur=300)

    sim.spawn(0, stage0)
    sim.spawn(1, stage1)
'''


@pytest.fixture
def model(tmp_path):
    def write(bad: str = "mb") -> str:
        path = tmp_path / "mb.py"
        path.write_text(MODEL.replace("{bad}", bad))
        return str(path)
    return write


def test_ops_carry_the_micro_batch_of_the_host_that_issued_them(model):
    report = run_model(model(), fix_cost=False)
    ops = report.trace.ops
    sends = [op for op in ops if op.kind == "isend" and op.agent.kind == "stream"]  # its host's
    assert [(op.step, op.microbatch) for op in sends] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    (tail,) = [op for op in ops if op.name == "tail" and op.agent.kind == "stream"]
    assert tail.microbatch is None and "microbatch" not in tail.attrs  # None clears the label
    assert sends[1].when() == "step 0 micro-batch 1" and sends[1].when(short=True) == "s0 mb1"


def test_the_report_tells_the_micro_batches_of_one_step_apart(model):
    """Only host.step labelled ops: the first instance raced micro-batch 0 against micro-batch 1
    of the same step and the report said "step 0 -> step 0". Now it names both."""
    report = run_model(model(), fix_cost=False)
    text = render_text(report)
    assert "on rank0/nccl:pp step 0 micro-batch 0 at" in text
    assert "other instances: step 0 micro-batch 1 -> step 1 micro-batch 0 on rank0" in text
    d = json.loads(dumps_json(report))
    first = op_of(d, d["hazards"][0]["first"])
    assert (first["step"], first["microbatch"]) == (0, 0)


def test_pictures_label_the_micro_batch():
    from streamsim.report.draw_hb import _label
    from streamsim.trace import STREAM, Agent, trace_from_ops
    t = trace_from_ops([{"agent": Agent(0, STREAM, "compute"), "kind": "launch",
                         "name": "forward", "step": 3, "attrs": {"microbatch": 1}}])
    assert _label(t, 0).endswith("step 3 · mb 1 · #0")


def test_a_micro_batch_must_be_an_int(model):
    with pytest.raises(ModelError, match="host.microbatch must be an int or None, not 'x'"):
        run_model(model(bad="'x'"), fix_cost=False)


def test_runs_without_micro_batches_carry_no_label(pipeline_model):
    report = run_model(pipeline_model(), "racy", fix_cost=False)
    assert all("microbatch" not in op.attrs for op in report.trace.ops)
    assert "micro-batch" not in render_text(report)
    assert "microbatch" not in dumps_json(report, version=3)  # (version 4: a column of nulls)
    d = json.loads(dumps_json(report))
    assert {op_of(d, int(i)).get("microbatch") for i in d["ops"]["rows"]} == {None}
