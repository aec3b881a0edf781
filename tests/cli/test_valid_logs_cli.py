"""Generated *valid* op logs through the CLI, as a user runs it (issue 23's done-when): `check` with
fix costing on (the default) ends with exit 0 or 1 and a JSON report; never a traceback, never an
internal error (exit 3), never an exit 2 (the log is valid, so a 2 would blame the user for a bug of
ours); and for a log without `query` the verdict (the reported pairs and the deadlock) is the same
under every seed and jitter, and the same with and without fix costing.

The generator uses every op kind of op log v2 (declarations, kernels and host work on two threads,
events and syncs, NCCL point-to-point with batches and both p2p stream layouts and receives from
any source, every collective, rooted ones and barriers included, gloo objects, handle waits
(inferred ones too), allocations, frees and `record_stream`, hand-offs between threads with
`put`/`get`, plain and strided buffer refs); `query` only in the logs it
marks as timing-dependent, where only the ending is checked. In CI it runs a bounded number of
logs; for the long run::

    STREAMSIM_VALID_LOGS=10000 .venv/bin/python -m pytest -q tests/cli/test_valid_logs_cli.py

The generated programs are projections of one global sequence of steps on every rank, so that no
send waits for a receive that its rank issues later: deadlocks are not the point here (a verdict
that includes one must still not change with the seed).
"""
from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsim.cli.main import main
from streamsim.report.jsonread import op_of

EXAMPLES = int(os.environ.get("STREAMSIM_VALID_LOGS", "60"))
NBYTES = 64
BUFFERS = ("a", "b", "c")
COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all", "barrier",
               "reduce", "gather", "scatter")
TIMINGS = (("--seed", "1", "--jitter", "0.5"), ("--seed", "2", "--jitter", "2"),
           ("--seed", "3", "--jitter", "0.1"))


