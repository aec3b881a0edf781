"""The c10d table against torch's own schemas, the CUDA hook mapping (fired with integers, as
CSAN's tests drive its EventHandler), and the merge of rank files."""
from __future__ import annotations

import json

import pytest

from streamsim import parse_oplog
from streamsim.record.c10d import GROUP_ARG, OPS, sides
from streamsim.record.cuda import CudaHooks
from streamsim.record.merge import merge_lines
from streamsim.record.version import RecordError, check_version

from .conftest import need_torch


def c10d_schemas() -> dict:
    torch = need_torch()
    import torch.distributed  # noqa: F401  (registers the c10d ops)
    return {s.name.split("::")[1]: s for s in torch._C._jit_get_all_schemas()
            if s.name.startswith("c10d::")}


def test_every_c10d_op_of_the_table_exists_and_its_indices_name_the_right_arguments():
    schemas = c10d_schemas()
    for name, op in OPS.items():
        args = schemas[name].arguments
        assert "ProcessGroup" in str(args[GROUP_ARG[name]].type), name
        for i in op.reads + op.writes:
            assert "Tensor" in str(args[i].type), (name, i)
        for i in (op.peer, op.root):
            if i is not None:
                assert str(args[i].type) == "int", (name, i)
    # (every c10d op that moves tensor data is in the table, or knowingly left out)
    moving = {n for n, s in schemas.items() if any("Tensor" in str(a.type) for a in s.arguments)
              and any("ProcessGroup" in str(a.type) for a in s.arguments)}
    assert moving - set(OPS) == set()


@pytest.mark.parametrize("name, me, reads, writes", [
    ("broadcast_", 0, ["t"], ["t"]), ("broadcast_", 1, [], ["t"]),  # root 0 alone reads
    ("reduce_", 0, ["t"], ["t"]), ("reduce_", 1, ["t"], []),  # the root alone gets the sum
    ("scatter_", 0, ["in"], ["out"]), ("scatter_", 1, [], ["out"]),
    ("send", 1, ["t"], []), ("recv_", 1, [], ["t"]),
])
def test_rooted_ops_read_and_write_on_the_root_only_as_they_do(name, me, reads, writes):
    args = {"broadcast_": ("t", "pg", 0, 0), "reduce_": ("t", "pg", "sum", 0, 0),
            "scatter_": ("out", "in", "pg", 0), "send": ("t", "pg", 0, 0),
            "recv_": ("t", "pg", 0, 0)}[name]
    assert sides(OPS[name], args, me) == (reads, writes)


def test_cuda_hooks_map_to_op_log_lines_and_drop_ncclss_internal_events():
    lines: list[dict] = []
    h = CudaHooks(lines.append, default_stream=7)
    h.stream_creation(9)
    h.event_creation(100)
    h.event_record(100, 9)
    h.event_wait(100, 7)
    h.event_synchronization(100)
    h.stream_synchronization(9)
    h.device_synchronization()
    h.memory_allocation(0xA0)
    h.in_c10d = True  # NCCL's own events, inside a c10d op: not lines
    h.event_creation(200)
    h.event_record(200, 9)
    h.in_c10d = False
    h.event_wait(200, 7)  # (still NCCL's afterwards)
    h.memory_deallocation(0xA0)
    h.memory_deallocation(0xB0)  # never allocated while recording: nothing
    assert lines == [
        {"op": "record", "event": "event1", "stream": "stream1"},
        {"op": "wait_event", "event": "event1", "stream": "compute"},
        {"op": "sync_event", "event": "event1"},
        {"op": "sync_stream", "stream": "stream1"},
        {"op": "sync_device"},
        {"op": "alloc", "buffer": "cuda1"},
        {"op": "free", "buffer": "cuda1"},
    ]
    assert h.block_of(0xA0) is None
    text = "".join(json.dumps(x) + "\n" for x in lines)
    assert len(parse_oplog(text, "cuda.jsonl").lines) == len(lines)  # a valid op log


def rank_file(rank: int, *ops: tuple) -> tuple[str, list[bytes]]:
    out = [b'{"op":"group","group":"world","backend":"gloo","ranks":[0,1]}']
    for op, t, *rest in ops:
        x = {"op": op, "rank": rank, "t": t, **(rest[0] if rest else {})}
        out.append(json.dumps(x).encode())
    return f"rank{rank}.jsonl", out


def test_merge_orders_by_time_keeps_each_threads_order_and_declares_groups_once():
    r0 = rank_file(0, ("host", 1000.0), ("host", 1000.0, {"name": "second"}), ("host", 1500.0))
    r1 = rank_file(1, ("host", 1200.0), ("host", 1000.0 + 1e-9, {"name": "tie"}))
    merged = merge_lines([r0, r1])
    assert merged[0]["op"] == "group" and sum(x["op"] == "group" for x in merged) == 1
    assert [(x["rank"], x["t"], x.get("name")) for x in merged[1:]] == [
        (0, 0.0, None), (0, 0.0, "second"), (1, 0.0, "tie"), (1, 200.0, None), (0, 500.0, None)]


def test_merge_options_and_errors():
    r0 = rank_file(0, ("alloc", 1, {"buffer": "a"}), ("alloc", 2, {"buffer": "b"}),
                   ("host", 3, {"writes": ["a", "b"], "step": 0}),
                   ("isend", 4, {"tensors": ["a"], "peer": 1, "group": "world", "step": 0}),
                   ("host", 5, {"writes": ["b"], "step": 1}))
    ops = [x["op"] for x in merge_lines([r0], comm_buffers_only=True)[1:]]
    assert ops == ["alloc", "host", "isend"]  # b's alloc and the line only b was in: gone
    steps = merge_lines([r0], steps=(1, 1))[1:]
    assert [x["op"] for x in steps] == ["alloc", "alloc", "host"]
    bad = ("rank1.jsonl", [b'{"op":"group","group":"world","backend":"nccl","ranks":[0,1]}'])
    with pytest.raises(RecordError, match=r"^rank1.jsonl:1: group 'world' is declared "
                                          "differently by another rank$"):
        merge_lines([r0, bad])
    with pytest.raises(RecordError, match=r"^rank0.jsonl:2: not a recorded line"):
        merge_lines([("rank0.jsonl", [b"# header", b"{oops"])])


@pytest.mark.parametrize("version, ok", [("2.13.0+cpu", True), ("2.14.1", True),
                                         ("2.12.1", False), ("2.15.0a0", False), ("3.0", False)])
def test_the_torch_version_is_checked_with_a_clear_message(version, ok):
    if ok:
        check_version(version)
    else:
        with pytest.raises(RecordError, match=r"supports torch 2\.13-2\.14 .*; this is torch"):
            check_version(version)
