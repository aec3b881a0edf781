"""Real 2-rank gloo programs on 127.0.0.1, recorded by ``streamsim record`` and checked.

Each run has a timeout (ranks.py kills ranks still running) and its own free port; the rank
files live in a temporary directory the recorder removes. The racy/fixed pair is checked against
the truth in the same test: the racy program's receiver really got overwritten data at least
once (16 MiB tensors make it strike most steps), the fixed one never.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streamsim import check_oplog
from streamsim.cli.main import main

from .conftest import need_torch

ROOT = Path(__file__).resolve().parents[2]
RANKS = Path(__file__).with_name("ranks.py")
EXAMPLE = "examples/pp_send_overwrite.py"
RING = "tests/record/programs/ring.py"


def record(out: Path, script: str, *args: str, ranks: int = 2, timeout: int = 60):
    """``streamsim record -o OUT -- python ranks.py RANKS TIMEOUT SCRIPT ARGS`` from the repo
    root (so sites read ``examples/...``): the completed process."""
    return record_all([(out, script, *args)], ranks=ranks, timeout=timeout)[0]


def record_all(runs: list[tuple], *, ranks: int = 2, timeout: int = 60) -> list:
    """Several :func:`record` runs at once (most of a run is its ranks starting up: run side by
    side, they keep the suite's time down); their completed processes, in order. Each run's
    ranks meet on a port of their own: ports picked while all are held, so two runs started
    together never get the same one (each picking its own, two once did: EADDRINUSE). A run
    whose port another process took before its ranks bound it is run again, once."""
    need_torch()
    procs = []
    for (out, script, *args), port in zip(runs, free_ports(len(runs))):
        cmd = [sys.executable, "-m", "streamsim", "record", "-o", str(out), "--",
               sys.executable, str(RANKS), str(ranks), str(timeout), script, *args]
        procs.append((cmd, _started(cmd, port)))
    done = []
    for cmd, proc in procs:
        out, err = proc.communicate(timeout=timeout + 60)  # (ranks.py kills its ranks first)
        if proc.returncode and "EADDRINUSE" in err:  # (the port taken meanwhile: not the run's
            proc = _started(cmd, free_ports(1)[0])  # fault, so not the test's answer)
            out, err = proc.communicate(timeout=timeout + 60)
        done.append(subprocess.CompletedProcess(cmd, proc.returncode, out, err))
    return done


def _started(cmd: list[str], port: int) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, RANKS_MASTER_PORT=str(port)))


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports of 127.0.0.1: each bound until all are, then let go."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def corrupted_steps(stdout: str) -> list[int]:
    m = re.search(r"rank1: corrupted steps: \[([\d, ]*)\]", stdout)
    assert m, stdout
    return [int(x) for x in m[1].split(",") if x.strip()]


CROSS = """\
    x, y = torch.ones(1), torch.zeros(1)
    if rank == 0:
        w = dist.isend(x, 1)
    else:
        dist.recv(x, 0)
    dist.barrier()
    if rank == 0:
        del w  # dropped, never waited
    hang = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=2))  # (the cross's alone)
    try:
        dist.send(x, 1 - rank, group=hang)
        dist.recv(y, 1 - rank, group=hang)
        print("completed")
    except RuntimeError:
        print("timed out")
        sys.exit(7)
"""


def program(folder: Path, body: str) -> str:
    path = folder / "prog.py"
    path.write_text(textwrap.dedent("""\
        import datetime, sys
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank = dist.get_rank()
    """) + textwrap.dedent(body))
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, dict]:
    """The racy and fixed example and the cross program, recorded side by side (most of a run
    is its ranks starting up, and the cross program idles until gloo times out): the folder of
    their logs, and each run's completed process by name."""
    d = tmp_path_factory.mktemp("programs")
    cross = program(d, CROSS)
    done = record_all([(d / "racy0.jsonl", EXAMPLE, "--steps", "4"),
                       (d / "fixed.jsonl", EXAMPLE, "--steps", "4", "--fixed"),
                       (d / "cross.jsonl", cross)], timeout=90)
    done += record_all([(d / "ring_racy.jsonl", RING), (d / "ring_fixed.jsonl", RING, "--fixed")],
                       ranks=4, timeout=120)
    return d, dict(zip(("racy0", "fixed", "cross", "ring_racy", "ring_fixed"), done))


def test_the_racy_example_is_one_war_at_its_own_lines_and_really_corrupts_the_fixed_is_clean(
        runs):
    d, done = runs
    corrupted = []
    for trial in range(3):  # (the race is likely, not certain: a few trials)
        p = done["racy0"] if trial == 0 else record(d / f"racy{trial}.jsonl", EXAMPLE, "--steps",
                                                    "4")
        assert p.returncode == 0, p.stderr
        assert f"check it with:\n    streamsim check {d}/racy{trial}.jsonl" in p.stderr
        report = check_oplog(d / f"racy{trial}.jsonl")
        [rc] = report.findings.root_causes  # one missing wait: one root cause, every trial
        assert (rc.kind, rc.first.label, rc.first.location, rc.second.label,
                rc.second.location) == ("WAR", "isend", f"{EXAMPLE}:39 first_stage", "fill_",
                                        f"{EXAMPLE}:27 forward")
        assert rc.buffer == f"tensor made at {EXAMPLE}:63 main" and len(rc.instances) == 3
        # (how many are manifest depends on the recorded times: the race is, the count varies)
        assert "wait the handle returned by `isend`" in rc.fix
        corrupted += corrupted_steps(p.stdout)
        if corrupted:
            break
    assert corrupted, "the racy program never corrupted the receiver's data in 3 trials"
    racy = d / f"racy{trial}.jsonl"  # its log with the proposed fixes inserted: clean
    assert main(["check", str(racy), "--no-fix-cost", "--format", "json",
                 "--fixed-out", str(d / "refixed.jsonl")]) == 1
    assert not check_oplog(d / "refixed.jsonl").findings.hazards

    p = done["fixed"]
    assert p.returncode == 0, p.stderr
    assert corrupted_steps(p.stdout) == []
    fixed = check_oplog(d / "fixed.jsonl")
    assert not fixed.findings.hazards and fixed.findings.deadlock is None


