"""The compiled run metrics (streamsim/native/_metrics.pyx) are the pure-Python reference's
(streamsim/analysis/metrics.py) to the bit: :func:`compute_metrics` gives an equal
:class:`Metrics`, field for field, every float the same bits (a float summed in another order, a
-0.0 for a 0.0, a dict in another order or an int for a float is a failure), and
:func:`memory_use` the same :class:`MemoryUse`, on every model of models/ (default parameters,
each variant), on generated op logs (tests/native/test_differential.py's generator: steps, gloo,
NCCL comm streams whose ops wait for their peers, zero-duration ops, allocations, frees and
``record_stream``), on op logs replayed with jitter, and on hand-built traces of the corners
(equal Agent objects that are distinct objects, signed zeros, overlapping and empty intervals).
Each comparison also asserts that the compiled path ran (it may decline: that would compare the
reference with itself). Skipped where ``_metrics`` was not built."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from streamsim import native
from streamsim.analysis import metrics as M
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.sim.model import load_model
from streamsim.sim.runner import simulate
from streamsim.trace import HOST, STREAM, TRANSFER_START, Agent, Alloc, Op, Trace

from .built import MODELS, required

pytestmark = required("_metrics", "the compiled metrics")
LOGS = 300  # generated op logs compared (each a few ms on both paths)


def _generator():
    """tests/native/test_differential.py's ``generated_log`` (one generator for both tests)."""
    path = Path(__file__).with_name("test_differential.py")
    spec = importlib.util.spec_from_file_location("_differential_logs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def lean_runs(tmp_path: Path, n: int, timed: bool = True, name: str = "gen.jsonl"):
    """The first ``n`` generated logs (:func:`_generator`) the compiled replay keeps as columns
    (``STREAMSIM_NATIVE`` on), each as ``(i, trace, lean)``: its run with its ops made, and the
    same run kept as columns (a ``LeanTrace``, no op made); ``timed``: replayed with the
    generator's seeds and jitters in turn, else plain; ``name``: the log file's name."""
    from streamsim.oplog.leanrun import LeanRun, LeanTrace
    gen = _generator()
    path = tmp_path / name
    for i in range(n):
        path.write_text(gen.generated_log(i))
        seed, jitter = gen.TIMINGS[i % len(gen.TIMINGS)] if timed else (None, 0.0)
        log = load_oplog(path)
        run = simulate_oplog(log, seed=seed, jitter=jitter, lean=True)
        if isinstance(run, LeanRun):
            yield i, simulate_oplog(log, seed=seed, jitter=jitter), LeanTrace(run)


def exact(x):
    """``x`` with every float spelled by its bits (``float.hex`` keeps -0.0 apart from 0.0) and
    every value tagged with its type, dicts as their items in order: equal only if bit-identical."""
    if isinstance(x, float):
        return ("float", x.hex() if not math.isnan(x) else "nan")
    if isinstance(x, dict):
        return ("dict", [(exact(k), exact(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [exact(v) for v in x])
    if isinstance(x, (set, frozenset)):
        return ("set", sorted(map(repr, x)))
    if hasattr(x, "__dataclass_fields__"):
        return (type(x).__name__, [(f, exact(getattr(x, f))) for f in x.__dataclass_fields__])
    return (type(x).__name__, x)


def assert_same(monkeypatch, trace: Trace, what: str) -> None:
    """compute_metrics and memory_use of ``trace``: the compiled path ran and gave the
    reference's result to the bit."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.metrics(trace) is not None, f"{what}: the compiled metrics declined"
    assert native.memory(trace) is not None, f"{what}: the compiled memory_use declined"
    compiled = M.compute_metrics(trace), M.memory_use(trace)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert native.metrics(trace) is None and native.memory(trace) is None
    reference = M.compute_metrics(trace), M.memory_use(trace)
    assert compiled == reference, what
    for name, a, b in zip(("compute_metrics", "memory_use"), compiled, reference):
        assert exact(a) == exact(b), f"{what}: {name} differs in a float's bits or a type"


def model_runs():
    """(model path, variant) of every model in models/, each variant."""
    return [(p, v) for p in MODELS for v in load_model(str(p)).variants]


@pytest.mark.parametrize("path,variant", model_runs(),
                         ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_every_model_variant_has_bit_identical_metrics(monkeypatch, path, variant):
    """Each model at its default parameters, each variant (steps, NCCL transfers, allocations)."""
    model = load_model(str(path))
    trace = simulate(model, variant, model.resolve(()))
    assert_same(monkeypatch, trace, f"{path.name} --variant {variant}")


def test_generated_logs_have_bit_identical_metrics(monkeypatch, tmp_path):
    """Generated op logs, replayed plain and with jitter (times that are no round numbers)."""
    gen = _generator()
    path = tmp_path / "gen.jsonl"
    for i in range(LOGS):
        path.write_text(gen.generated_log(i))
        seed, jitter = gen.TIMINGS[i % len(gen.TIMINGS)]
        trace = simulate_oplog(load_oplog(path), seed=seed, jitter=jitter)
        assert_same(monkeypatch, trace, f"generated log {i} (seed {seed}, jitter {jitter})")


def test_the_compared_traces_reach_every_corner():
    """The generated logs and the models give what the metrics treat apart: steps, gloo channels,
    comm ops that waited for peers (TRANSFER_START), zero-duration stream ops, allocation
    lines and a model's allocations, frees (with ``record_stream``'s later ops), several ranks."""
    gen = _generator()
    seen: set[str] = set()
    traces = [simulate_oplog(gen.load_oplog_text(gen.generated_log(i))) for i in range(LOGS)]
    model = load_model(str(MODELS[0]))
    traces.append(simulate(model, next(iter(model.variants)), model.resolve(())))
    for t in traces:
        if t.allocations:
            seen.add("model allocations")
        if len({a.rank for a in t.agents}) > 1:
            seen.add("ranks")
        for op in t.ops:
            if op.agent.kind != STREAM:
                continue
            seen |= {k for k, ok in (("step", op.step is not None), ("gloo", op.agent.is_gloo),
                                      ("transfer start", TRANSFER_START in op.attrs),
                                      ("zero duration", op.end == op.start),
                                      ("free after", op.kind == "free" and bool(op.after)),
                                      ("alloc", op.kind == "alloc")) if ok}
    assert seen == {"model allocations", "ranks", "step", "gloo", "transfer start",
                    "zero duration", "free after"} | ({"alloc"} & seen), sorted(seen)


def _op(i: int, agent: Agent, start: float, end: float, **kw) -> Op:
    return Op(id=i, agent=agent, index=i, kind=kw.pop("kind", "launch"), name=f"op{i}",
              enqueued=start, start=start, end=end, start_seq=2 * i, end_seq=2 * i + 1, **kw)


def test_hand_built_corners_have_bit_identical_metrics(monkeypatch):
    """Two equal Agent objects that are distinct objects (one busy entry, its intervals in the
    order the reference extends them), signed zeros, empty and overlapping intervals, steps on a
    gloo channel (not counted), a comm op waiting for its peer, allocations rebinding a name, a
    free of a buffer never allocated."""
    compute = Agent(0, STREAM, "compute")
    again = Agent(0, STREAM, "compute")  # equal, not the same object
    nccl = Agent(0, STREAM, "nccl:pp")
    gloo = Agent(1, STREAM, "gloo:cpu")
    host = Agent(1, HOST, "main")
    ops = [_op(0, compute, -0.0, 3.0, step=1), _op(1, again, 0.0, 3.0, step=1),
           _op(2, compute, 2.0, 2.0, step=2), _op(3, nccl, 1.0, 9.5, step=2,
                                                   attrs={TRANSFER_START: 4.25}),
           _op(4, gloo, 0.5, 7.0, step=3), _op(5, host, 0.0, 1.0),
           _op(6, again, 8.0, 12.125, step=1),
           _op(7, host, 1.0, 1.0, kind="alloc", attrs={"buffer": "x", "nbytes": 64}),
           _op(8, compute, 2.0, 2.0, kind="free", issuer=7, after=(6,), attrs={"buffer": "x"}),
           _op(9, compute, 3.0, 3.0, kind="free", attrs={"buffer": "never"})]
    trace = Trace(ops=tuple(ops), agents=(compute, nccl, gloo, host), end_time=12.125,
                  allocations=(Alloc(0, "y", 8, 0.0, issued=0), Alloc(0, "y", 16, 0.0, issued=0),
                               Alloc(1, "z", 4, 1.5, issued=5)))
    assert_same(monkeypatch, trace, "hand-built corners")


def test_what_the_compiled_metrics_decline_takes_the_reference(monkeypatch):
    """Int times (the reference's sums would stay ints) and op ids that are not positions (a trace
    cut to some of its ops): the compiled functions decline, and compute_metrics gives the
    reference's result on either setting."""
    compute = Agent(0, STREAM, "compute")
    host = Agent(0, HOST, "main")
    ints = Trace(ops=(_op(0, compute, 0, 4), _op(1, host, 1, 1, kind="alloc",
                                                 attrs={"buffer": "x", "nbytes": 8})),
                 agents=(compute, host), end_time=4)
    cut = Trace(ops=(_op(3, compute, 0.0, 4.0),), agents=(compute,), end_time=4.0)
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.metrics(ints) is None and native.memory(ints) is None
    assert native.memory(cut) is None and native.metrics(cut) is not None
    on = M.compute_metrics(ints), M.compute_metrics(cut)
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert exact(on) == exact((M.compute_metrics(ints), M.compute_metrics(cut)))
    assert M.compute_metrics(ints).busy_us == {"rank0/compute": 4}


def test_the_comparison_catches_a_one_interval_difference(monkeypatch):
    """The comparison can fail: compiled metrics whose busy time differs in the last bit."""
    model = load_model(str(MODELS[0]))
    trace = simulate(model, next(iter(model.variants)), model.resolve(()))
    timing = native.metrics

    def off(t):
        got = timing(t)
        if got is None:  # (STREAMSIM_NATIVE=0: the reference)
            return None
        latencies, idle, num, den, busy = got
        k = next(iter(busy))
        return latencies, idle, num, den, {**busy, k: math.nextafter(busy[k], math.inf)}
    monkeypatch.setattr(native, "metrics", off)
    with pytest.raises(AssertionError):
        assert_same(monkeypatch, trace, "perturbed")
