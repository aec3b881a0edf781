"""The compiled replay of an op log (streamsim/native/_replay.pyx) gives the trace the simpy replay
gives, op by op: the same ids, agents, indices, times (bit for bit, and of the same type),
sequence positions, edges, attrs (in the same order), accesses, notes, agents and meta, on
generated logs of the kinds it covers (1-3 ranks of one host thread: kernels and host work on
several streams, events recorded, waited and never recorded, host syncs, allocations, frees,
double frees, uses after a free, ``record_stream``, recorded clocks ``t``, sites, steps, a launch
overhead, seeds and jitter) and on every op log of the tests it covers. A log it does not cover
(a process group, two host threads on a rank, ...) is left to the simpy replay, whole.

Skipped where the compiled module was not built; under CI a missing module fails instead.
"""
from __future__ import annotations

import json
import os
import random

import pytest

from streamsim import native
from streamsim.oplog import load_oplog
from streamsim.oplog import replay as replay_mod
from streamsim.oplog.replay import simulate_oplog

from .test_differential import collective_tensors, load_oplog_text, logs_in_tests

if native.replayer() is None and os.environ.get("CI") and os.environ.get("STREAMSIM_NATIVE") != "0":
    raise RuntimeError("CI: the compiled replay (streamsim.native._replay) is not built: pip "
                       "install -e . printed why; its tests must run in CI")
pytestmark = pytest.mark.skipif(native._replayer is None, reason="the compiled replay is not built")

GENERATED = int(os.environ.get("STREAMSIM_REPLAY_LOGS", "2000"))
CHUNK = 100
TIMINGS = ((None, 0.0), (7, 0.3))
BUFFERS = ("a", "b", "c", "d")
STREAMS = ("compute", "side", "copy", "s3")


