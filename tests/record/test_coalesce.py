"""``batch_isend_irecv`` on a backend that coalesces (NCCL) is recorded as one batch, and the one
Work it returns waits for its members.

No GPU here: torch's own NCCL path of ``batch_isend_irecv`` (``_coalescing_manager``:
``_start_coalescing``, the ops, ``_end_coalescing``'s one Work) runs on torch's fake process group
with ``supports_coalescing`` said true, and the group is declared ``nccl`` as a GPU run's CUDA
tensors declare it (``Recorder.backend_of``). What differs on NCCL, each op returning no Work
while coalescing, the recorder does not read: a coalesced op's Work is never the program's."""
from __future__ import annotations

import json

import pytest

from streamsim import check_oplog

from .conftest import need_torch

MB = 1 << 20  # past the eager limit: sends are rendezvous


@pytest.fixture
def fake_world(monkeypatch):
    """A 2-rank fake process group whose backend says it coalesces (this is rank 0). Its Works
    wait through ``Work.wait``, the method the recorder replaces, as NCCL's do (FakeWork binds
    one of its own)."""
    torch = need_torch()
    import torch.distributed as dist
    from torch._C._distributed_c10d import FakeProcessGroup, FakeWork
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    monkeypatch.setattr(FakeProcessGroup, "supports_coalescing", property(lambda self: True))
    monkeypatch.delattr(FakeWork, "wait")
    try:
        yield torch, dist
    finally:
        dist.destroy_process_group()


def record_rank0(tmp_path, program, backend: str) -> list[dict]:
    from streamsim.record.mode import Recorder
    out = tmp_path / "rank0.jsonl"
    rec = Recorder(str(out), rank=0)
    rec.backend_of = lambda args: backend  # (a GPU run's CUDA tensors declare nccl)
    rec.start()
    try:
        program()
    finally:
        rec.stop()
    return [json.loads(x) for x in open(out) if x.startswith("{")]


def step(torch, dist):
    """Each rank sends 1 MB to the other and receives 1 MB from it, sends first, in one batch."""
    send, recv = torch.ones(MB // 4), torch.zeros(MB // 4)

    def program():
        ops = [dist.P2POp(dist.isend, send, 1), dist.P2POp(dist.irecv, recv, 1)]
        works = dist.batch_isend_irecv(ops)
        assert len(works) == 1  # (torch's coalescing path ran: one Work for the group)
        for w in works:
            w.wait()
    return program


def both_ranks(lines: list[dict]) -> list[dict]:
    """Rank 1's lines mirror rank 0's (it sends to rank 0 what rank 0 sends to it)."""
    out = []
    for d in lines:
        out.append(d)
        if "rank" in d:
            m = dict(d, rank=1)
            if "peer" in m:
                m["peer"] = 0
            out.append(m)
    return out


def write(tmp_path, lines: list[dict]) -> str:
    path = tmp_path / "both.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return str(path)


def test_a_coalesced_batch_is_one_batch_and_its_work_waits_for_it(fake_world, tmp_path):
    torch, dist = fake_world
    lines = record_rank0(tmp_path, step(torch, dist), "nccl")
    ops = [d for d in lines if d["op"] in ("isend", "irecv", "wait")]
    assert [(d["op"], d.get("batch")) for d in ops] == \
        [("isend", 0), ("irecv", 0), ("wait", None)]
    assert ops[2]["handle"] == ops[0]["handle"]  # the group's Work: a wait on the batch
    report = check_oplog(write(tmp_path, both_ranks(lines)))
    assert report.findings.deadlock is None
    assert not report.findings.hazards and not report.findings.warnings


def test_unbatched_the_same_ops_deadlock_and_are_never_waited(fake_world, tmp_path):
    """What a recording wrote before it saw the group: the test above fails without it."""
    torch, dist = fake_world
    lines = record_rank0(tmp_path, step(torch, dist), "nccl")
    plain = [{k: v for k, v in d.items() if k != "batch"} for d in lines
             if d["op"] != "wait"]
    report = check_oplog(write(tmp_path, both_ranks(plain)))
    assert report.findings.deadlock is not None


def test_an_alloc_between_members_goes_before_the_batch(fake_world, tmp_path):
    """A storage first seen at the second member is declared before the batch, which stays
    consecutive lines (a reader error otherwise)."""
    torch, dist = fake_world
    send = torch.ones(8)
    holder = {}

    def program():
        holder["recv"] = torch.zeros(8)  # made while recording: an alloc line of its own
        ops = [dist.P2POp(dist.isend, send, 1), dist.P2POp(dist.irecv, holder["recv"], 1)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    lines = record_rank0(tmp_path, program, "nccl")
    kinds = [d["op"] for d in lines]
    first = kinds.index("isend")
    assert kinds[first:first + 3] == ["isend", "irecv", "wait"]
    assert "alloc" not in kinds[first:]
    check_oplog(write(tmp_path, both_ranks(lines)))  # (reads: no error)


def test_in_a_gloo_group_members_are_not_batched_and_the_work_waits_each(fake_world, tmp_path):
    """``batch`` is an NCCL field: a coalescing backend the recording declared gloo keeps its
    ops unbatched, and the group's Work waits for every one of them."""
    torch, dist = fake_world
    lines = record_rank0(tmp_path, step(torch, dist), "gloo")
    ops = [d for d in lines if d["op"] in ("isend", "irecv", "wait")]
    assert [(d["op"], "batch" in d) for d in ops] == \
        [("isend", False), ("irecv", False), ("wait", False), ("wait", False)]
    assert [d["handle"] for d in ops[2:]] == [d["handle"] for d in ops[:2]]


def test_the_coalescing_methods_are_put_back(fake_world, tmp_path):
    torch, dist = fake_world
    from torch._C._distributed_c10d import ProcessGroup
    before = (ProcessGroup._start_coalescing, ProcessGroup._end_coalescing)
    record_rank0(tmp_path, step(torch, dist), "nccl")
    assert (ProcessGroup._start_coalescing, ProcessGroup._end_coalescing) == before


def test_a_group_coalesced_inside_another_is_its_own_batch_with_its_own_work(fake_world,
                                                                             tmp_path):
    """Two coalesced groups on two process groups, one inside the other: each is a batch of
    its own group, and each Work waits for its own batch (a batch names one group)."""
    torch, dist = fake_world
    from torch.distributed.distributed_c10d import _coalescing_manager
    pp = dist.new_group([0, 1])
    a, b, c, d = (torch.ones(4) for _ in range(4))
    cpu = torch.device("cpu")

    def program():
        with _coalescing_manager(dist.group.WORLD, cpu, async_ops=True) as outer:
            dist.isend(a, 1)
            with _coalescing_manager(pp, cpu, async_ops=True) as inner:
                dist.isend(b, 1, group=pp)
                dist.irecv(c, 1, group=pp)
            dist.irecv(d, 1)
        inner.wait()
        outer.wait()
    lines = record_rank0(tmp_path, program, "nccl")
    ops = [d for d in lines if d["op"] in ("isend", "irecv", "wait")]
    assert [(d["op"], d["group"] if "group" in d else None, d.get("batch")) for d in ops] == \
        [("isend", "pg1", 1), ("irecv", "pg1", 1), ("isend", "world", 0), ("irecv", "world", 0),
         ("wait", None, None), ("wait", None, None)]
    assert [d["handle"] for d in ops[4:]] == [ops[0]["handle"], ops[2]["handle"]]
    ts = [d["t"] for d in lines if "t" in d]
    assert ts == sorted(ts)
