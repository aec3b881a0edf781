"""The compiled replay of an op log (streamsim/native/_replay.pyx) gives the trace the simpy replay
gives, op by op: the same ids, agents, indices, times (bit for bit, and of the same type),
sequence positions, edges, attrs (in the same order), accesses, notes, agents and meta, on
generated logs of the kinds it covers (1-3 ranks of 1-3 host threads: kernels and host work on
several streams, events recorded, waited and never recorded, host syncs, allocations, frees,
double frees, uses after a free, ``record_stream``, comm ops, ``put``/``get`` hand-offs between
the threads of a rank, recorded clocks ``t``, sites, steps, a launch overhead, seeds and jitter)
and on every op log of the tests it covers; and fix costing's re-runs of them, with every kind
of fix. A run it does not cover (one that stalls, a fix re-run with a sync that blocks the host
between two members of a batch) is left to the simpy replay, whole.

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
from streamsim.oplog.leanrun import LeanTrace
from streamsim.oplog.replay import simulate_oplog
from streamsim.sim.errors import BoundExceeded
from streamsim.trace import Trace

from .built import required
from .test_differential import collective_tensors, load_oplog_text, logs_in_tests

pytestmark = required("_replay", "the compiled replay")

GENERATED = int(os.environ.get("STREAMSIM_REPLAY_LOGS", "2000"))
CHUNK = 100
TIMINGS = ((None, 0.0), (7, 0.3))
BUFFERS = ("a", "b", "c", "d")
STREAMS = ("compute", "side", "copy", "s3")
THREADS = ("main", "aux", "aux2")


def covered_log(seed: int) -> str:
    """A valid op log the compiled replay covers: 1-3 ranks, every kind of ``_replay.KINDS``,
    with the corners the engine words notes for: kernels and host work on
    several streams, events recorded, waited and never recorded, host syncs, allocations, frees,
    double frees, uses after a free, ``record_stream``; NCCL sends and receives (eager and
    rendezvous, both stream layouts, a send no receive matches), the unrooted collectives, and
    waits on their handles (blocking or not), in a declared group or not. Comm lines are one
    global sequence projected on the ranks (a receive's send is not issued later on its rank).
    In half the logs some ranks have 2 or 3 host threads, each line of such a rank on one of
    them at random (a batch's lines of a rank on one), so that the shared state that orders the
    lines of a rank (issueorder) is shared across threads: events recorded on one thread and
    waited or synced on another, streams two threads enqueue on, handles issued on one thread
    and waited or queried on another, allocations and frees on different threads, device syncs;
    and ``put``/``get`` hand-offs between two threads of a rank (the k-th get of a channel
    takes its k-th put; the get before the put in line order now and then)."""
    R = random.Random(seed)
    ranks = R.randint(1, 3)
    nthreads = {r: 1 for r in range(ranks)}
    if R.random() < 0.5:
        for r in range(ranks):
            if R.random() < 0.7:
                nthreads[r] = R.randint(2, 3)
    threaded = [r for r in range(ranks) if nthreads[r] > 1]

    def thread(r: int) -> str:
        return THREADS[R.randrange(nthreads[r])] if nthreads[r] > 1 else "main"
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
    clock: dict[tuple[int, str], float] = {}  # (rank, thread) -> its last t
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
                          "stream": R.choice(("compute", "side")), "host": thread(r)})
    for _ in range(R.randint(1, 60)):
        r = R.randint(0, ranks - 1)
        what = R.choice(("launch",) * 5 + ("host", "host", "record", "record", "wait_event",
                                            "wait_event", "sync_event", "sync_stream",
                                            "sync_device", "alloc", "free", "record_stream")
                        + (("message",) * 3 + ("collective", "collective", "wait", "wait",
                                                "query") if ranks > 1 else ())
                        + (("handoff",) * 3 if threaded else ()))
        group: list[dict] = []
        x: dict = {"op": what, "rank": r}
        if what == "handoff":  # a put on one thread of a rank, its get on another
            r = R.choice(threaded)
            giver, taker = R.sample(THREADS[:nthreads[r]], 2)
            channel = R.choice(("q0", "q1", "q2"))
            group = [{"op": "put", "rank": r, "host": giver, "channel": channel},
                     {"op": "get", "rank": r, "host": taker, "channel": channel}]
            if R.random() < 0.2:  # (the get first: it blocks until the put is issued)
                group.reverse()
        elif what == "launch":
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
        batch_thread: dict[tuple[int, int], str] = {}  # (rank, batch) -> its thread
        for y in group or [x]:
            if "host" not in y:
                y["host"] = batch_thread.setdefault((y["rank"], y["batch"]), thread(y["rank"])) \
                    if "batch" in y else thread(y["rank"])
            if R.random() < 0.4:
                y["step"] = R.randint(0, 3)
            if with_site:
                y["site"] = f"train.py:{R.randint(1, 90)} fwd"
            if with_t and R.random() < 0.7:
                at = (y["rank"], y["host"])
                clock[at] = clock.get(at, 0.0) + R.choice((0.0, 0.25, 3.0, 50.0))
                y["t"] = clock[at]
            lines.append(y)
    return "".join(json.dumps(x) + "\n" for x in lines)


_SHARED_ONLY = frozenset({"isend", "irecv", "all_reduce", "all_gather", "broadcast",
                          "reduce_scatter", "all_to_all", "reduce", "gather", "scatter",
                          "barrier", "send_object", "recv_object", "isend_object", "wait",
                          "query", "put", "get", "sync_device"})


def private_threads_log(seed: int) -> str | None:
    """``covered_log(seed)``'s lines of its ranks of several threads made private to each
    thread (its own streams, events and buffers; the lines that order threads by nature, comm
    ops, handles, hand-offs and device syncs, left out): no line waits for another thread's
    (no gates), so the program does not keep the line order and each call settles the clock
    itself (a host action or an enqueue first, a blocking op after it is made). None: the log
    has no rank of several threads."""
    out, multi = [], False
    text = covered_log(seed)
    ranks: dict[int, set] = {}
    for ln in text.splitlines():
        x = json.loads(ln)
        if "rank" in x:
            ranks.setdefault(x["rank"], set()).add(x.get("host", "main"))
    lives = []  # (each buffer a life on each thread: a free's allocation stream is its own)
    for r in sorted(ranks):
        for t in sorted(ranks[r]) if len(ranks[r]) > 1 else ():
            lives += [{"op": "alloc", "rank": r, "host": t, "buffer": f"{b}@{t}", "nbytes": 64,
                       "stream": f"side@{t}"} for b in BUFFERS]
    for ln in text.splitlines():
        x = json.loads(ln)
        if lives and x["op"] not in ("config", "group"):  # (after the declarations)
            out += lives
            lives = []
        if len(ranks.get(x.get("rank"), ())) < 2:
            out.append(x)
            continue
        multi = True
        if x["op"] in _SHARED_ONLY:
            continue
        me = "@" + x.get("host", "main")
        for f in ("stream", "event", "buffer"):
            if f in x:
                x[f] += me
        for f in ("reads", "writes"):
            x[f] = [r + me if isinstance(r, str) else {**r, "buffer": r["buffer"] + me}
                    for r in x.get(f, ())] if f in x else None
            if x[f] is None:
                del x[f]
        out.append(x)
    return "".join(json.dumps(x) + "\n" for x in out) if multi else None


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
    """Every log that does not stall takes the compiled replay (a None fails: "did not run"),
    those of ranks of several threads and hand-offs included; a stall is the engine's."""
    took = {"threaded": 0, "hand-off": 0, "stall": 0}
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        log = load_oplog_text(covered_log(seed))
        for s, j in TIMINGS:
            reference, compiled = both(log, monkeypatch, s, j)
            if reference.stall is not None:  # (a deadlock: the engine's alone, whole)
                assert compiled is None, f"log seed {seed}: a stall replayed"
                took["stall"] += 1
                continue
            diff = difference(reference, compiled)
            assert diff is None, f"log seed {seed}, seed {s} jitter {j}: {diff}\n" + \
                covered_log(seed)
            if threaded(log):
                took["threaded"] += 1
                took["hand-off"] += any(ln.op == "get" for ln in log.lines)
    assert took["threaded"] >= 40 and took["hand-off"] >= 30, took


def threaded(log) -> bool:
    """Some rank of ``log`` has several host threads."""
    return len({rank for rank, _ in log.threads}) != len(log.threads)


def test_threads_that_share_nothing_replay_to_the_same_trace(monkeypatch):
    """Ranks of several threads whose lines touch no common state: no gates, so each call's
    own settle is the one that waits (the compiled replay must not settle at the line's start:
    a blocking op is made before its thread waits for its clock)."""
    ran = 0
    for seed in range(max(200, GENERATED // 10)):
        text = private_threads_log(seed)
        if text is None:
            continue
        log = load_oplog_text(text)
        assert threaded(log) and not replay_mod.issue_gates(log.lines, log.threads, ["cpu"])
        for s, j in TIMINGS:
            reference, compiled = both(log, monkeypatch, s, j)
            if reference.stall is not None:
                assert compiled is None, f"log seed {seed}: a stall replayed"
                continue
            diff = difference(reference, compiled)
            assert diff is None, f"private log of seed {seed}, seed {s} jitter {j}: {diff}\n" \
                + text
            ran += 1
    assert ran >= 100, ran


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
    """A fix costing re-run is covered too, with every kind of fix injected (event, event-sync,
    record_stream, handle-wait and hand-off fixes; across the threads of a rank; before, after
    and between the members of a batch)."""
    kinds, ran, left, threads_ran, crossed, batched = set(), 0, 0, 0, 0, 0
    handoffs = handles = inner = 0
    for seed in range(chunk * CHUNK, (chunk + 1) * CHUNK):
        log = load_oplog_text(covered_log(seed))
        for s, j in TIMINGS:
            monkeypatch.setenv("STREAMSIM_NATIVE", "0")
            for keyed in keyed_fix_sets(simulate_oplog(log, seed=s, jitter=j)):
                monkeypatch.setenv("STREAMSIM_NATIVE", "0")
                reference = simulate_oplog(log, seed=s, jitter=j, fixes=keyed)
                monkeypatch.setenv("STREAMSIM_NATIVE", "1")
                compiled = replay_mod._replayed_natively(log, s, j, 5_000_000, 1e12, keyed)
                if reference.stall is not None or compiled is None:
                    assert reference.stall is not None and compiled is None or \
                        compiled is None and _inside_a_batch(log, keyed), \
                        "a stall replayed with fixes, or a re-run declined"
                    left += 1  # (a sync between a batch's members may block: the engine's)
                    continue
                threads_ran += threaded(log)
                batched += any(ln.batch is not None for ln in log.lines)
                handoffs += any(f.kind == "handoff" for f in keyed)
                inner += _inside_a_batch(log, keyed)
                handles += any(f.kind == "wait_handle" and f.handle_op[0] != f.before[0]
                               for f in keyed)
                crossed += any(f.kind in ("event", "event_sync") and
                               f.record_after[0] != f.before[0] for f in keyed)
                diff = difference(reference, compiled)
                assert diff is None, f"log seed {seed}, seed {s} jitter {j}, fixes " \
                    f"{[f.text for f in keyed]}: {diff}\n" + covered_log(seed)
                kinds |= {f.kind for f in keyed}
                ran += 1
    assert ran >= 30 and {"event", "record_stream", "wait_handle"} <= kinds, (ran, kinds)
    assert threads_ran >= 10, threads_ran  # (re-runs of logs with a rank of several threads)
    assert crossed >= 3, crossed  # (with an event fix across two threads)
    assert batched >= 10, batched  # (re-runs of logs with a batch_isend_irecv)
    assert handoffs >= 3, handoffs  # (with a hand-off fix: a put and a get of its own)
    assert handles >= 3, handles  # (a wait on a handle another thread issues)
    assert inner >= 3, inner  # (a sync between a batch's members)
    assert left >= 1, left  # (the re-runs left to the engine were tried: stalls, and syncs
    # between a batch's members that block)


def _inside_a_batch(log, keyed) -> bool:
    """A keyed fix whose sync falls between the members of a ``batch_isend_irecv``, which
    issues them in one call (sends first: ``batch_issue_order``), each its own action: a sync
    before a member other than the first issued, or after one other than the last issued, or
    before (after) the batch when its first (last) line is not issued first (last). The compiled
    replay runs those inside the batch, unless one blocks the host (the engine's)."""
    from streamsim.oplog.batches import batches
    from streamsim.sim.comm import batch_issue_order
    from streamsim.trace import HOST, Agent
    inside_pre, inside_post = set(), set()
    for rank, host in log.threads:
        mine = [ln for ln in log.lines if (ln.rank, ln.host) == (rank, host)]
        seen: dict = {}
        keys = []
        for ln in mine:  # (an action's key: its thread, kind, location, n-th of them)
            n = seen.get((ln.op, ln.location), 0)
            seen[(ln.op, ln.location)] = n + 1
            keys.append((Agent(rank, HOST, host), ln.op, ln.location, n))
        for i, members in batches(mine).items():
            if not members:
                continue
            order = batch_issue_order([m.op for m in members])
            for k in range(len(members)):
                if not (k == 0 == order[0]):
                    inside_pre.add(keys[i + k])
                if not (k == len(members) - 1 == order[-1]):
                    inside_post.add(keys[i + k])
    return any(f.before in inside_pre or f.kind in ("event", "event_sync") and
               f.record_after in inside_post for f in keyed)


def test_a_thread_that_runs_syncs_before_waiting_for_a_line_goes_on_when_its_signal_does(
        monkeypatch):
    """``Host.wait_signal`` runs the syncs a fix puts after the thread's last action, then blocks
    on the Signal of the line it waits for. Another thread may issue that line while those syncs
    settle: the Signal is set then, and the thread goes on only when its event is processed,
    after the events scheduled before it (log 1208: three threads of a rank, event fixes
    across them; the compiled replay went on at once, ahead of two other threads)."""
    log = load_oplog_text(covered_log(1208))
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    ran = 0
    for keyed in keyed_fix_sets(simulate_oplog(log)):
        events = [f for f in keyed if f.kind in ("event", "event_sync")]
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        reference = simulate_oplog(log, fixes=events)
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        compiled = replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12, events)
        assert compiled is not None
        assert difference(reference, compiled) is None, [f.text for f in events]
        ran += 1
    assert ran >= 2, ran


def rerun_as_reference(monkeypatch, log, fixes, what: str) -> bool:
    """``log`` re-run with ``fixes`` compiled gives the reference's trace; False (not compared)
    where the reference's run stalls, which the compiled replay leaves to it."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    reference = simulate_oplog(log, fixes=fixes)
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    compiled = replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12, fixes)
    if reference.stall is not None:
        assert compiled is None, what
        return False
    diff = difference(reference, compiled)
    assert diff is None, f"{what}: {diff}"
    return True


def test_fix_reruns_of_lines_of_several_paths_replay_and_cost_as_the_reference(monkeypatch):
    """An injection key is (kind, location, n), and a line's location is made of its log's path
    and its number (``schema.Line.location``): the compiled replay finds a key's line by that
    number (``_Run.key_line``), and the shift of a re-run kept as columns reads the
    locations of one path (``OpCols.path``). A hand-built log whose lines name several paths
    re-runs compiled to the reference's trace, and its lean re-run's shift declines
    (``measure_columns`` None), so that fix costing measures its trace: the reference's cost."""
    import dataclasses
    from streamsim.analysis.checks import analyse
    from streamsim.analysis.hb import HAZARD_KINDS
    from streamsim.analysis.metrics import compute_metrics
    from streamsim.pipeline import fixcost
    ran = declined = 0
    for seed in range(40):
        log = load_oplog_text(covered_log(seed))
        if threaded(log) or any(ln.batch is not None for ln in log.lines):
            continue
        several = dataclasses.replace(log, lines=tuple(
            dataclasses.replace(ln, path=f"loop{ln.lineno % 3}.py") for ln in log.lines))
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        trace = simulate_oplog(several)
        for keyed in keyed_fix_sets(trace):
            if not {f.kind for f in keyed} <= {"event", "event_sync", "record_stream",
                                               "wait_handle"}:
                continue
            ran += rerun_as_reference(monkeypatch, several, keyed,
                                      f"log seed {seed}, fixes {[f.text for f in keyed]}")
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")
        findings = analyse(trace)
        if not findings.hazards:
            continue
        keying = fixcost.Keying(trace, findings)
        keyed = keying.of(findings.hazards)
        run = simulate_oplog(several, fixes=keyed, lean=True)
        if isinstance(run, Trace) or not keyed:
            continue
        assert native.measure_columns(run.columns, HAZARD_KINDS, keying.delayed_start,
                                      keyed) is None
        before = compute_metrics(trace)
        lean = fixcost.cost_of(trace, findings.hazards, lambda f: simulate_oplog(
            several, fixes=f, lean=True), before, keying)
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        want = fixcost.cost_of(trace, findings.hazards, lambda f: simulate_oplog(
            several, fixes=f), before, fixcost.Keying(trace, findings))
        assert repr(lean) == repr(want), f"log seed {seed}"
        declined += 1
    assert ran >= 10 and declined >= 5, (ran, declined)


def test_fix_keys_that_name_no_line_of_their_thread_inject_nothing_as_in_the_reference(
        monkeypatch):
    """A re-run finds a fix key's line by the number its location ends in (``_Run.key_line``),
    then compares the rest with the line's path, without making the location. A key whose
    location is no line of its host thread, though its number may be one, injects nothing, as
    the reference's dict lookup finds nothing: a number with a leading zero, another path, a
    number past the lines or far past any C integer, no number, an empty path, and the line of
    another thread of the rank."""
    import dataclasses
    ran = across = 0
    for seed in range(60):
        log = load_oplog_text(covered_log(seed))
        if any(ln.batch is not None for ln in log.lines):
            continue
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        trace = simulate_oplog(log)
        for keyed in keyed_fix_sets(trace)[:1]:
            keyed = [f for f in keyed if f.kind in ("event", "record_stream")]
            if not keyed:
                continue
            fix = keyed[0]
            ag, kind, loc, n = fix.before
            path, number = loc.rsplit(":", 1)
            others = [ln.location for ln in log.lines if ln.rank == ag.rank and
                      ln.host != ag.name and ln.op == kind]
            wrong = [f"{path}:0{number}", f"elsewhere.jsonl:{number}",
                     f"{path}:{int(number) + 10 ** 6}", f"{path}:{10 ** 30}", path, f":{number}",
                     f"{path}:", f"{path}:{number}x"] + others[:1]
            across += bool(others)
            for where in wrong:
                moved = [dataclasses.replace(fix, before=(ag, kind, where, n)), *keyed[1:]]
                ran += rerun_as_reference(monkeypatch, log, moved,
                                          f"log seed {seed}, key at {where!r}")
    assert ran >= 40 and across >= 2, (ran, across)


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
        try:
            if replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12) is None:
                continue
        except BoundExceeded as e:  # (a log of a bound's test: the engine's error, word for word)
            monkeypatch.setenv("STREAMSIM_NATIVE", "0")
            with pytest.raises(type(e)) as reference:
                simulate_oplog(log)
            assert str(reference.value) == str(e), where
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
    comm = load_oplog_text('{"op": "launch", "stream": "nccl:pp", "writes": ["a"]}\n')
    stall = load_oplog_text('{"op": "get", "channel": "q"}\n'  # (no put: a deadlock)
                            '{"op": "host", "host": "aux"}\n')
    for log in (comm, stall):
        assert replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12) is None
    assert simulate_oplog(stall).stall is not None  # (the reference ran it, and words it)


def test_a_line_it_cannot_read_from_its_slots_is_left_to_the_reference(monkeypatch):
    """The replay reads a line's fields from its slots (``_replay._l``): a line of a subclass
    of ``Line`` (which may put a property where a slot was) or a Line with a field never set is
    left to the reference, which reads it by ``getattr``."""
    import dataclasses
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    log = load_oplog_text('{"op": "launch", "stream": "s", "writes": ["a"]}\n'
                          '{"op": "host", "reads": ["a"]}\n')
    assert replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12) is not None
    Line = type(log.lines[0])

    class Renamed(Line):
        __slots__ = ()

        @property
        def name(self):
            return "renamed"
    sub = object.__new__(Renamed)
    for f in dataclasses.fields(Line):  # (its slots, set through Line's own descriptors)
        Line.__dict__[f.name].__set__(sub, getattr(log.lines[1], f.name))
    subclassed = dataclasses.replace(log, lines=(log.lines[0], sub))
    assert replay_mod._replayed_natively(subclassed, None, 0.0, 5_000_000, 1e12) is None
    assert simulate_oplog(subclassed).ops[-1].name == "renamed"  # (the reference read it)
    unset = object.__new__(Line)
    for f in dataclasses.fields(Line):
        if f.name != "site":
            object.__setattr__(unset, f.name, getattr(log.lines[1], f.name))
    with_unset = dataclasses.replace(log, lines=(log.lines[0], unset))
    assert replay_mod._replayed_natively(with_unset, None, 0.0, 5_000_000, 1e12) is None