def covered_log(seed: int) -> str:
    """A valid op log the compiled replay covers: 1-3 ranks, one host thread each, every kind of
    ``_replay.KINDS``, with the corners the engine words notes for: kernels and host work on
    several streams, events recorded, waited and never recorded, host syncs, allocations, frees,
    double frees, uses after a free, ``record_stream``; NCCL sends and receives (eager and
    rendezvous, both stream layouts, a send no receive matches), the unrooted collectives, and
    waits on their handles (blocking or not), in a declared group or not. Comm lines are one
    global sequence projected on the ranks (a receive's send is not issued later on its rank)."""
    R = random.Random(seed)
    ranks = R.randint(1, 3)
    lines: list[dict] = []
    if R.random() < 0.5:
        lines.append({"op": "config", "launch_overhead": R.choice((0, 0.5, 2, 5))})
    layout = R.choice(("per_group", "per_pair"))
    gloo = R.random() < 0.4  # (the comm group's backend: gloo is what a CPU recording has)
    group_name = "cpu" if gloo else "pp"
    if ranks > 1 and (gloo or R.random() < 0.5):  # (tensor ops are gloo's when it says so)
        declared = {"op": "group", "group": group_name, "backend": "gloo" if gloo else "nccl",
                    "ranks": list(range(ranks)), "latency": R.choice((1, 10, 30)),
                    "bandwidth": R.choice((10, 1000, 25000)),
                    "eager_bytes": R.choice((0, 32, 65536)),
                    "blocking_wait": R.random() < 0.3}
        if not gloo:
            declared["p2p_streams"] = layout
        lines.append(declared)
    comm = {"group": group_name} if gloo else {"group": group_name, "p2p_streams": layout}
    clock = {r: 0.0 for r in range(ranks)}
    recorded_any = R.random() < 0.8
    handles: dict[int, list[str]] = {r: [] for r in range(ranks)}
    n = [0]

    def ref(r: int):
        buf = R.choice(BUFFERS)
        if R.random() < 0.5:
            return buf
        off = R.randint(0, 63)
        view = {"buffer": buf, "offset": off, "nbytes": R.randint(1, 64 - off)}
        if R.random() < 0.2:
            view["window"] = sorted((R.choice((0.0, 0.25, 0.5)), R.choice((0.5, 0.75, 1.0))))
        return view

    def refs(r: int) -> list:
        return [ref(r) for _ in range(R.randint(0, 2))]

    def handle(r: int) -> str:
        n[0] += 1
        handles[r].append(f"h{n[0]}")
        return f"h{n[0]}"

    with_site = R.random() < 0.5
    with_t = R.random() < 0.5
    for r in range(ranks):
        for b in BUFFERS[:2]:
            lines.append({"op": "alloc", "rank": r, "buffer": b, "nbytes": 64,
                          "stream": R.choice(("compute", "side"))})
    for _ in range(R.randint(1, 60)):
        r = R.randint(0, ranks - 1)
        what = R.choice(("launch",) * 5 + ("host", "host", "record", "record", "wait_event",
                                            "wait_event", "sync_event", "sync_stream",
                                            "sync_device", "alloc", "free", "record_stream")
                        + (("message",) * 3 + ("collective", "collective", "wait", "wait",
                                                "query") if ranks > 1 else ()))
        group: list[dict] = []
        x: dict = {"op": what, "rank": r}
        if what == "launch":
            x.update(stream=R.choice(STREAMS), reads=refs(r), writes=refs(r),
                     dur=R.choice((0.5, 1.0, 5.0, 20.0, 0.1)))
        elif what == "host":
            x.update(reads=refs(r), writes=refs(r), dur=R.choice((0.0, 1.0, 3.0, 40.0)))
        elif what == "record":
            if not recorded_any:
                continue
            x.update(stream=R.choice(STREAMS), event=R.choice(("e0", "e1", "e2")))
        elif what in ("wait_event", "sync_event"):
            x["event"] = R.choice(("e0", "e1", "e2"))
            if what == "wait_event":
                x["stream"] = R.choice(STREAMS)
        elif what == "sync_stream":
            x["stream"] = R.choice(STREAMS + ("fresh",))
        elif what == "alloc":
            b = R.choice(BUFFERS)
            x.update(buffer=b, nbytes=64, stream=R.choice(("compute", "side")))
            if R.random() < 0.3:
                x["label"] = "t_" + b
        elif what == "free":  # (sometimes a second free of it, or one never allocated)
            x.update(buffer=R.choice(BUFFERS))
        elif what == "record_stream":
            x.update(buffer=R.choice(BUFFERS), stream=R.choice(STREAMS))
        elif what == "message" and not gloo and R.random() < 0.25:  # a batch_isend_irecv each
            dst = R.choice([q for q in range(ranks) if q != r])  # (sends first, whatever order)
            nbytes = R.choice((4, 2048, 100000))
            for me, other in ((r, dst), (dst, r)):
                batch = len(lines) * 2 + (me == dst)  # (an id no other batch of the log has)
                pair = [{"op": "isend", "rank": me, "peer": other, "tensors": [ref(me)]},
                        {"op": "irecv", "rank": me, "peer": other, "tensors": [ref(me)]}]
                R.shuffle(pair)
                stream = R.choice(("compute", "side"))
                for y in pair:
                    y.update(nbytes=nbytes, handle=handle(me), stream=stream, batch=batch,
                             **comm)
                group += pair
        elif what == "message":
            dst = R.choice([q for q in range(ranks) if q != r])
            nbytes = R.choice((4, 48, 2048, 100000))
            objects = gloo and R.random() < 0.5  # (send_object/isend_object, recv_object)
            if objects:
                x = {"op": R.choice(("send_object", "isend_object")), "rank": r, "peer": dst,
                     "nbytes": nbytes, **comm}
                if x["op"] == "isend_object":
                    x["handle"] = handle(r)
            else:
                x = {"op": "isend", "rank": r, "peer": dst, "tensors": [ref(r)],
                     "nbytes": nbytes, "handle": handle(r),
                     "stream": R.choice(("compute", "side")), **comm}
            if R.random() < 0.5:
                x["dur"] = R.choice((1.0, 30.0))
            group = [x]
            if objects:
                group.append({"op": "recv_object", "rank": dst, "peer": r, **comm})
            elif R.random() < 0.95:  # (else a send no receive matches: eager, or a stall)
                group.append({"op": "irecv", "rank": dst, "peer": r, "tensors": [ref(dst)],
                              "nbytes": nbytes, "handle": handle(dst), **comm,
                              "stream": R.choice(("compute", "side"))})
        elif what == "collective":
            op = R.choice(("all_reduce", "all_gather", "broadcast", "reduce_scatter",
                           "all_to_all", "reduce", "gather", "scatter", "barrier"))
            root = R.randint(0, ranks - 1)
            for q in range(ranks):
                y = {"op": op, "rank": q, "ranks": list(range(ranks)), "handle": handle(q),
                     "stream": R.choice(("compute", "side")), "group": group_name,
                     **collective_tensors(op, q, ranks, root, ref)}
                if R.random() < 0.3 and op != "barrier":
                    y["nbytes"] = R.choice((8, 4096))
                group.append(y)
        elif what == "wait":
            if not handles[r]:
                continue
            x.update(handle=R.choice(handles[r]), stream=R.choice(STREAMS),
                     blocking=R.random() < 0.4)
        elif what == "query":
            if not handles[r]:
                continue
            x["handle"] = R.choice(handles[r])
            if R.random() < 0.5:  # (what the recorded program saw)
                x["result"] = R.random() < 0.5
        for y in group or [x]:
            if R.random() < 0.4:
                y["step"] = R.randint(0, 3)
            if with_site:
                y["site"] = f"train.py:{R.randint(1, 90)} fwd"
            if with_t and R.random() < 0.7:
                clock[y["rank"]] += R.choice((0.0, 0.25, 3.0, 50.0))
                y["t"] = clock[y["rank"]]
            lines.append(y)
    return "".join(json.dumps(x) + "\n" for x in lines)