@st.composite
def valid_logs(draw) -> tuple[str, bool]:
    """``(text, has_query)``: a valid op log of 1-3 ranks using every kind of line."""
    ranks = draw(st.integers(1, 3))
    lines: list[dict] = []
    if draw(st.booleans()):
        lines.append({"op": "config", "launch_overhead": draw(st.sampled_from((0, 2, 5)))})
    for group, backend in (("pp", "nccl"), ("cpu", "gloo")):  # the default groups of the ops
        if draw(st.booleans()):
            lines.append({"op": "group", "group": group, "backend": backend,
                          "ranks": list(range(ranks)), "latency": draw(st.sampled_from((1, 10, 30))),
                          "bandwidth": draw(st.sampled_from((10, 1000, 25000))),
                          "eager_bytes": draw(st.sampled_from((0, 32, 65536)))})
    handles: dict[int, list[str]] = {r: [] for r in range(ranks)}
    recorded: dict[int, set] = {r: set() for r in range(ranks)}
    freed: dict[int, set] = {r: set() for r in range(ranks)}
    n = [0]
    has_query = [False]

    def name(prefix: str) -> str:
        n[0] += 1
        return f"{prefix}{n[0]}"

    def ref(r: int):
        buf = draw(st.sampled_from([b for b in BUFFERS if b not in freed[r]] or ["spare"]))
        if draw(st.booleans()):
            return buf
        if draw(st.integers(0, 3)) == 0:  # a strided view: the even or odd columns of (2, 8) f32
            return {"buffer": buf, "offset": draw(st.sampled_from((0, 4))), "sizes": [2, 4],
                    "strides": [8, 2], "itemsize": 4}
        off = draw(st.integers(0, NBYTES - 1))
        return {"buffer": buf, "offset": off, "nbytes": draw(st.integers(1, NBYTES - off))}

    def refs(r: int) -> list:
        return [ref(r) for _ in range(draw(st.integers(0, 2)))]

    def stream() -> str:
        return draw(st.sampled_from(("compute", "side")))

    def local(r: int) -> None:
        what = draw(st.sampled_from(("launch", "launch", "host", "record", "wait_event",
                                     "sync_event", "sync_stream", "sync_device", "wait", "query",
                                     "record_stream", "free")))
        dur = draw(st.sampled_from((1.0, 5.0, 20.0)))
        if what == "launch":
            lines.append({"op": "launch", "rank": r, "stream": stream(), "reads": refs(r),
                          "writes": refs(r), "dur": dur, "step": draw(st.integers(0, 2))})
        elif what == "host":
            lines.append({"op": "host", "rank": r, "reads": refs(r), "writes": refs(r), "dur": dur})
        elif what == "record":
            ev = draw(st.sampled_from(("e0", "e1")))
            recorded[r].add(ev)
            lines.append({"op": "record", "rank": r, "stream": stream(), "event": ev})
        elif what in ("wait_event", "sync_event") and recorded[r]:
            lines.append({"op": what, "rank": r, "stream": stream(),
                          "event": draw(st.sampled_from(sorted(recorded[r])))})
        elif what in ("sync_stream", "sync_device"):
            lines.append({"op": what, "rank": r, "stream": stream()})
        elif what in ("wait", "query") and handles[r]:
            h = draw(st.sampled_from(handles[r]))
            if what == "query":
                if draw(st.integers(0, 3)) == 0:  # a quarter of the logs that could use one
                    has_query[0] = True
                    lines.append({"op": "query", "rank": r, "handle": h})
            else:
                wait = {"op": "wait", "rank": r, "stream": stream(), "handle": h,
                        "blocking": draw(st.booleans())}
                if draw(st.integers(0, 3)) == 0:  # a wait a recorder inferred
                    wait["inferred"] = "completion"
                lines.append(wait)
        elif what == "record_stream":
            buf = draw(st.sampled_from(BUFFERS))
            if buf not in freed[r]:
                lines.append({"op": "record_stream", "rank": r, "buffer": buf, "stream": "side"})
        elif what == "free":
            live = [b for b in BUFFERS if b not in freed[r]]
            if live and draw(st.integers(0, 2)) == 0:
                buf = draw(st.sampled_from(live))
                freed[r].add(buf)
                lines.append({"op": "free", "rank": r, "buffer": buf})

    def handle(r: int) -> str:
        h = name("h")
        handles[r].append(h)
        return h

    # (the p2p stream layout belongs to the group: every line that gives it gives the same)
    layout = {"p2p_streams": draw(st.sampled_from(("per_group", "per_pair")))}

    def message(src: int, dst: int) -> None:
        nbytes = draw(st.sampled_from((4, 2048)))
        send = {"op": "isend", "rank": src, "peer": dst, "tensors": [ref(src)], "handle": handle(src),
                "nbytes": nbytes, **layout}
        recv = {"op": "irecv", "rank": dst, "peer": src, "tensors": [ref(dst)], "handle": handle(dst),
                "nbytes": nbytes, **layout}
        if draw(st.booleans()):  # batch_isend_irecv on both sides
            n[0] += 1  # (a batch of one line each side: consecutive lines of a thread share one)
            send["batch"] = recv["batch"] = n[0]
        elif draw(st.integers(0, 3)) == 0:  # a receive from any source, its peer observed
            recv["any_source"] = True
        if draw(st.booleans()):
            send["dur"] = draw(st.sampled_from((1.0, 30.0)))
        lines.extend([send, recv])

    for r in range(ranks):
        for b in BUFFERS:
            lines.append({"op": "alloc", "rank": r, "buffer": b, "nbytes": NBYTES,
                          "stream": draw(st.sampled_from(("compute", "compute", "side")))})
    for _ in range(draw(st.integers(1, 16))):
        kind = draw(st.sampled_from(("local",) * 6 + ("message", "collective", "object",
                                                       "handoff")))
        if kind == "handoff":  # a put and its get on one rank (threads are assigned below)
            r, channel = draw(st.integers(0, ranks - 1)), draw(st.sampled_from(("q0", "q1")))
            put, get = {"op": "put", "rank": r, "channel": channel}, \
                {"op": "get", "rank": r, "channel": channel}
            if draw(st.booleans()):  # a get written first: its thread blocked before the put
                put, get = get, put
            lines.extend([put, get])
        elif kind == "local" or ranks == 1:
            local(draw(st.integers(0, ranks - 1)))
        elif kind == "message":
            src = draw(st.integers(0, ranks - 1))
            message(src, draw(st.sampled_from([r for r in range(ranks) if r != src])))
        elif kind == "collective":
            op = draw(st.sampled_from(COLLECTIVES))
            root = draw(st.integers(0, ranks - 1))
            for r in range(ranks):
                x = {"op": op, "rank": r, "ranks": list(range(ranks)), "handle": handle(r)}
                if op in ("all_reduce", "reduce"):
                    x["tensors"] = [ref(r)]
                elif op == "gather":  # (the root's list on the root's line only)
                    x["inputs"] = [ref(r)]
                    if r == root:
                        x["outputs"] = refs(r) + [ref(r)]
                elif op == "scatter":
                    x["outputs"] = [ref(r)]
                    if r == root:
                        x["inputs"] = refs(r) + [ref(r)]
                elif op != "barrier":
                    x["inputs"], x["outputs"] = [ref(r)], [ref(r)]
                if op in ("reduce", "gather", "scatter"):
                    x["root"] = root
                lines.append(x)
        else:  # gloo objects on the CPU group: blocking, or a send with a handle
            src = draw(st.integers(0, ranks - 1))
            dst = draw(st.sampled_from([r for r in range(ranks) if r != src]))
            nbytes = draw(st.sampled_from((8, 100000)))
            if draw(st.booleans()):
                lines.append({"op": "send_object", "rank": src, "peer": dst, "nbytes": nbytes})
            else:
                lines.append({"op": "isend_object", "rank": src, "peer": dst, "nbytes": nbytes,
                              "handle": handle(src)})
            lines.append({"op": "recv_object", "rank": dst, "peer": src})
    threaded = {r for r in range(ranks) if draw(st.booleans())}  # ranks with a second thread
    out = []
    for x in lines:
        if x.get("rank") in threaded and x["op"] != "alloc" and draw(st.booleans()):
            x["host"] = "aux"
        if x.get("rank") in threaded and draw(st.integers(0, 3)) == 0:
            out.append({"op": "host", "rank": x["rank"], "host": x.get("host", "main"),
                        "name": "busy", "dur": draw(st.sampled_from((3.0, 40.0)))})
        out.append(x)
    return "".join(json.dumps(x) + "\n" for x in out), has_query[0]


