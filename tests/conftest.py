"""Shared fixtures: run tiny programs on the engine and look their ops up by name (``eng``); write
the two-rank racy pipeline model file the CLI and op-log tests run (``pipeline_model``)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import pytest

from streamsim import Simulation
from streamsim.oplog import read
from streamsim.trace import Op, Trace


@pytest.fixture(scope="session", autouse=True)
def _small_logs_take_the_fast_paths():
    """In this process, every op log, however short, is read through the fast paths (msgspec's,
    and the compiled reader where built), as a large log is: a short log's own path is the checker
    alone (``read.SMALL_LOG``), the reference the differential tests compare the fast paths
    against (tests/oplog/test_fastpath.py, tests/native/test_decode.py), so the tests' many short
    logs keep exercising the fast paths. The command line's tests (subprocesses) read their logs
    as a user's are read."""
    small, read.SMALL_LOG = read.SMALL_LOG, 0
    yield
    read.SMALL_LOG = small


@pytest.fixture(scope="session", autouse=True)
def _temp_files_stay_in_the_suites_own_directory(tmp_path_factory):
    """What the product saves in the temp directory while the suite runs (an internal error's
    traceback: the tests of exit 3 make four) goes to a directory of pytest's, which pytest
    removes in time, not to the machine's ``/tmp``; the command line's tests (subprocesses) get
    it through ``TMPDIR``."""
    import os
    import tempfile
    d = str(tmp_path_factory.mktemp("tempdir"))
    saved_dir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = d, d
    yield
    tempfile.tempdir = saved_dir
    if saved_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_env


def simulate(*programs: Callable, groups: tuple = (), **sim_kw) -> Trace:
    """Run ``programs[i]`` as the main host thread of rank ``i``.

    ``groups`` holds ``(name, ranks, kwargs)`` tuples passed to ``Simulation.group``.
    """
    sim = Simulation(**sim_kw)
    for name, ranks, kw in groups:
        sim.group(name, ranks, **kw)
    for rank, program in enumerate(programs):
        if program is not None:
            sim.spawn(rank, program)
    return sim.run()


def find(tr: Trace, agent: str, name: str | None = None, kind: str | None = None) -> list[Op]:
    """Ops of ``agent`` (e.g. ``"rank0/compute"``) with this name and/or kind, in program order."""
    return [op for op in tr.ops if str(op.agent) == agent
            and (name is None or op.name == name) and (kind is None or op.kind == kind)]


def one(tr: Trace, agent: str, name: str | None = None, kind: str | None = None) -> Op:
    """The single op of ``agent`` matching ``name``/``kind`` (fails loudly otherwise)."""
    found = find(tr, agent, name, kind)
    assert len(found) == 1, f"expected one {kind or ''} {name or ''} op on {agent}, got {found}"
    return found[0]


def issued(tr: Trace, op: Op) -> Op:
    """The host action that enqueued stream op ``op`` (checks the enqueue edge is recorded)."""
    assert op.issuer is not None, f"{op.describe()} has no issuer"
    host_op = tr.op(op.issuer)
    assert host_op.agent.kind == "host" and host_op.agent.rank == op.agent.rank
    return host_op


def timing(op: Op) -> tuple[float, float]:
    return (op.start, op.end)


@pytest.fixture
def eng() -> SimpleNamespace:
    """The helpers above: ``eng.simulate(prog0, prog1, groups=...)``, ``eng.one(tr, agent, name)``,
    ``eng.find``, ``eng.issued``, ``eng.timing``."""
    return SimpleNamespace(simulate=simulate, find=find, one=one, issued=issued, timing=timing)


PIPELINE_MODEL = '''"""{doc}"""
from streamsim import Param
PARAMS = [Param("steps", int, {steps}, "steps")]
VARIANTS = {{"racy": "no wait"}}


def build(sim, p, variant):
    sim.group("pp", [0, 1])

    def stage0(host):
        hidden = host.buffer("hidden", 1 << 20)
        for t in range(p.steps):
            host.step = t
            host.launch("forward", writes=[{written}], dur=900)
            host.group("pp").isend(hidden, dst=1)

    def stage1(host):
        inp = host.buffer("hidden_in", 1 << 20)
        for t in range(p.steps):
            host.step = t
            host.group("pp").irecv(inp, src=0).wait()
            host.launch("forward", reads=[inp], dur=2000)

    sim.spawn(0, stage0)
    sim.spawn(1, stage1)
'''


@pytest.fixture
def pipeline_model(tmp_path) -> Callable[..., str]:
    """``pipeline_model(doc=..., steps=2, written="hidden")``: the path of a model file in which rank
    0 writes ``written`` (a view of its send buffer) each step and isends the buffer with no wait,
    and rank 1 receives and computes: a WAR race per step."""
    def write(doc: str = "Two ranks; rank 0 overwrites its send buffer while the isend may still "
                         "read it.", steps: int = 2, written: str = "hidden") -> str:
        path = tmp_path / "pipe.py"
        path.write_text(PIPELINE_MODEL.format(doc=doc, steps=steps, written=written))
        return str(path)
    return write
