"""The compiled core is held byte-identical to the pure-Python reference (issue 26), as CPython
keeps ``_pickle`` equal to ``pickle.py``: ``streamsim check``'s text and JSON reports (JSON
versions 4 and 3), with and
without fix costing, under seeds and jitter, are the same bytes on both paths, on generated op logs
of 1-3 ranks and two host threads that use every op kind the compiled stages cover
(``streamsim.native.COVERED_KINDS``), and on every op log written out in the tests.

A report that differs fails with the log and the first differing line. The suite runs
``DIFFERENTIAL_LOGS`` generated logs (2,000); for the long run::

    STREAMSIM_DIFFERENTIAL_LOGS=20000 .venv/bin/python -m pytest -q tests/native/test_differential.py

Skipped where the compiled module was not built (no compiler at install time): then there is only
one path. ``STREAMSIM_NATIVE=0`` in the environment does not stop it: it switches the paths itself.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import random
from pathlib import Path

import pytest

from streamsim import native
from streamsim.pipeline import check_oplog
from streamsim.oplog import load_oplog
from streamsim.report.jsonout import dumps_json
from streamsim.report.report import render_text
from streamsim.sim.errors import InputError, ModelError

if not native.built() and os.environ.get("CI"):  # CI builds it: a skip there would hide a break
    raise RuntimeError("CI: the compiled core (streamsim.native) is not built: pip install -e . "
                       "printed why; the differential tests must run in CI")
pytestmark = pytest.mark.skipif(not native.built(), reason="the compiled core is not built")

DIFFERENTIAL_LOGS = int(os.environ.get("STREAMSIM_DIFFERENTIAL_LOGS", "2000"))
CHUNK = 100  # logs per test case (a failure names its chunk's seeds)
TIMINGS = ((None, 0.0), (1, 0.5), (2, 2.0), (3, 0.1))  # (seed, jitter)
NBYTES = 64
BUFFERS = ("a", "b", "c")
COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all",
               "reduce", "gather", "scatter", "barrier")
TESTS = Path(__file__).resolve().parents[1]


def generated_log(seed: int, ranks: int | None = None) -> str:
    """A valid op log of 1-3 ranks (or ``ranks``): kernels and host work on two threads, events
    and syncs, NCCL p2p (batches, both stream layouts or none named, receives from any source),
    every collective, gloo objects, handle waits and queries, allocations, frees and
    ``record_stream``, views with offsets and strided views, the rooted collectives and the
    barrier, put/get hand-offs between the two threads of a rank. One global sequence of steps
    projected on the ranks (no send waits for a receive issued later on its rank)."""
    R = random.Random(seed)
    drawn = R.randint(1, 3)
    ranks = drawn if ranks is None else ranks
    lines: list[dict] = []
    if R.random() < 0.5:
        lines.append({"op": "config", "launch_overhead": R.choice((0, 2, 5))})
    for group, backend in (("pp", "nccl"), ("cpu", "gloo")):
        if R.random() < 0.5:
            lines.append({"op": "group", "group": group, "backend": backend,
                          "ranks": list(range(ranks)), "latency": R.choice((1, 10, 30)),
                          "bandwidth": R.choice((10, 1000, 25000)),
                          "eager_bytes": R.choice((0, 32, 65536))})
    handles: dict[int, list[str]] = {r: [] for r in range(ranks)}
    recorded: dict[int, set] = {r: set() for r in range(ranks)}
    freed: dict[int, set] = {r: set() for r in range(ranks)}
    n = [0]

    def name(prefix: str) -> str:
        n[0] += 1
        return f"{prefix}{n[0]}"

    def ref(r: int):
        buf = R.choice([b for b in BUFFERS if b not in freed[r]] or ["spare"])
        if R.random() < 0.5:
            return buf
        if R.random() < 0.15:  # a strided view (x[:, 0::2]): some bytes of its hull (mixed segments)
            sizes = [R.randint(1, 3) for _ in range(R.randint(1, 2))]
            strides = [R.randint(0, 4) for _ in sizes]
            return {"buffer": buf, "offset": R.randint(0, 20), "sizes": sizes,
                    "strides": strides, "itemsize": R.randint(1, 2)}
        off = R.randint(0, NBYTES - 1)
        view = {"buffer": buf, "offset": off, "nbytes": R.randint(1, NBYTES - off)}
        if R.random() < 0.2:
            view["window"] = sorted((R.choice((0.0, 0.25, 0.5)), R.choice((0.5, 0.75, 1.0))))
        return view

    def refs(r: int) -> list:
        return [ref(r) for _ in range(R.randint(0, 2))]

    def stream() -> str:
        return R.choice(("compute", "side", "copy"))

    def local(r: int) -> None:
        what = R.choice(("launch", "launch", "launch", "host", "record", "wait_event",
                         "sync_event", "sync_stream", "sync_device", "wait", "query",
                         "record_stream", "free"))
        dur = R.choice((1.0, 5.0, 20.0))
        if what == "launch":
            lines.append({"op": "launch", "rank": r, "stream": stream(), "reads": refs(r),
                          "writes": refs(r), "dur": dur, "step": R.randint(0, 2)})
        elif what == "host":
            lines.append({"op": "host", "rank": r, "reads": refs(r), "writes": refs(r), "dur": dur})
        elif what == "record":
            ev = R.choice(("e0", "e1"))
            recorded[r].add(ev)
            lines.append({"op": "record", "rank": r, "stream": stream(), "event": ev})
        elif what in ("wait_event", "sync_event") and recorded[r]:
            lines.append({"op": what, "rank": r, "stream": stream(),
                          "event": R.choice(sorted(recorded[r]))})
        elif what in ("sync_stream", "sync_device"):
            lines.append({"op": what, "rank": r, "stream": stream()})
        elif what in ("wait", "query") and handles[r]:
            h = R.choice(handles[r])
            if what == "query":
                lines.append({"op": "query", "rank": r, "handle": h})
            else:
                lines.append({"op": "wait", "rank": r, "stream": stream(), "handle": h,
                              "blocking": R.random() < 0.5})
        elif what == "record_stream":
            buf = R.choice(BUFFERS)
            if buf not in freed[r]:
                lines.append({"op": "record_stream", "rank": r, "buffer": buf, "stream": "side"})
        elif what == "free":
            live = [b for b in BUFFERS if b not in freed[r]]
            if live and R.randint(0, 2) == 0:
                buf = R.choice(live)
                freed[r].add(buf)
                lines.append({"op": "free", "rank": r, "buffer": buf})

    def handle(r: int) -> str:
        h = name("h")
        handles[r].append(h)
        return h

    # (a log whose lines name no layout: its p2p lines are the fast paths' to read; drawn from
    # a second generator, so that every other draw is as it was before these were added)
    R2 = random.Random(~seed)
    layout = {"p2p_streams": R.choice(("per_group", "per_pair"))}
    if R2.random() < 0.5:
        layout = {}

    def message(src: int, dst: int) -> None:
        nbytes = R.choice((4, 2048))
        send = {"op": "isend", "rank": src, "peer": dst, "tensors": [ref(src)],
                "handle": handle(src), "nbytes": nbytes, **layout}
        recv = {"op": "irecv", "rank": dst, "peer": src, "tensors": [ref(dst)],
                "handle": handle(dst), "nbytes": nbytes, **layout}
        if R.random() < 0.5:
            n[0] += 1
            send["batch"] = recv["batch"] = n[0]
        elif R2.random() < 0.25:  # a receive from any source, its peer the source observed
            recv["any_source"] = True
        if R.random() < 0.5:
            send["dur"] = R.choice((1.0, 30.0))
        lines.extend([send, recv])

    for r in range(ranks):
        for b in BUFFERS:
            lines.append({"op": "alloc", "rank": r, "buffer": b, "nbytes": NBYTES,
                          "stream": R.choice(("compute", "compute", "side"))})
    threaded = {r for r in range(ranks) if R.random() < 0.5}
    for _ in range(R.randint(1, 24)):
        kind = R.choice(("local",) * 6 + ("message", "collective", "object", "handoff"))
        if kind == "handoff":  # a put on one thread, its get on the other (a fresh channel)
            if threaded:
                r = R.choice(sorted(threaded))
                giver = R.choice(("main", "aux"))
                taker = "aux" if giver == "main" else "main"
                channel = name("q")
                lines.append({"op": "put", "rank": r, "host": giver, "channel": channel})
                lines.append({"op": "get", "rank": r, "host": taker, "channel": channel})
        elif kind == "local" or ranks == 1:
            local(R.randint(0, ranks - 1))
        elif kind == "message":
            src = R.randint(0, ranks - 1)
            message(src, R.choice([r for r in range(ranks) if r != src]))
        elif kind == "collective":
            op = R.choice(COLLECTIVES)
            root = R.randint(0, ranks - 1)
            for r in range(ranks):
                x = {"op": op, "rank": r, "ranks": list(range(ranks)), "handle": handle(r)}
                lines.append({**x, **collective_tensors(op, r, ranks, root, ref)})
        else:
            src = R.randint(0, ranks - 1)
            dst = R.choice([r for r in range(ranks) if r != src])
            nbytes = R.choice((8, 100000))
            if R.random() < 0.5:
                lines.append({"op": "send_object", "rank": src, "peer": dst, "nbytes": nbytes})
            else:
                lines.append({"op": "isend_object", "rank": src, "peer": dst, "nbytes": nbytes,
                              "handle": handle(src)})
            lines.append({"op": "recv_object", "rank": dst, "peer": src})
    out = []
    for x in lines:
        if x.get("rank") in threaded and x["op"] not in ("alloc", "put", "get") and \
                R.random() < 0.5:
            x["host"] = "aux"
        if x.get("rank") in threaded and R.randint(0, 3) == 0:
            out.append({"op": "host", "rank": x["rank"], "host": x.get("host", "main"),
                        "name": "busy", "dur": R.choice((3.0, 40.0))})
        out.append(x)
    return "".join(json.dumps(x) + "\n" for x in out)


def collective_tensors(op: str, rank: int, ranks: int, root: int, ref) -> dict:
    """The fields of a collective line of ``rank`` that name its root and tensors (``ref(rank)``
    draws one): a rooted one's ``root``; ``tensors`` in place, or ``inputs`` and ``outputs`` (a
    gather's list on the root alone, a scatter's too); none for a barrier."""
    x: dict = {}
    if op in ("reduce", "gather", "scatter"):
        x["root"] = root
    if op in ("all_reduce", "reduce"):
        x["tensors"] = [ref(rank)]
    elif op == "gather":  # (the gather list on the root alone)
        x["inputs"] = [ref(rank)]
        if rank == root:
            x["outputs"] = [ref(rank) for _ in range(ranks)]
    elif op == "scatter":  # (the scatter list on the root alone)
        x["outputs"] = [ref(rank)]
        if rank == root:
            x["inputs"] = [ref(rank) for _ in range(ranks)]
    elif op != "barrier":
        x["inputs"], x["outputs"] = [ref(rank)], [ref(rank)]
    return x


def reports(path: Path, seed: int | None, jitter: float, fix_cost: bool) -> tuple[str, str, str]:
    """The text and JSON reports (format versions 4 and 3) of ``streamsim check`` on the path
    the environment selects."""
    r = check_oplog(load_oplog(path), seed=seed, jitter=jitter, fix_cost=fix_cost)
    return render_text(r), dumps_json(r), dumps_json(r, version=3)


def both_paths(monkeypatch, path: Path, seed: int | None, jitter: float,
               fix_cost: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(pure-Python reports, compiled reports) of one check."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "0")
    assert not native.available()
    python = reports(path, seed, jitter, fix_cost)
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    assert native.available()
    return python, reports(path, seed, jitter, fix_cost)


def first_difference(a: str, b: str) -> str:
    """The first line where two reports differ, both ways ('' if equal)."""
    if a == b:
        return ""
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}:\n  python: {x}\n  native: {y}"
    return f"lengths differ: {len(a)} vs {len(b)} characters"


def assert_same(monkeypatch, path: Path, seed, jitter, fix_cost, what: str) -> None:
    python, compiled = both_paths(monkeypatch, path, seed, jitter, fix_cost)
    for form, a, b in zip(("text", "JSON", "JSON version 3"), python, compiled):
        diff = first_difference(a, b)
        assert not diff, (f"{what} (seed {seed}, jitter {jitter}, fix cost {fix_cost}): the "
                          f"{form} reports differ at {diff}\n{path.read_text()}")


def dense_max(monkeypatch, dense: bool) -> None:
    """Make the compiled pass keep its clocks dense (C vectors: traces of few agents, the default
    for these logs) or as dicts (traces of many agents) whatever the trace's agents."""
    from streamsim.native import _hb
    if not dense:
        monkeypatch.setattr(_hb, "DENSE_MAX_AGENTS", -1)
    else:
        monkeypatch.setattr(_hb, "DENSE_MAX_AGENTS", 1 << 30)