def test_a_dropped_handle_is_warned_and_a_4_byte_send_send_cross_that_hangs_gloo_is_a_deadlock(
        runs):
    """One program (one start-up of two ranks, for the suite's time): rank 0 drops an isend
    handle it never waited, then both ranks send 4 bytes to each other before receiving, which
    gloo does not complete (every gloo send is a rendezvous): the ranks time out. Only the
    cross's group has the 2 s timeout: with it on the whole program, a rank slow to start on a
    loaded machine timed out in the barrier instead (a traceback, not the cross's exit 7)."""
    d, done = runs
    p = done["cross"]
    assert p.returncode == 7 and "timed out" in p.stdout, (p.stdout, p.stderr)  # the truth
    assert re.search(r"warning: the handle of `isend` at \S*prog.py:8 <module> was dropped "
                     r"before any wait\(\)", p.stderr), p.stderr
    f = check_oplog(d / "cross.jsonl").findings
    assert f.deadlock is not None and f.deadlock.cycle is not None
    assert "handle-never-waited" in [w.kind for w in f.warnings]
    lines = [json.loads(x) for x in (d / "cross.jsonl").read_text().splitlines()
             if x.startswith("{")]
    assert [x["op"] for x in lines if x.get("rank") == 0 and x["op"] in ("isend", "irecv",
                                                                         "wait")] == \
        ["isend", "wait", "isend", "wait"]  # (the barrier's, then the send's that never returned)


def test_a_4_rank_ring_is_two_root_causes_that_really_strike_and_its_fix_is_clean(runs):
    """isend to the next rank and an async all_reduce, each buffer updated in place before its
    wait: a WAR on the block and a RAW on the statistics (the all_reduce writes them), at every
    rank; the racy run's ranks really got wrong data, the fixed run's never."""
    d, done = runs
    racy, fixed = done["ring_racy"], done["ring_fixed"]
    assert racy.returncode == 0 and fixed.returncode == 0, (racy.stderr, fixed.stderr)

    def struck(p) -> int:
        found = re.findall(r"rank \d: corrupted: (\d+)", p.stdout)
        assert len(found) == 4, p.stdout
        return sum(map(int, found))
    assert struck(racy) > 0 and struck(fixed) == 0
    causes = check_oplog(d / "ring_racy.jsonl").findings.root_causes
    assert sorted((rc.kind, rc.first.label, rc.second.label, rc.ranks) for rc in causes) == [
        ("RAW", "all_reduce", "div_", (0, 1, 2, 3)), ("WAR", "isend", "mul_", (0, 1, 2, 3))]
    assert {rc.second.location for rc in causes} == {f"{RING}:25 <module>", f"{RING}:26 <module>"}
    f = check_oplog(d / "ring_fixed.jsonl").findings
    assert not f.hazards and f.deadlock is None and not f.warnings


COLLECTIVES = "tests/record/programs/collectives.py"


def test_barrier_reduce_gather_scatter_and_any_source_receives_are_recorded_as_they_ran(tmp_path):
    """Each is an op-log kind of its own with its root as a global rank (the gather list on the
    root's line only, the scatter list on the source's), the receives from any source name the
    peer the program observed; the clean part checks clean, and the async reduce overwritten
    before its wait is the one race: a WAW on the destination (the reduce writes there), a WAR
    on the other rank (it only reads)."""
    p = record(tmp_path / "coll.jsonl", COLLECTIVES, timeout=90)
    assert p.returncode == 0, p.stderr
    assert "rank 0: source 1 out 10.0" in p.stdout and "rank 1: source 0 out 11.0" in p.stdout
    lines = [json.loads(x) for x in (tmp_path / "coll.jsonl").read_text().splitlines()
             if x.startswith("{")]
    comm = [(x.get("rank", 0), x["op"], x.get("root"), "inputs" in x, "outputs" in x)
            for x in lines if x["op"] in ("barrier", "reduce", "gather", "scatter")]
    assert sorted(comm) == sorted([
        (0, "barrier", None, False, False), (1, "barrier", None, False, False),
        (0, "reduce", 0, False, False), (1, "reduce", 0, False, False),
        (0, "gather", 0, True, True), (1, "gather", 0, True, False),
        (0, "scatter", 1, False, True), (1, "scatter", 1, True, True),
        (0, "reduce", 0, False, False), (1, "reduce", 0, False, False)])
    anysrc = [x for x in lines if x.get("any_source")]
    assert [(x.get("rank", 0), x["op"], x["peer"], x["name"]) for x in anysrc] == \
        [(0, "irecv", 1, "irecv (from any source)")] * 2
    f = check_oplog(tmp_path / "coll.jsonl").findings
    assert f.deadlock is None
    assert sorted({(rc.kind, rc.first.label, rc.second.label, rc.ranks) for rc in
                   f.root_causes}) == [("WAR", "reduce", "fill_", (1,)),
                                       ("WAW", "reduce", "fill_", (0,))]
    assert {rc.second.location for rc in f.root_causes} == {f"{COLLECTIVES}:32 <module>"}