def check(path, *options: str) -> tuple[int, dict]:
    """Run `streamsim check PATH --format json OPTIONS` in-process; its exit code and report."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["check", str(path), "--format", "json", *options])
    stderr = err.getvalue()
    assert "Traceback" not in stderr, stderr
    assert code in (0, 1), f"exit {code} on a valid log:\n{stderr}\n{path.read_text()}"
    return code, json.loads(out.getvalue())


def verdict(report: dict) -> tuple:
    """What must not depend on timing: the pairs (by kind, place and the two lines) and the
    deadlock (the ranks it blocks)."""
    def end(op_id):
        op = op_of(report, op_id)
        return (op["line"], op["kind"], op["agent"])
    pairs = sorted((h["kind"], h["rank"], h["buffer"], tuple(h["range"]), end(h["first"]),
                    end(h["second"])) for h in report["hazards"])
    return pairs, report["deadlock"] is not None


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(valid_logs())
def test_check_on_a_valid_log_never_fails_and_its_verdict_does_not_depend_on_timing(
        tmp_path_factory, log):
    text, has_query = log
    path = tmp_path_factory.mktemp("valid") / "gen.jsonl"
    path.write_text(text)
    code, report = check(path)  # the default: fix costing on
    assert "not costed" not in (report["fix_cost_note"] or ""), report["fix_cost_note"]
    if has_query:
        for options in TIMINGS[:1]:
            check(path, *options)
        return
    expected = verdict(report)
    _, bare = check(path, "--no-fix-cost")
    assert verdict(bare) == expected
    for options in TIMINGS:
        _, other = check(path, *options)
        assert verdict(other) == expected, (options, text)


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(valid_logs())
def test_the_clocks_of_a_replayed_valid_log_agree_with_graph_reachability(log):
    """On the replay of every generated log (rooted collectives, barriers, receives from any
    source and inferred waits included), the analysis' vector clocks order exactly the pairs of
    ops the brute-force HB graph (streamsim.analysis.hbgraph) reaches, and the replay's edges
    are of known kinds."""
    from streamsim.analysis.hb import hb_pass
    from streamsim.analysis.hbgraph import full_graph, happens_before
    from streamsim.kinds import EDGE_KINDS
    from streamsim.oplog import parse_oplog, simulate_oplog
    text, _ = log
    trace = simulate_oplog(parse_oplog(text, "gen.jsonl"))
    graph = full_graph(trace)
    assert {k for _, _, k in graph.edges(data="kind")} <= set(EDGE_KINDS)
    hb, reach = hb_pass(trace, keep_clocks=True).hb, happens_before(graph)
    ids = [o.id for o in trace.ops]
    assert all(hb.ordered(a, b) == (b in reach[a]) for a in ids for b in ids), text
