"""Thousands of ranks (issue 19 item 4): time and memory linear in ops + agents.

10,000 one-line ranks (a 400 KB op log) took 21.8 s and 9.5 GB. Each stage is checked on its own by
growth (the work done at 2,000 ranks over the work at 500, counted in Python lines executed: 4
when linear, 16 when quadratic, the same on a loaded machine as on an idle one: a timing ratio
failed CI at 8.7 for a linear stage), and the whole command under a memory limit, in a child
process so that a quadratic table fails fast instead of swapping.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

from streamsim.analysis.liveness import deadlock_from_stall, warnings
from streamsim.analysis.metrics import compute_metrics
from streamsim.oplog import oplog_text, parse_oplog, simulate_oplog
from streamsim.sim.runner import simulate

ROOT = Path(__file__).resolve().parents[2]
LINEAR = 6.0  # growth allowed for 4x the ranks (linear: 4, n log n: ~5, quadratic: 16)


def one_line_ranks(n: int) -> str:
    return "".join('{"op":"launch","rank":%d,"name":"k","writes":["x"]}\n' % r for r in range(n))


def ring(n: int) -> str:
    """Every rank sends (rendezvous, waited) to the next before receiving: a wait-for cycle
    through all n ranks."""
    out = []
    for r in range(n):
        out.append('{"op":"isend","rank":%d,"tensors":["x"],"peer":%d,"nbytes":1000000,'
                   '"handle":"s"}' % (r, (r + 1) % n))
        out.append('{"op":"wait","rank":%d,"handle":"s","blocking":true}' % r)
        out.append('{"op":"irecv","rank":%d,"tensors":["y"],"peer":%d}' % (r, (r - 1) % n))
    return "\n".join(out) + "\n"


MODEL = textwrap.dedent("""\
    from streamsim import Param
    PARAMS = [Param("ranks", int, 10, "ranks spawned")]
    def build(sim, p, variant):
        def program(host):
            host.launch("k", writes=[host.buffer("x", 64)])
        for r in range(p.ranks):
            sim.spawn(r, program)
    """)


def work(fn) -> int:
    """The Python lines (and calls) ``fn()`` executes: a count of the work done, not a timing, so
    the same on a busy CI machine as on an idle one (the wall-clock figures are the benchmark's,
    ``benchmarks/agents.py``). It cannot see loops inside C functions (``x in some_list``); the
    whole-command bounds below are the check on those."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += 1
        return tracer
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def growth(stage, small: int = 500, large: int = 2_000) -> float:
    """How much more work ``stage(n)`` (which prepares, then returns the callable to measure) does
    at ``large`` ranks than at ``small``."""
    return work(stage(large)) / work(stage(small))


def test_replaying_many_one_line_ranks_grows_linearly():
    """Spawning a host thread looked at every host already spawned (agents x agents)."""
    def stage(n):
        log = parse_oplog(one_line_ranks(n), "ranks.jsonl")
        return lambda: simulate_oplog(log)
    assert growth(stage) < LINEAR


def test_a_model_spawning_many_ranks_grows_linearly(tmp_path):
    path = tmp_path / "ranks.py"
    path.write_text(MODEL)

    def stage(n):
        return lambda: simulate(str(path), params={"ranks": n})
    assert growth(stage) < LINEAR


def test_a_ring_deadlock_through_many_ranks_is_explained_in_linear_time():
    """Finding the wait-for cycle ran a search per edge (ranks x ranks on a ring), and each
    blocked receive listed the host threads of its peer by scanning every host."""
    traces = {n: simulate_oplog(parse_oplog(ring(n), "ring.jsonl")) for n in (1_000, 4_000)}

    def stage(n):
        return lambda: (deadlock_from_stall(traces[n]), warnings(traces[n]))
    assert growth(stage, 1_000, 4_000) < LINEAR
    cycle = deadlock_from_stall(traces[4_000]).cycle
    assert len(cycle) == 8_000 and len(set(cycle)) == 8_000  # every host and comm stream


def test_small_wait_for_graphs_keep_the_shortest_cycle():
    """Below the budget the exact search is kept: of two equally short cycles (ranks 0-1 and ranks
    2-3, each pair waiting for each other) the one of the smallest agents is reported."""
    text = ring(2) + "".join(line.replace('"rank":0', '"rank":2').replace('"rank":1', '"rank":3')
                             .replace('"peer":0', '"peer":2').replace('"peer":1', '"peer":3')
                             for line in ring(2).splitlines(keepends=True))
    trace = simulate_oplog(parse_oplog(text, "two.jsonl"))
    cycle = deadlock_from_stall(trace).cycle
    assert [a.rank for a in cycle] == [0, 0, 1, 1]


def test_other_stages_grow_linearly_in_ranks():
    """Liveness, metrics and the op-log writer over 10,000 one-line ranks."""
    traces = {n: simulate_oplog(parse_oplog(one_line_ranks(n), "r.jsonl")) for n in (500, 2_000)}

    def stage(n):
        t = traces[n]
        return lambda: (warnings(t), deadlock_from_stall(t), compute_metrics(t), oplog_text(t))
    assert growth(stage) < LINEAR


def _command_in_a_child(argv: list[str], cwd: Path, limit_gb: float = 2.0) -> tuple[int, str, dict]:
    """Run ``streamsim argv`` in a child process whose address space is capped at ``limit_gb``;
    returns its exit code, its stderr, and its own peak RSS (MB) and wall time (s)."""
    script = textwrap.dedent(f"""\
        import json, sys, time
        t = time.perf_counter()
        from streamsim.cli.main import main
        try:
            code = main({argv!r})
        except MemoryError:
            code = "MemoryError"
        # (VmHWM, not ru_maxrss: that one keeps the peak of the process before exec, pytest's)
        hwm = next(int(line.split()[1]) for line in open("/proc/self/status")
                   if line.startswith("VmHWM:"))
        print(json.dumps({{"code": code, "seconds": time.perf_counter() - t, "mb": hwm / 1024}}),
              file=sys.stderr)
        """)
    limit = int(limit_gb * 2**30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True,
                          text=True, preexec_fn=cap, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "{}"
    try:
        figures = json.loads(last)
    except ValueError:
        figures = {}
    return done.returncode, done.stderr, figures


def test_ten_thousand_one_line_ranks_check_in_bounded_time_and_memory(tmp_path):
    """The whole `check` (and `run` of a model spawning as many ranks) of 10,000 one-line ranks:
    under 1 GB and 60 s each (it took 9.5 GB and 21.8 s)."""
    (tmp_path / "ranks.jsonl").write_text(one_line_ranks(10_000))
    (tmp_path / "ranks.py").write_text(MODEL)
    for argv in (["check", "ranks.jsonl", "--format", "json"],
                 ["run", "ranks.py", "--set", "ranks=10000", "--format", "json"]):
        _, err, figures = _command_in_a_child(argv, tmp_path)
        assert figures.get("code") == 0, err[-2000:]
        assert figures["mb"] < 1024 and figures["seconds"] < 60, (argv, figures)