@pytest.mark.parametrize("renumber", ["file", "sparse", "far", "negative", "float", "twice"])
def test_lines_numbered_any_way_replay_to_the_same_trace(monkeypatch, renumber):
    """The replay finds a line by its number in a list indexed by it (``_by_lineno``): lines
    numbered as a file's (every number, or some skipped) replay compiled to the engine's trace,
    and to the same ops when the run is kept as columns and its lines let go (``release``
    keeps what the ops read of a line, by its number); a hand-built log numbered otherwise (far
    past its length, below zero, not ints, a number twice) is left to the engine, which reads
    no line by its number (a segfault, a MemoryError or another line's name otherwise)."""
    import dataclasses
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    log = next(g for g in map(load_oplog_text, map(covered_log, range(50)))
               if simulate_oplog(g).stall is None and not threaded(g))  # (not the engine's alone)
    number = {"file": lambda n: n, "sparse": lambda n: 3 * n + 1, "far": lambda n: n + 10 ** 9,
              "negative": lambda n: -n, "float": lambda n: n + 0.5,
              "twice": lambda n: max(n - 1, 1)}[renumber]
    lines = tuple(dataclasses.replace(ln, lineno=number(ln.lineno)) for ln in log.lines)
    # (a wait's target names its handle's line by number: renumbered with it)
    lines = tuple(ln if ln.target is None else dataclasses.replace(ln, target=number(ln.target))
                  for ln in lines)
    renumbered = dataclasses.replace(log, lines=lines)
    reference, compiled = both(renumbered, monkeypatch)
    assert reference.stall is None
    lean = replay_mod._replayed_natively(renumbered, None, 0.0, 5_000_000, 1e12, lean=True)
    if renumber in ("file", "sparse"):
        assert difference(reference, compiled) is None, difference(reference, compiled)
        assert difference(reference, lean.trace()) is None, difference(reference, lean.trace())
    else:
        assert compiled is None and lean is None
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (simulate_oplog: the engine, whole)
        assert difference(reference, simulate_oplog(renumbered)) is None