def difference(a, b) -> str | None:
    """The first difference between two traces (None: the same), every field of every op
    compared by value and by type, attrs by order too."""
    if b is None:
        return "the compiled replay did not run"
    if len(a.ops) != len(b.ops):
        return f"{len(a.ops)} ops against {len(b.ops)}"
    for x, y in zip(a.ops, b.ops):
        for f in x.__slots__:
            u, v = getattr(x, f), getattr(y, f)
            if u != v or type(u) is not type(v):
                return f"op {x.id}, {f}: {u!r} against {v!r}"
        if list(x.attrs.items()) != list(y.attrs.items()):
            return f"op {x.id}, attrs: {x.attrs!r} against {y.attrs!r}"
    for f in ("agents", "stall", "notes", "end_time", "source", "meta", "allocations"):
        if getattr(a, f) != getattr(b, f):
            return f"the trace's {f}: {getattr(a, f)!r} against {getattr(b, f)!r}"
    return None


def both(log, monkeypatch, seed=None, jitter=0.0):
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    reference = simulate_oplog(log, seed=seed, jitter=jitter)
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compiled = replay_mod._replayed_natively(log, seed, jitter, 5_000_000, 1e12)
    return reference, compiled


@pytest.mark.parametrize("chunk", range(max(1, GENERATED // CHUNK)))
def test_generated_logs_replay_to_the_same_trace(monkeypatch, chunk):
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        log = load_oplog_text(covered_log(seed))
        for s, j in TIMINGS:
            reference, compiled = both(log, monkeypatch, s, j)
            if reference.stall is not None:  # (a deadlock: the engine's alone, whole)
                assert compiled is None, f"log seed {seed}: a stall replayed"
                continue
            diff = difference(reference, compiled)
            assert diff is None, f"log seed {seed}, seed {s} jitter {j}: {diff}\n" + \
                covered_log(seed)


def keyed_fix_sets(trace):
    """What fix costing re-runs a log with: all its fixes at once, and each root cause's alone
    (keyed, as streamsim.pipeline.fixcost keys them)."""
    from streamsim.analysis.checks import analyse, distinct_fixes
    from streamsim.sim.inject import key_fixes
    findings = analyse(trace)
    if not findings.hazards:
        return []
    sets = [key_fixes(trace, distinct_fixes(findings.hazards))]
    for rc in findings.root_causes[:3]:
        hazards = [findings.hazards[i] for i in rc.instances]
        if any(h.fix is not None for h in hazards):
            sets.append(key_fixes(trace, distinct_fixes(hazards)))
    return [keyed for keyed in sets if keyed]  # (no fix: no re-run, as fixcost.cost_of)


@pytest.mark.parametrize("chunk", range(max(1, GENERATED // CHUNK // 2)))
def test_fix_reruns_replay_to_the_same_trace(monkeypatch, chunk):
    """A fix costing re-run (event, event-sync, record_stream and handle-wait fixes injected) is
    covered too."""
    kinds, ran = set(), 0
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        log = load_oplog_text(covered_log(seed))
        for s, j in TIMINGS:
            monkeypatch.setenv("STREAMSIM_NATIVE", "0")
            for keyed in keyed_fix_sets(simulate_oplog(log, seed=s, jitter=j)):
                monkeypatch.setenv("STREAMSIM_NATIVE", "0")
                reference = simulate_oplog(log, seed=s, jitter=j, fixes=keyed)
                monkeypatch.setenv("STREAMSIM_NATIVE", "1")
                compiled = replay_mod._replayed_natively(log, s, j, 5_000_000, 1e12, keyed)
                if reference.stall is not None or \
                        not {f.kind for f in keyed} <= {"event", "event_sync", "record_stream",
                                                        "wait_handle"} \
                        or any(ln.batch is not None for ln in log.lines):
                    assert compiled is None, "a stall, a handle's wait or a batch replayed"
                    continue  # (the engine's alone)
                diff = difference(reference, compiled)
                assert diff is None, f"log seed {seed}, seed {s} jitter {j}, fixes " \
                    f"{[f.text for f in keyed]}: {diff}\n" + covered_log(seed)
                kinds |= {f.kind for f in keyed}
                ran += 1
    assert ran >= 50 and {"event", "record_stream", "wait_handle"} <= kinds, (ran, kinds)


def test_the_generated_logs_reach_every_kind_and_note():
    kinds, notes = set(), set()
    for seed in range(200):
        log = load_oplog_text(covered_log(seed))
        kinds |= {ln.op for ln in log.lines}
        notes |= {n.kind for n in simulate_oplog(log).notes}
    assert kinds == set(native._replayer.KINDS)
    assert {"event-never-recorded", "use-after-free", "double-free", "unmatched-send",
            "gloo-send-waited-twice"} <= notes


def test_every_op_log_of_the_tests_it_covers_replays_to_the_same_trace(monkeypatch):
    taken = 0
    for where, text in logs_in_tests():
        try:
            log = load_oplog_text(text)
        except Exception:  # (logs of error tests: not op logs to replay)
            continue
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        if replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12) is None:
            continue
        taken += 1
        for s, j in TIMINGS:
            try:
                pair = both(log, monkeypatch, s, j)
            except Exception as e:  # (the reference refuses it: so must the caller's path)
                pytest.fail(f"{where}: the compiled replay ran a log the reference refuses: {e}")
            diff = difference(*pair)
            assert diff is None, f"{where} (seed {s}, jitter {j}): {diff}"
    assert taken >= 5, f"only {taken} op logs of the tests are covered"


def test_a_log_it_does_not_cover_is_left_to_the_reference(monkeypatch):
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    handoff = load_oplog_text('{"op": "put", "channel": "q"}\n'
                              '{"op": "get", "host": "aux", "channel": "q"}\n')
    threads = load_oplog_text('{"op": "launch", "stream": "s", "writes": ["a"]}\n'
                              '{"op": "host", "host": "aux", "reads": ["a"]}\n')
    comm = load_oplog_text('{"op": "launch", "stream": "nccl:pp", "writes": ["a"]}\n')
    for log in (handoff, threads, comm):
        assert replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12) is None
    assert len(simulate_oplog(threads).ops) == 3  # (the reference ran it)


def test_bounds_are_left_to_the_reference_which_words_them(monkeypatch):
    """A bound passed: the compiled replay gives up, and the engine's own error is raised."""
    from streamsim.sim.errors import BoundExceeded
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    log = load_oplog_text("".join('{"op": "launch", "stream": "s", "dur": 5}\n' for _ in range(9)))
    assert replay_mod._replayed_natively(log, None, 0.0, 10, 1e12) is None
    assert replay_mod._replayed_natively(log, None, 0.0, 100, 20.0) is None
    with pytest.raises(BoundExceeded, match="max_ops"):
        simulate_oplog(log, max_ops=10)
    with pytest.raises(BoundExceeded, match="max_time"):
        simulate_oplog(log, max_time=20.0)


def test_the_comparison_catches_a_difference(monkeypatch):
    log = load_oplog_text(covered_log(3))
    reference, compiled = both(log, monkeypatch)
    assert difference(reference, compiled) is None
    import dataclasses
    moved = dataclasses.replace(compiled, ops=compiled.ops[:-1] + (
        dataclasses.replace(compiled.ops[-1], end_seq=compiled.ops[-1].end_seq + 1),))
    assert "end_seq" in difference(reference, moved)
