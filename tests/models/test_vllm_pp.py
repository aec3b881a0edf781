"""models/vllm_pp.py against its note's expected outcomes (docs/models/vllm_pp.md).

One test per row of the note's outcomes table, each over a small grid, then the model's own
mechanics: the scheduler, the in-flight bound, the reaper, PR #54962's unit test and the
happens-before property it cannot check.

The assertions are about facts that do not depend on which hazard *instances* the analysis lists:
which buffers race on which stages, between which model lines, manifest somewhere or latent
everywhere, which variants are safe, deadlock or not.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import os

import pytest

from streamsim import ModelError, simulate
from streamsim.analysis.checks import analyse
from streamsim.analysis.hb import hb_pass
from streamsim.analysis.liveness import deadlock_from_stall
from streamsim.sim.model import load_model

MODEL_PATH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "models", "vllm_pp.py")
MODEL = load_model(MODEL_PATH)
VPP = MODEL.module

SAFE = ("pre_49274", "fixed_54962", "copy_before_send", "wait_after_send")
ALL = tuple(VPP.VARIANTS)
SINGLE = {"requests": 1}
DECODE_ONLY = {"prompt_tokens": 16, "decode_steps": 32, "arrival_steps": 1}
OUT_OF_PLACE = {"residual_in_place": False}
PREFILL_GRAPHS = {"cudagraph_max_tokens": 8192}  # SM100: prefill chunks replay a graph
EAGER = {"cudagraph_max_tokens": 0}  # enforce_eager: no graph at all


@functools.lru_cache(maxsize=None)
def _run(variant: str, sets: tuple):
    trace = simulate(MODEL, variant, dict(sets))
    return trace, analyse(trace)


def run(variant: str, **sets):
    return _run(variant, tuple(sorted(sets.items())))


def params(**sets):
    return MODEL.resolve(sets)


def _line_of(func, marker: str) -> str:
    """``models/vllm_pp.py:N`` of the line of ``func`` that contains ``marker``."""
    lines, start = inspect.getsourcelines(func)
    (n,) = [start + i for i, text in enumerate(lines) if marker in text]
    return f"vllm_pp.py:{n}"


SEND_SITE = _line_of(VPP.GroupCoordinator.device_isend, "self.device_group.isend(")
FORWARD_SITE = _line_of(VPP.GPUModelRunner.execute_model, 'forward", reads=')
COPY_SITE = _line_of(VPP.GPUModelRunner.copy_intermediate_tensors, "host.copy(")
RING_COPY_SITE = _line_of(VPP._SendRing.copy_, "host.copy(")


def site(op) -> str:
    return op.location.rsplit("/", 1)[-1]


def racing(trace, findings, p) -> dict[str, dict]:
    """buffer -> {stages, manifest, firsts, seconds}: which stages race on it, whether any instance
    struck, and the model lines of both sides (the issue order's first and second access)."""
    out: dict[str, dict] = {}
    for h in findings.hazards:
        first, second = trace.op(h.first), trace.op(h.second)
        d = out.setdefault(h.buffer.split("@")[0], {"stages": set(), "manifest": False,
                                                    "firsts": set(), "seconds": set(),
                                                    "kinds": set()})
        d["stages"].add(h.rank // p.tp)
        d["manifest"] |= h.manifest
        d["firsts"].add(site(first))
        d["seconds"].add(site(second))
        d["kinds"].add(h.kind)
    return out


def assert_clean_end(trace):
    assert trace.stall is None, trace.stall
    assert not trace.notes, trace.notes  # no unmatched send, no use after free


def assert_safe_variants(**sets):
    for variant in SAFE:
        trace, f = run(variant, **sets)
        assert_clean_end(trace)
        assert f.hazards == (), (variant, sets, f.hazards[:2])
        assert f.warnings == (), (variant, sets, f.warnings[:2])


def regressed(**sets):
    """The regressed variant's races, checked for the shape every row shares: WARs between the
    send (one model line) and a later write on the same stage's compute stream."""
    p = params(**sets)
    trace, f = run("regressed_49274", **sets)
    assert_clean_end(trace)
    r = racing(trace, f, p)
    for buf, d in r.items():
        assert d["kinds"] == {"WAR"} and d["firsts"] == {SEND_SITE}, (buf, d)
        # the first write after the send in issue order: the copy_ into a receive buffer, else
        # the forward (one root cause per buffer)
        assert d["seconds"] == ({COPY_SITE} if buf == RESIDUAL_IN else {FORWARD_SITE}), (buf, d)
        assert p.pp - 1 not in d["stages"]  # the last stage sends nothing
    return p, r


GRAPH_BUFFERS = {"cudagraph_outputs.hidden_states", "cudagraph_outputs.residual"}
RESIDUAL_IN = "intermediate_tensors.residual"


# -- the model file ----------------------------------------------------------------------------------
def test_variants_params_and_defaults_are_declared_with_help():
    assert list(VPP.VARIANTS) == ["pre_49274", "regressed_49274", "fixed_54962", "copy_before_send",
                                  "ring_no_wait", "wait_after_send"]
    assert VPP.BASELINE == "regressed_49274"
    assert all(VPP.VARIANTS.values()) and all(prm.help for prm in VPP.PARAMS)
    p = params()
    assert (p.pp, p.tp, p.p2p_streams, p.prompt_tokens, p.chunk_tokens, p.requests) == \
        (4, 1, "per_pair", 12288, 8192, 4)
    assert (p.cudagraph_max_tokens, p.residual_in_place, p.max_inflight) == (512, True, 0)
    assert MODEL.params["p2p_streams"].choices == ("per_pair", "per_group")
    assert MODEL.params["topology"].choices == ("linear", "fold_back")


def test_default_sizes_straddle_the_eager_thresholds():
    p = params()
    row = p.hidden_size * p.dtype_bytes
    assert p.chunk_tokens * row > p.nccl_eager_bytes  # chunked-prefill sends are rendezvous
    assert p.requests * row <= p.nccl_eager_bytes  # a decode batch's are eager
    assert p.metadata_bytes > p.gloo_eager_bytes == 0  # gloo p2p is rendezvous at every size


@pytest.mark.parametrize("sets, message", [
    ({"pp": 1}, "pp=1"),
    ({"hidden_size": 8191, "tp": 2}, "hidden_size=8191"),
    ({"topology": "fold_back", "max_inflight": 2}, "max_inflight=2"),
    ({"ring_slots": 0}, "ring_slots=0"),
    ({"cudagraph_max_tokens": -1}, "cudagraph_max_tokens=-1"),
    ({"p2p_streams": "per_peer"}, "p2p_streams"),
])
def test_bad_parameters_are_one_line_model_errors(sets, message):
    with pytest.raises(ModelError, match=message):
        simulate(MODEL, "fixed_54962", sets)


# -- the expected-outcomes table: one test per row ------------------------------------------------
@pytest.mark.parametrize("pp, tp, p2p", [(4, 1, "per_pair"), (2, 2, "per_pair"),
                                         (4, 1, "per_group")])
def test_row_safe_variants_are_safe_in_every_linear_configuration(pp, tp, p2p):
    """Safe variants: no hazard, no deadlock, no warning, whatever the buffer placement and size:
    each orders the next overwrite after the send (a wait) or never reuses a buffer in flight."""
    for placement, prompt in itertools.product([{}, OUT_OF_PLACE, PREFILL_GRAPHS, EAGER],
                                               [4096, 12288]):
        assert_safe_variants(pp=pp, tp=tp, p2p_streams=p2p, prompt_tokens=prompt, **placement)


def ring_verdict(**sets) -> str:
    """ring_no_wait (K=3) at these settings: safe, latent or manifest (and it ends cleanly)."""
    trace, f = run("ring_no_wait", **sets)
    assert_clean_end(trace)
    if not f.hazards:
        return "safe"
    return "manifest" if any(h.manifest for h in f.hazards) else "latent"


def row(ring: str, **sets):
    """A row's shared cells: the safe variants safe, ring_no_wait as stated, nothing deadlocks;
    returns the regressed variant's races."""
    assert_safe_variants(**sets)
    assert ring_verdict(**sets) == ring, sets
    return regressed(**sets)


@pytest.mark.parametrize("tp", [1, 2])
def test_row_defaults_in_place_residual_long_prompt_is_manifest_on_middle_stages(tp):
    """Defaults (per_pair, graph cap 512, in-place residual, 12k prompts): the middle stages'
    outgoing residual is the persistent receive buffer, and the next batch's copy_ into it runs
    while the rendezvous send to the next stage is still in flight: MANIFEST. The graph-replayed
    batches' outputs (decodes, the small mixed batch) race on every non-last stage, latent."""
    p, r = row("latent", tp=tp)
    middle = set(range(1, p.pp - 1))
    assert r[RESIDUAL_IN]["stages"] == middle and r[RESIDUAL_IN]["manifest"]
    assert set(r) == GRAPH_BUFFERS | {RESIDUAL_IN, "cudagraph_pool"}
    for buf in GRAPH_BUFFERS | {"cudagraph_pool"}:
        assert r[buf]["stages"] == set(range(p.pp - 1)) and not r[buf]["manifest"], buf


def test_row_short_prompts_are_latent():
    """4k prompts (two requests a batch): the middle stages' sends end before the next batch's
    copy_: hazards, all latent; too few batches for the ring to reuse a slot unordered."""
    p, r = row("safe", prompt_tokens=4096)
    assert RESIDUAL_IN in r and not any(d["manifest"] for d in r.values())


@pytest.mark.parametrize("prompt, ring", [(4096, "safe"), (12288, "latent")])
def test_row_out_of_place_residual_is_latent(prompt, ring):
    """Out-of-place norm (Inductor): an eager step's outputs are fresh blocks, retained until
    reaped, so the prefill chunks cannot be overwritten; only graph-replayed batches race, and
    their sends are eager-sized (done in microseconds, before the next replay writes): LATENT."""
    p, r = row(ring, prompt_tokens=prompt, **OUT_OF_PLACE)
    assert set(r) <= GRAPH_BUFFERS | {"cudagraph_pool"} and GRAPH_BUFFERS <= set(r)
    assert not any(d["manifest"] for d in r.values())


@pytest.mark.parametrize("p2p", ["per_pair", "per_group"])
@pytest.mark.parametrize("prompt, ring", [(4096, "safe"), (12288, "latent")])
def test_row_prefill_graphs_are_manifest_through_the_graph_pool(p2p, prompt, ring):
    """Graph cap 8192 (SM100 prefill graphs): a prefill chunk's outputs live in the shared graph
    pool, and the next replay (the very next batch) reuses it while the rendezvous send reads:
    MANIFEST, on every non-last stage per pair and on stage 0 alone per group."""
    p, r = row(ring, prompt_tokens=prompt, p2p_streams=p2p, **PREFILL_GRAPHS)
    assert r["cudagraph_pool"]["manifest"]
    assert r["cudagraph_pool"]["stages"] == (set(range(p.pp - 1)) if p2p == "per_pair" else {0})


def test_row_no_graphs_races_only_on_the_in_place_residual():
    """No graph at all: with the in-place norm only the middle stages' receive buffer races
    (manifest at 12k); with the out-of-place one every sent tensor is a fresh block: SAFE. The
    send ring still races (its slots are static buffers)."""
    p, r = row("latent", **EAGER)
    assert set(r) == {RESIDUAL_IN} and r[RESIDUAL_IN]["manifest"]
    assert r[RESIDUAL_IN]["stages"] == set(range(1, p.pp - 1))
    _, r = row("latent", **EAGER, **OUT_OF_PLACE)
    assert r == {}


@pytest.mark.parametrize("placement", [{}, OUT_OF_PLACE, PREFILL_GRAPHS, EAGER])
def test_row_per_group_serialises_middle_stages_and_leaves_stage_0(placement):
    """per_group: a middle stage's next receive queues behind its previous send on the one p2p
    stream, and the next forward waits that receive: every race on stages >= 1 is gone. Stage 0
    receives nothing: its graph-replayed outputs still race (latent at cap 512, manifest with
    prefill graphs); with no graph its outputs are fresh blocks: safe."""
    p, r = row("latent", p2p_streams="per_group", **placement)
    if placement == EAGER:
        assert r == {}
        return
    assert r and all(d["stages"] == {0} for d in r.values()) and RESIDUAL_IN not in r
    assert any(d["manifest"] for d in r.values()) == (placement == PREFILL_GRAPHS)


@pytest.mark.parametrize("prompt", [2048, 8192])
def test_row_a_single_short_request_is_safe_in_every_variant(prompt):
    """One request whose prompt fits one chunk: every later batch is one of its decodes, which
    needs the token sampled by the previous batch, so the engine loop orders everything."""
    for placement, p2p in itertools.product([{}, PREFILL_GRAPHS], ["per_pair", "per_group"]):
        for variant in ALL:
            trace, f = run(variant, prompt_tokens=prompt, p2p_streams=p2p, **SINGLE, **placement)
            assert_clean_end(trace)
            assert f.hazards == (), (variant, placement, p2p)


@pytest.mark.parametrize("prompt", [10240, 12288])
def test_row_a_single_long_request_strikes_per_pair_not_per_group(prompt):
    """One request of 8.2k-12k tokens: its second chunk goes in the very next batch, and on the
    middle stages its copy_ overwrites the first chunk's residual mid-send (per_pair: MANIFEST,
    PR #54962's report). Per group the second chunk's receive waits for that send: SAFE."""
    p, r = row("safe", prompt_tokens=prompt, **SINGLE)
    assert set(r) == {RESIDUAL_IN} and r[RESIDUAL_IN]["manifest"]
    assert r[RESIDUAL_IN]["stages"] == set(range(1, p.pp - 1))
    _, r = row("safe", prompt_tokens=prompt, p2p_streams="per_group", **SINGLE)
    assert r == {}


def test_row_decode_only_graph_outputs_are_latent():
    """Requests at different phases, decoding (16-token prompts, one arrival per step): the FULL
    graphs' persistent outputs race on every non-last stage but are written at the end of the next
    replay, long after the eager-sized send: LATENT. The short prompts' prefills replay PIECEWISE
    graphs whose pool the next replay reuses from its start: those strike."""
    p, r = row("latent", **DECODE_ONLY)
    for buf in GRAPH_BUFFERS:
        assert r[buf]["stages"] == set(range(p.pp - 1)) and not r[buf]["manifest"]
    assert r["cudagraph_pool"]["manifest"]
    trace, _ = run("regressed_49274", **DECODE_ONLY)
    sends = [op for op in trace.ops if op.kind == "isend" and op.agent.kind == "stream"]
    assert all(op.attrs["nbytes"] <= p.nccl_eager_bytes for op in sends)


@pytest.mark.parametrize("pp", [2, 3, 4])
def test_row_ring_no_wait_is_safe_exactly_from_one_slot_per_batch_in_flight(pp):
    """A ring slot is reused K steps later; with K >= max_inflight (pp + 1) the engine loop has
    heard the batch that used it come back, a chain that orders the reuse after its send."""
    for k in range(1, pp + 3):
        trace, f = run("ring_no_wait", pp=pp, ring_slots=k)
        assert_clean_end(trace)
        assert bool(f.hazards) == (k < pp + 1), (pp, k)
        for h in f.hazards:
            assert site(trace.op(h.first)) == SEND_SITE
            assert site(trace.op(h.second)) == RING_COPY_SITE and h.buffer.startswith("send_ring[")
    _, f = run("ring_no_wait", pp=4, ring_slots=1)
    assert any(h.manifest for h in f.hazards)  # reused the very next step: strikes


def test_row_fold_back_per_pair_deadlocks_pre_49274_and_wait_after_send():
    """fold_back (the last stage sends back to stage 0): pre_49274's blocking metadata sends close
    a wait-for cycle through every host (the deadlock PR #49274 removed); wait_after_send hangs on
    the device (each wait puts a rendezvous send's completion in the compute stream, which the
    next receive's enqueue waits for). The other variants finish."""
    p = params()
    trace, _ = run("pre_49274", topology="fold_back")
    deadlock = deadlock_from_stall(trace)
    hosts = {b.agent for b in deadlock.blocked if b.agent.kind == "host"}
    assert hosts == set(deadlock.cycle) and len(hosts) == p.pp
    assert all(trace.op(b.op).kind == "send_object" for b in deadlock.blocked)
    trace, _ = run("wait_after_send", topology="fold_back")
    deadlock = deadlock_from_stall(trace)
    assert deadlock is not None and any(a.kind == "stream" for a in deadlock.cycle)
    for variant in ("fixed_54962", "copy_before_send"):
        trace, f = run(variant, topology="fold_back")
        assert_clean_end(trace)
        assert f.hazards == ()
    assert ring_verdict(topology="fold_back") == "latent"
    trace, f = run("regressed_49274", topology="fold_back")
    assert_clean_end(trace)
    assert any(h.manifest for h in f.hazards)
    assert {h.rank // p.tp for h in f.hazards} == set(range(p.pp))  # the last stage sends too


@pytest.mark.parametrize("sets", [{"pp": 2}, {"p2p_streams": "per_group"}])
def test_row_fold_back_hangs_every_variant_on_a_shared_p2p_stream(sets):
    """With a stream shared by both directions (pp=2: the pair's own; per_group: any pp), stage
    0's fold-back receive queues behind its next rendezvous send and the last stage's receive
    behind its fold-back send: every variant hangs on the device (pre_49274 on its hosts first).
    Decode-sized (eager) traffic does not hang the device."""
    for variant in ALL:
        trace, _ = run(variant, topology="fold_back", **sets)
        deadlock = deadlock_from_stall(trace)
        assert deadlock is not None and deadlock.cycle
        if variant == "pre_49274":
            continue  # its blocking metadata sends close a host cycle, whatever the sizes
        assert all(a.name.startswith("nccl:pp") for a in deadlock.cycle), deadlock.cycle
        trace, _ = run(variant, topology="fold_back", prompt_tokens=16, decode_steps=16, **sets)
        assert trace.stall is None


# -- the scheduler and the engine loop -------------------------------------------------------------
def test_schedule_chunks_prompts_in_consecutive_steps_and_spaces_decodes_pp_apart():
    single = VPP.schedule(params(**SINGLE))
    assert [b.tokens for b in single] == [8192, 4096] + [1] * 8
    assert [b.needs for b in single] == [-1, -1] + list(range(1, 9))  # each needs the previous
    assert [b.tokens for b in VPP.schedule(params(prompt_tokens=16, decode_steps=2))] == [64, 4, 4]
    p = params()
    batches = VPP.schedule(p)
    assert [b.tokens for b in batches[:6]] == [8192] * 6 and batches[5].decodes == 1
    assert all(b.needs < b.step for b in batches)
    assert sum(b.prefill_tokens for b in batches) == p.requests * p.prompt_tokens
    assert sum(b.decodes for b in batches) == p.requests * p.decode_steps


def _issued_before(trace, rank: int, name: str, step: int) -> bool:
    recv = next(op for op in trace.ops if op.agent.rank == rank and op.name == name)
    forward = _forward(trace, rank, step)
    return recv.end <= trace.op(forward.issuer).start


def test_stage_0_waits_for_the_in_flight_bound_and_for_its_decodes_tokens():
    """step_with_batch_queue: batch b starts once batch b - (pp + 1) is done, and once the batch
    that sampled its decodes' tokens is done (the last stage's 'step done' message)."""
    p = params()
    trace, _ = run("fixed_54962")
    inflight = p.pp + 1
    for b in VPP.schedule(p):
        if b.step >= inflight:
            assert _issued_before(trace, 0, f"recv step {b.step - inflight} done", b.step)
        if b.needs >= 0:
            assert _issued_before(trace, 0, f"recv step {b.needs} done", b.step)


def test_reaper_waits_the_metadata_handle_once_its_tensor_sends_completed():
    """_reap_completed_isends (vLLM 0.34): handles[0], a gloo handle, is waited (the host blocks)
    only after every tensor handle of its entry reported is_completed(); the worker itself never
    waits it. At the run's end every handle has been waited: fixed_54962 has no warning."""
    trace, workers = VPP.run("fixed_54962")
    _, f = run("fixed_54962")
    assert f.warnings == ()
    worker = workers[0][0]
    worker_host = next(a for a in trace.agents if a.rank == 0 and a.kind == "host")
    by_handle = _ops_by_handle(trace, 0)
    for call in worker.calls:
        meta, *tensors = call.handles
        assert not any("metadata" in entry for entry in call.log)
        waits = [op for op in trace.ops if op.kind == "wait" and op.agent == worker_host
                 and op.attrs.get("handle") == meta.work.name]
        assert len(waits) == 1 and waits[0].attrs["blocking"]
        assert all(by_handle[t.work.name].end <= waits[0].start for t in tensors)


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
    # the worker keeps exactly handles[1:] and never waits the metadata handle (the reaper does)
    assert call.pp_send_work == call.handles[1:]
    assert not any("metadata" in entry for c in worker.calls for entry in c.log)
    # "with a previous send pending": the waits were issued before the previous sends ended
    prev = next(c for c in worker.calls if c.step == 0)
    by_handle = _ops_by_handle(trace, 0)
    host = next(a for a in trace.agents if a.rank == 0 and a.kind == "host")
    waits = [op for op in trace.ops if op.agent == host and op.kind == "wait" and op.step == 1
             and not op.attrs.get("blocking")]
    assert len(waits) == len(prev.handles) - 1
    assert all(w.start < by_handle[h.work.name].end for w in waits for h in prev.handles[1:])


@pytest.mark.parametrize("variant, ordered", [("fixed_54962", True), ("pre_49274", True),
                                             ("wait_after_send", True),
                                             ("regressed_49274", False)])
def test_next_forward_happens_after_the_previous_send(variant, ordered):
    """The property the unit test cannot check: on stage 0 the send of batch t happens before
    the forward of batch t+1 (vector clocks), for every t where the engine loop's chains do not
    already order them (a decode needing batch t's token does)."""
    trace, workers = VPP.run(variant)
    hb = hb_pass(trace, keep_clocks=True).hb
    worker = workers[0][0]
    by_handle = _ops_by_handle(trace, 0)
    batches = VPP.schedule(params())
    verdicts = []
    for call in worker.calls[:-1]:
        if batches[call.step + 1].needs >= call.step:
            continue
        sends = [by_handle[h.work.name] for h in call.handles if h.kind == "tensor"]
        forward = _forward(trace, 0, call.step + 1)
        verdicts += [hb.ordered(s.id, forward.id) for s in sends]
    assert verdicts and all(v == ordered for v in verdicts), (variant, verdicts)


def test_runs_are_deterministic():
    for variant in ("regressed_49274", "fixed_54962"):
        a = simulate(MODEL, variant)
        b = simulate(MODEL, variant)
        assert a.ops == b.ops and a.end_time == b.end_time