def test_equal_common_attrs_are_one_dict(monkeypatch):
    """Most ops' attrs are a dict of no entry (a host action's) or of its current stream alone
    (an enqueued op's): the compiled replay makes one dict for each such content, shared by the
    ops (trace.Op's attrs are read-only), and a private copy for an op whose attrs change (a
    record's or wait_event's event): ~240 bytes a line less at the replay's peak."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    log = load_oplog_text("".join(
        '{"op": "launch", "stream": "s%d", "writes": ["a"]}\n{"op": "host"}\n'
        '{"op": "record", "stream": "s%d", "event": "e"}\n'
        '{"op": "wait_event", "stream": "t", "event": "e"}\n' % (i % 2, i % 2)
        for i in range(50)))
    trace = replay_mod._replayed_natively(log, None, 0.0, 5_000_000, 1e12)
    assert trace is not None
    by_content: dict = {}
    for op in trace.ops:
        by_content.setdefault(tuple(op.attrs.items()), set()).add(id(op.attrs))
    assert len(by_content[()]) == 1  # (host actions of no attrs: one dict)
    assert len(by_content[(("current_stream", "compute"),)]) == 1
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")  # (the changed ones changed only their own)
    assert difference(simulate_oplog(log), trace) is None


THREADED_LOGS = {
    "a hand-off": '{"op": "put", "channel": "q"}\n{"op": "get", "host": "aux", "channel": "q"}\n',
    "two threads": '{"op": "launch", "stream": "s", "writes": ["a"]}\n'
                   '{"op": "host", "host": "aux", "reads": ["a"]}\n',
    # the get first: it blocks until the put (a later line of the other thread) is issued; the
    # put waits for the get to start (a get is taken as it starts)
    "a get before its put": '{"op": "host", "dur": 5}\n{"op": "get", "channel": "q"}\n'
                            '{"op": "host", "host": "aux", "dur": 30}\n'
                            '{"op": "put", "host": "aux", "channel": "q"}\n'
                            '{"op": "launch", "stream": "s", "writes": ["a"]}\n',
    # two threads wait for the same line of a third (one Signal, two waiters resumed in one
    # step, in the order they began waiting), one of them making a new stream as it resumes
    "two waiters of one line": '{"op": "host", "dur": 50}\n'
                               '{"op": "record", "stream": "s", "event": "e"}\n'
                               '{"op": "host", "host": "t2", "dur": 1}\n'
                               '{"op": "host", "host": "t3", "dur": 2}\n'
                               '{"op": "wait_event", "host": "t3", "stream": "s2", "event": "e"}\n'
                               '{"op": "wait_event", "host": "t2", "stream": "s3", "event": "e"}\n'
                               '{"op": "launch", "host": "t2", "stream": "s3", "dur": 4}\n'
                               '{"op": "sync_device", "host": "t3"}\n',
    # no gates (no state in common): a call's own settle waits, a blocking op's after it is made
    "no shared state": '{"op": "host", "dur": 50}\n{"op": "sync_stream", "stream": "a"}\n'
                       '{"op": "host", "host": "aux", "dur": 10}\n'
                       '{"op": "launch", "host": "aux", "stream": "b"}\n'
                       '{"op": "wait_event", "host": "aux", "stream": "c", "event": "e"}\n',
    # a settle's timeout falls short of the clock by a rounding (21.1 + (114.8 - 21.1) is
    # 114.79999999999998): the call's own settle waits again (after the line's gates)
    "a settle short of its clock": '{"op": "record", "stream": "s", "event": "e", "t": 21.1}\n'
                                   '{"op": "wait_event", "host": "aux", "stream": "s2", "event": "e"}\n'
                                   '{"op": "wait_event", "host": "aux", "stream": "s3", "event": "e", "t": 114.8}\n'
                                   '{"op": "launch", "host": "aux", "stream": "s3", "t": 114.8}\n'
                                   '{"op": "host", "dur": 93.7}\n{"op": "launch", "stream": "s3"}\n',
    # the same without gates: a wait_event's first settle falls short, it reads the event, and
    # its enqueue's settle waits again, to 114.8, where the main thread's sync resumes first
    "a second settle": '{"op": "host", "host": "aux", "dur": 21.1}\n'
                       '{"op": "sync_stream", "host": "aux", "stream": "x"}\n'
                       '{"op": "wait_event", "host": "aux", "stream": "y", "event": "f", "t": 114.8}\n'
                       '{"op": "free", "host": "aux", "buffer": "b", "t": 220.3}\n'
                       '{"op": "host", "dur": 114.8}\n{"op": "sync_stream", "stream": "z"}\n'
                       '{"op": "launch", "stream": "z"}\n',
    # a handle issued on one thread, waited on another; a device sync on a third
    "a handle across threads": '{"op": "group", "group": "g", "backend": "nccl", "ranks": [0, 1]}\n'
                               '{"op": "isend", "peer": 1, "group": "g", "tensors": ["a"], "handle": "h"}\n'
                               '{"op": "irecv", "rank": 1, "peer": 0, "group": "g", "tensors": ["a"]}\n'
                               '{"op": "wait", "host": "aux", "handle": "h", "blocking": true}\n'
                               '{"op": "sync_device", "host": "t3"}\n',
}


@pytest.mark.parametrize("name", sorted(THREADED_LOGS))
def test_several_threads_on_a_rank_replay_compiled_to_the_same_trace(monkeypatch, name):
    log = load_oplog_text(THREADED_LOGS[name])
    assert threaded(log)
    for s, j in TIMINGS:
        reference, compiled = both(log, monkeypatch, s, j)
        assert reference.stall is None
        diff = difference(reference, compiled)
        assert diff is None, f"{name} (seed {s}, jitter {j}): {diff}"


def bound_outcome(log, monkeypatch, native_path: str, seed, jitter, max_ops, max_time):
    """What a replay under the bounds gives on one path ("0": the engine's, "1": the compiled
    replay alone, never falling back): ("error", its class, its message) or ("trace", the trace)
    or ("fell back",) where the compiled replay gave up."""
    monkeypatch.setenv("STREAMSIM_NATIVE", native_path)
    try:
        if native_path == "0":
            got = simulate_oplog(log, seed=seed, jitter=jitter, max_ops=max_ops,
                                 max_time=max_time)
        else:
            got = replay_mod._replayed_natively(log, seed, jitter, max_ops, max_time)
    except Exception as e:  # (the bound's error, whatever the path raises: compared below)
        return ("error", type(e).__name__, str(e))
    return ("fell back",) if got is None else ("trace", got)


BOUNDED_LOGS = max(150, GENERATED // 10)


@pytest.mark.parametrize("bound", ("max_ops", "max_time"))
def test_a_bound_passed_is_worded_by_the_compiled_replay_as_the_engine_words_it(monkeypatch,
                                                                              bound):
    """A run past ``max_ops`` or ``max_time`` stops where the engine's stops, with the engine's
    error word for word (the line it was running, the thread whose clock passed the bound),
    without the engine: at 10,000,000 lines and the default ``max_ops``, the engine took 58 s
    and 6.4 GiB to say so. The bound is drawn below the run's ops or end time, so the reference
    always stops; where it stops is any line, thread or rank of the generated logs."""
    worded = 0
    for seed in range(BOUNDED_LOGS):
        text = covered_log(seed)
        log = load_oplog_text(text)
        s, j = TIMINGS[seed % len(TIMINGS)]
        monkeypatch.setenv("STREAMSIM_NATIVE", "0")
        whole = simulate_oplog(log, seed=s, jitter=j)
        if whole.stall is not None or len(whole.ops) < 2:
            continue
        R = random.Random(seed)
        limits = {"max_ops": 5_000_000, "max_time": 1e12}
        if bound == "max_ops":
            limits["max_ops"] = R.randrange(1, len(whole.ops))
        else:
            limits["max_time"] = R.uniform(0.0, whole.end_time)
        reference = bound_outcome(log, monkeypatch, "0", s, j, **limits)
        compiled = bound_outcome(log, monkeypatch, "1", s, j, **limits)
        what = f"log seed {seed}, {limits}:\n{text}"
        if reference[0] == "trace":  # (a time bound past every clock the run compares)
            assert compiled[0] == "trace", what
            assert difference(reference[1], compiled[1]) is None, what
            continue
        assert reference[1] in ("OpsBoundExceeded", "TimeBoundExceeded"), (reference, what)
        assert compiled == reference, what
        worded += 1
    assert worded >= BOUNDED_LOGS // 2, worded


def test_a_bound_passed_on_a_thread_of_several_is_worded_as_the_engine_words_it(monkeypatch):
    """The settles of a rank of several threads (a line waits for simulated time to reach its
    thread's clock before it touches the state the threads share) pass the time bound where
    the engine's do, and say so in its words."""
    threads = load_oplog_text("".join(
        '{"op": "host", "host": "%s", "dur": 5}\n{"op": "launch", "host": "%s", "stream": "s"}\n'
        % (t, t) for t in ("main", "aux") * 3))
    assert threaded(threads)
    for limit in (3.0, 6.0, 9.5, 12.0, 14.5):
        reference = bound_outcome(threads, monkeypatch, "0", None, 0.0, 5_000_000, limit)
        compiled = bound_outcome(threads, monkeypatch, "1", None, 0.0, 5_000_000, limit)
        assert reference[0] == "error" and compiled == reference, (limit, reference, compiled)
    log = load_oplog_text("".join('{"op": "launch", "stream": "s", "dur": 5}\n'
                                  for _ in range(9)))
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    with pytest.raises(BoundExceeded, match=r"\.jsonl:6: the model issued more than 10 ops"):
        replay_mod._replayed_natively(log, None, 0.0, 10, 1e12)
    with pytest.raises(BoundExceeded, match="max_time=20 us"):
        replay_mod._replayed_natively(log, None, 0.0, 100, 20.0)


def test_the_comparison_catches_a_difference(monkeypatch):
    log = load_oplog_text(covered_log(3))
    reference, compiled = both(log, monkeypatch)
    assert difference(reference, compiled) is None
    import dataclasses
    moved = dataclasses.replace(compiled, ops=compiled.ops[:-1] + (
        dataclasses.replace(compiled.ops[-1], end_seq=compiled.ops[-1].end_seq + 1),))
    assert "end_seq" in difference(reference, moved)


def test_ops_on_the_same_refs_one_after_another_share_their_accesses(monkeypatch):
    """A run holds its ops' accesses as ints (an int an op: its place in one pool of ints, where
    a place holds how many and each one's number; a tuple of ``Access`` objects an op before:
    48 MB at 1,000,000 lines of the random program), and a run of ops on the same refs (a
    recorded log's in-place ops on one tensor) shares one place; made as ``Op`` s, they share
    one tuple. An op after one on other refs has a place and a tuple of its own, equal where
    its refs are."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (the compiled replay's, whatever the suite
    # runs under)
    text = "\n".join([
        '{"op": "alloc", "buffer": "a", "nbytes": 64}',
        '{"op": "alloc", "buffer": "b", "nbytes": 64}',
        '{"op": "host", "name": "fill_", "reads": ["a"], "writes": ["a"], "dur": 1.0}',
        '{"op": "host", "name": "add_", "reads": ["a"], "writes": ["a"], "dur": 1.0}',
        '{"op": "host", "name": "zero_", "writes": ["b"], "dur": 1.0}',
        '{"op": "host", "name": "mul_", "reads": ["a"], "writes": ["a"], "dur": 1.0}',
    ])
    run = simulate_oplog(load_oplog_text(text), lean=True)
    n = len(run.columns)
    # places: none (0), then fill_ and add_ (1 + 2 ints), zero_ (1 + 1), mul_ (1 + 2)
    assert run.columns.access_bytes == 4 * n + 4 * (1 + 3 + 2 + 3)
    by_name = {op.name: op for op in simulate_oplog(load_oplog_text(text)).ops}
    assert by_name["fill_"].accesses is by_name["add_"].accesses
    assert by_name["mul_"].accesses is not by_name["add_"].accesses
    assert by_name["mul_"].accesses == by_name["add_"].accesses


def test_a_runs_after_edges_are_ints_in_its_pool(monkeypatch):
    """An op's after edges (the ops it waits for before it starts) are ints in the run's pool,
    as its accesses are: an int an op (its place; 0, none) and, for an op with edges, how many
    and each op id; a tuple an op before (``()`` for most), an int object an edge. Made as
    ``Op`` s, they are the reference's tuples, and the HB pass on the columns finds what it finds
    on the ops."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    from streamsim.analysis import hb
    text = "\n".join([
        '{"op": "launch", "name": "k", "writes": ["x"], "dur": 5.0}',
        '{"op": "isend", "peer": 1, "tensors": ["x"], "handle": "s", "dur": 3.0}',
        '{"op": "irecv", "rank": 1, "peer": 0, "tensors": ["y"], "handle": "r", "dur": 3.0}',
        '{"op": "wait", "rank": 1, "handle": "r"}',
        '{"op": "launch", "rank": 1, "name": "use", "reads": ["y"], "dur": 1.0}',
        '{"op": "launch", "name": "k2", "writes": ["x"], "dur": 1.0}',
    ])
    log = load_oplog_text(text)
    run = simulate_oplog(log, lean=True)
    n = len(run.columns)
    reference = simulate_oplog(log).ops
    # the send waits for the compute stream's last op (k), the wait's stream op for the recv
    assert [(op.name, op.after) for op in reference if op.after] == [("isend", (1,)),
                                                                     ("wait", (7,))]
    # the pool: none (0); five accesses on other refs than the op before's (1 + 1 each); the
    # two ops' edges (1 + 1 each)
    assert run.columns.access_bytes == 4 * n + 4 * (1 + 5 * 2 + 2 * 2)
    assert run.trace().ops == reference
    lean = simulate_oplog(log, lean=True)
    assert native.hb_rows(LeanTrace(lean), None, hb.HAZARD_KINDS, rows_only=True) == \
        native.hb_rows(simulate_oplog(log), None, hb.HAZARD_KINDS, rows_only=True)


def test_an_ops_index_is_counted_not_kept(monkeypatch):
    """A run keeps no op's index among its agent's ops (an int an op, 8 MB at 1,000,000 lines):
    an op made alone counts it from a checkpoint of every agent's count (one every 4,096 ops or
    more), the ops made together count as they go, and the HB pass counts its own. Past several
    checkpoints, on ops of several agents, each is the reference's."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    rng = random.Random(7)
    text = "\n".join(json.dumps({"op": "launch", "name": "k", "stream": f"s{rng.randrange(3)}",
                                  "writes": [f"b{i % 50}"], "dur": 1.0}) for i in range(6000))
    log = load_oplog_text(text)
    reference = simulate_oplog(log).ops
    run = simulate_oplog(log, lean=True)
    picks = sorted(rng.sample(range(len(reference)), 300)) + [0, 4095, 4096, 4097,
                                                              len(reference) - 1]
    assert [run.columns.op(i).index for i in picks] == [reference[i].index for i in picks]
    from streamsim.analysis import hb
    assert native.hb_rows(LeanTrace(run), None, hb.HAZARD_KINDS, rows_only=True) == \
        native.hb_rows(simulate_oplog(log), None, hb.HAZARD_KINDS, rows_only=True)
    assert run.trace().ops == reference


def test_many_ops_waited_for_at_once(monkeypatch):
    """The processes waiting for an op to end are kept in a table of the ops that have waiters
    now (two ints an op before): with 150 streams each waiting for another event of one slow
    stream at once, the table grows past its first 64 entries and each op leaves it as it ends,
    and the run is the reference's, op for op."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    lines = []
    for i in range(150):
        lines.append({"op": "launch", "stream": "slow", "name": "k", "writes": [f"a{i}"],
                      "dur": 10.0})
        lines.append({"op": "record", "stream": "slow", "event": f"e{i}"})
    for i in range(150):
        lines.append({"op": "wait_event", "stream": f"t{i}", "event": f"e{i}"})
        lines.append({"op": "launch", "stream": f"t{i}", "name": "use", "reads": [f"a{i}"],
                      "dur": 1.0})
    log = load_oplog_text("\n".join(json.dumps(x) for x in lines))
    run = simulate_oplog(log, lean=True)
    assert run is not None and run.columns is not None  # (the compiled replay ran)
    reference = simulate_oplog(log).ops
    assert run.trace().ops == reference
    waits = [op for op in reference if op.kind == "wait_event" and op.agent.kind == "stream"]
    assert len(waits) == 150 and sum(op.end > op.enqueued for op in waits) >= 100


def test_enqueued_times_kept_as_rules_and_exceptions(monkeypatch, tmp_path):
    """Once a run is kept as columns, an op's enqueued time is a rule (its own start, or its
    issuer's) where one gives it and kept as it is where none does (a blocking call's, a
    batch member's...): on generated logs, some with such ops, the ops made of the run (their
    enqueued times read from the rules and the exceptions) are the reference's."""
    from .test_metrics import lean_runs
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    with_exceptions = 0
    for i, trace, lean in lean_runs(tmp_path, 150):
        kept = lean.columns.enq_kept
        assert kept >= 0, f"log {i}"
        with_exceptions += kept > 0
        assert lean.ops == trace.ops, f"log {i}"
    assert with_exceptions >= 10, with_exceptions


def test_a_run_keeps_what_its_ops_read_of_their_lines_as_numbers_of_few_values(monkeypatch):
    """Once a run lets its lines go, it keeps what its ops read of each line (kind, name, path,
    step, event; a recorded line's site and t) as numbers into a list of the values kept lines
    name, each once, and each line's five as one number of their combination, each once: not the lines' whole table of values, which holds each line's refs (a tuple
    about every line: keeping it was 12 MiB more at 1,000,000 lines of the random program than
    the objects themselves, five a line, had been). The ops made of the kept numbers are the
    ops the lines make."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    lines = [json.dumps({"op": "launch", "name": f"k{i % 3}", "stream": f"s{i % 2}",
                         "reads": [f"a{i}", f"b{i}"], "writes": [f"c{i}"], "step": i % 4})
             for i in range(300)]
    text = "\n".join(lines)
    log = load_oplog_text(text)
    run = simulate_oplog(log, lean=True)
    # None, the kind, three names, the path, four steps (no event): not the 600 refs' tuples
    assert run.columns.kept_values == 1 + 1 + 3 + 1 + 4
    # each line one int, its combination of those: none, then the 12 (name, step) pairs
    # (KEPT_FIELDS ints a line before: 16 MB more at 1,000,000 lines)
    assert run.columns.kept_combinations == 1 + 12
    # and each op's attrs an int, its place among two dicts: the host actions' (none), the
    # kernels' (their current stream, compute) (a pointer an op before: 16 MB at 1,000,000)
    assert run.columns.attr_dicts == 2
    # and no op's enqueued time: a host action is enqueued as it starts, a kernel as the host
    # action that issued it starts (a double an op before); made as Ops, the reference's
    assert run.columns.enq_kept == 0
    assert run.trace().ops == simulate_oplog(log).ops