@pytest.mark.parametrize("chunk", range((DIFFERENTIAL_LOGS + CHUNK - 1) // CHUNK))
def test_generated_logs_give_byte_identical_reports_on_both_paths(monkeypatch, tmp_path, chunk):
    """Each generated log, under one of four timings (no seed; seeds with jitter), with fix
    costing on for two logs in three (its re-runs go through the compiled pass too); one log in
    five with the compiled pass's clocks as dicts, the others dense (5 is prime to 4 and 3: each
    form meets every timing with and without fix costing)."""
    path = tmp_path / "gen.jsonl"
    for i in range(chunk * CHUNK, min((chunk + 1) * CHUNK, DIFFERENTIAL_LOGS)):
        path.write_text(generated_log(i))
        seed, jitter = TIMINGS[i % len(TIMINGS)]
        dense_max(monkeypatch, i % 5 != 0)
        assert_same(monkeypatch, path, seed, jitter, i % 3 != 0,
                    f"generated log {i} ({'dense' if i % 5 else 'dict'} clocks)")


def test_generated_logs_take_dense_clocks_by_default():
    """Under the default threshold the generated logs' traces (at most 3 ranks) keep dense
    clocks, so the comparison above covers the form a model's trace takes."""
    from streamsim.native import _hb
    from streamsim.oplog import simulate_oplog
    most = max(len(simulate_oplog(load_oplog_text(generated_log(i))).agents) for i in range(200))
    assert 3 < most <= _hb.DENSE_MAX_AGENTS


MANY_RANKS = 150  # a trace of more agents than DENSE_MAX_AGENTS: dict clocks by default


@pytest.mark.parametrize("i", range(4))
def test_a_log_of_many_agents_gives_byte_identical_reports(monkeypatch, tmp_path, i):
    """A generated log of 150 ranks (over 256 agents: the compiled pass keeps its clocks as dicts
    under the default threshold), then the same log with dense clocks forced."""
    from streamsim.native import _hb
    from streamsim.oplog import simulate_oplog
    text = generated_log(10_000 + i, ranks=MANY_RANKS)
    assert len(simulate_oplog(load_oplog_text(text)).agents) > _hb.DENSE_MAX_AGENTS
    path = tmp_path / "many.jsonl"
    path.write_text(text)
    seed, jitter = TIMINGS[i % len(TIMINGS)]
    assert_same(monkeypatch, path, seed, jitter, i % 2 == 0, f"many agents {i} (dict clocks)")
    dense_max(monkeypatch, True)
    assert_same(monkeypatch, path, seed, jitter, i % 2 == 0, f"many agents {i} (dense clocks)")


def test_logs_use_every_covered_kind():
    """The generator reaches every op kind the compiled pass covers (else equality on the others
    would be untested)."""
    from streamsim.oplog import simulate_oplog
    seen: set[str] = set()
    path = Path(os.devnull)
    for i in range(200):
        log = load_oplog_text(generated_log(i))
        seen |= {op.kind for op in simulate_oplog(log).ops}
    assert seen == set(native.COVERED_KINDS), sorted(set(native.COVERED_KINDS) ^ seen)
    del path


@pytest.mark.skipif(not native.built(), reason="the compiled core is not built")
def test_logs_have_strided_views_the_compiled_pass_runs_on(monkeypatch):
    """One log in several has a strided view (mixed segments), and the compiled pass runs on it
    (it no longer hands such a trace to the reference)."""
    monkeypatch.delenv("STREAMSIM_NATIVE", raising=False)
    from streamsim.analysis.findings import RAW, USE_AFTER_FREE, WAR, WAW
    from streamsim.oplog import simulate_oplog
    from streamsim.trace import issue_keys
    strided = 0
    for i in range(100):
        t = simulate_oplog(load_oplog_text(generated_log(i)))
        if any(acc.view.pattern is not None for op in t.ops for acc in op.accesses):
            strided += 1
            assert native.hb_rows(t, issue_keys(t), (RAW, WAR, WAW, USE_AFTER_FREE)) is not None
    assert strided >= 20, strided


def load_oplog_text(text: str):
    """An op log parsed from text (through a temporary file: the reader reads paths)."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(text)
    try:
        return load_oplog(f.name)
    finally:
        os.unlink(f.name)


def logs_in_tests() -> list[tuple[str, str]]:
    """``(where, text)`` of every op log written out as a string in tests/ (a literal whose
    non-comment lines are all JSON objects with an ``op``): the ones that load are compared."""
    found = []
    for py in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and '"op"' in node.value and "\n" in node.value:
                lines = [x for x in node.value.splitlines() if x.strip() and
                         not x.lstrip().startswith("#")]
                try:
                    ok = lines and all(isinstance(d := json.loads(x), dict) and "op" in d
                                       for x in lines)
                except ValueError:
                    ok = False
                if ok:
                    found.append((f"{py.relative_to(TESTS)}:{node.lineno}", node.value))
    return found


def test_every_op_log_of_the_tests_gives_byte_identical_reports(monkeypatch, tmp_path):
    """The hand-written logs of every test (p2p layouts, declarations, steps, deadlocks, ...)."""
    compared = 0
    for where, text in logs_in_tests():
        path = tmp_path / "t.jsonl"
        try:
            path.write_text(text)
            load_oplog(path)
        except (InputError, UnicodeEncodeError):
            continue  # a log that tests an error (or lone surrogates): no report on either path
        try:
            check_oplog(load_oplog(path), fix_cost=False)
        except ModelError:
            continue  # a log that tests a bound or a stall error of the replay: no report
        for seed, jitter in TIMINGS[:2]:
            for fix_cost in (True, False):
                assert_same(monkeypatch, path, seed, jitter, fix_cost, where)
        compared += 1
    assert compared >= 20, f"only {compared} op logs found in tests/"


def test_the_comparison_catches_a_difference(monkeypatch, tmp_path):
    """The test can fail: a compiled pass that differs in one hazard's range is caught."""
    hb_rows = native.hb_rows

    def off_by_one(*args, **kwargs):
        got = hb_rows(*args, **kwargs)
        if not got or not kwargs.get("rows_only") and not got[0]:
            return got
        rows = got if kwargs.get("rows_only") else got[0]
        row = list(rows[0])
        row[6] += 1  # hi
        rows = [tuple(row)] + rows[1:]
        return rows if kwargs.get("rows_only") else (rows, *got[1:])
    hb_hazards = native.hb_hazards

    def hazards_off_by_one(*args, **kwargs):  # (the hazards a check makes of the pass)
        got = hb_hazards(*args, **kwargs)
        if got:
            h = got[0]
            got[0] = dataclasses.replace(h, range=(h.range[0], h.range[1] + 1))
        return got
    monkeypatch.setattr(native, "hb_rows", off_by_one)
    monkeypatch.setattr(native, "hb_hazards", hazards_off_by_one)
    path = tmp_path / "race.jsonl"
    path.write_text('{"op": "launch", "stream": "a", "writes": ["x"]}\n'
                    '{"op": "launch", "stream": "b", "reads": ["x"]}\n')
    with pytest.raises(AssertionError, match="reports differ"):
        assert_same(monkeypatch, path, None, 0.0, False, "race")
