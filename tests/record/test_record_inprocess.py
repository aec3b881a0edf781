"""``streamsim.record(path)`` in one process: sites of the user's own lines, one name per storage
(allocation site in its ``alloc`` line), waits and queries of Work handles and their futures,
and a log ``check`` reads; the Work methods are put back after."""
from __future__ import annotations

import json
import socket

import pytest

import streamsim
from streamsim import check_oplog

from .conftest import need_torch


def lines_of(path) -> list[dict]:
    return [json.loads(x) for x in open(path) if x.startswith("{")]


def test_record_names_each_storage_once_at_its_allocation_site_and_the_users_lines(tmp_path):
    torch = need_torch()
    out = tmp_path / "one.jsonl"
    x = torch.zeros(8)  # made before recording: no alloc site
    with streamsim.record(out):
        y = torch.ones(8)            # line A
        y.add_(x)                    # line B
        x[2:4].mul_(y[0:2])          # line C
    assert isinstance(streamsim.record, type(streamsim))  # (the package, callable)
    got = lines_of(out)
    here = "tests/record/test_record_inprocess.py"
    line_a = next(x["site"] for x in got if x.get("name") == "ones")
    assert line_a.startswith(f"{here}:") and line_a.endswith(" test_record_names_each_storage_"
                                                             "once_at_its_allocation_site_and_"
                                                             "the_users_lines")
    allocs = [x for x in got if x["op"] == "alloc"]
    assert [(a["buffer"].split("@")[0], "site" in a, a["nbytes"]) for a in allocs] == \
        [("t1", True, 32), ("t2", False, 32)]  # y made at line A; x from before
    mul = next(x for x in got if x.get("name") == "mul_")
    assert mul["writes"] == [{"buffer": "t2", "offset": 8, "nbytes": 8}]
    assert mul["reads"] == [{"buffer": "t2", "offset": 8, "nbytes": 8},
                            {"buffer": allocs[0]["buffer"], "offset": 0, "nbytes": 8}]
    ts = [x["t"] for x in got]
    assert ts == sorted(ts) and ts[0] == 0.0
    report = check_oplog(out)
    assert not report.findings.hazards


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_waits_queries_and_futures_of_work_handles_are_lines_and_the_methods_are_restored(
        tmp_path):
    torch = need_torch()
    import torch.distributed as dist
    methods = (dist.Work.wait, dist.Work.is_completed, dist.Work.get_future,
               torch._C.Future.wait)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                            world_size=1)
    try:
        out = tmp_path / "works.jsonl"
        x = torch.ones(4)
        with streamsim.record(out):
            w = dist.all_reduce(x, async_op=True)
            w.wait()
            done = w.is_completed()
            w2 = dist.all_reduce(x, async_op=True)
            w2.get_future().wait()
            dist.barrier()
        assert done
    finally:
        dist.destroy_process_group()
    assert (dist.Work.wait, dist.Work.is_completed, dist.Work.get_future,
            torch._C.Future.wait) == methods
    got = [(x["op"], x.get("name"), x.get("handle"), x.get("result")) for x in lines_of(out)
           if x["op"] not in ("alloc", "host")]  # (barrier makes its own tensor)
    assert got == [("group", None, None, None),
                   ("all_reduce", "all_reduce", "h1", None), ("wait", None, "h1", None),
                   ("query", None, "h1", True),
                   ("all_reduce", "all_reduce", "h2", None), ("wait", None, "h2", None),
                   ("barrier", "barrier", "h3", None), ("wait", None, "h3", None)]
    report = check_oplog(out)
    assert not report.findings.hazards and not report.findings.warnings


def test_without_torch_the_recorder_says_what_to_install(monkeypatch, tmp_path):
    import sys
    from streamsim.record.version import RecordError
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(RecordError, match=r"needs PyTorch: pip install 'streamsim\[record\]'"):
        with streamsim.record(tmp_path / "x.jsonl"):
            pass


def test_step_labels_the_lines_recorded_after_it(tmp_path):
    torch = need_torch()
    out = tmp_path / "steps.jsonl"
    x = torch.ones(4)
    streamsim.record.step(5)  # (nothing records: a no-op)
    with streamsim.record(out):
        x.add_(1)
        for k in range(2):
            streamsim.record.step(k)
            x.mul_(2)
        streamsim.record.step(None)
        x.sub_(1)
    assert [(x.get("name"), x.get("step")) for x in lines_of(out) if x["op"] == "host"] == \
        [("add_", None), ("mul_", 0), ("mul_", 1), ("sub_", None)]


def _record_strided(tmp_path, name: str, second) -> tuple[list[dict], object]:
    """Record, on a 1-rank gloo group: an async all_reduce of x[:, 0::2] of a (4, 8) float32 x,
    then ``second(x)`` (an in-place write) before the wait; the lines and the check's report."""
    torch = need_torch()
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                            world_size=1)
    try:
        out = tmp_path / f"{name}.jsonl"
        x = torch.zeros(4, 8)
        with streamsim.record(out):
            w = dist.all_reduce(x[:, 0::2], async_op=True)
            second(x)
            w.wait()
    finally:
        dist.destroy_process_group()
    return lines_of(out), check_oplog(out)


def test_interleaved_strided_views_are_strided_refs_and_do_not_race(tmp_path):
    """The all-reduce of the even columns and a write of the odd columns while it may still run:
    recorded as strided refs, they share no byte and check clean (as byte hulls, [0, 124) and
    [4, 128), they were a false WAR); writing every fourth column instead is a real hazard."""
    lines, report = _record_strided(tmp_path, "odd", lambda x: x[:, 1::2].fill_(1.0))
    (ar,) = [x for x in lines if x["op"] == "all_reduce"]
    (fill,) = [x for x in lines if x.get("name") == "fill_"]
    buf = ar["tensors"][0]["buffer"]
    assert ar["tensors"] == [{"buffer": buf, "offset": 0, "sizes": [4, 4], "strides": [8, 2],
                              "itemsize": 4}]
    assert fill["writes"] == [{"buffer": buf, "offset": 4, "sizes": [4, 4], "strides": [8, 2],
                               "itemsize": 4}]
    assert report.findings.hazards == ()
    lines, report = _record_strided(tmp_path, "every4", lambda x: x[:, ::4].mul_(2.0))
    assert [h.kind for h in report.findings.hazards] == ["RAW"]


def test_contiguous_and_dense_views_stay_plain_ranges(tmp_path):
    """A row (contiguous) and a transposed tensor (its bytes fill its range) are written as
    before: a plain byte range or the buffer's name, never a strided ref."""
    torch = need_torch()
    out = tmp_path / "plain.jsonl"
    x = torch.zeros(4, 8)
    with streamsim.record(out):
        x[1].add_(1.0)
        x.t().mul_(2.0)
    got = [x for x in lines_of(out) if x["op"] == "host"]
    assert got[0]["writes"] == [{"buffer": got[0]["writes"][0]["buffer"], "offset": 32,
                                 "nbytes": 32}]
    assert isinstance(got[1]["writes"][0], str)


def test_label_names_the_ops_recorded_inside_it_so_callers_of_one_helper_differ(
        tmp_path):
    """Two callers of one helper: the helper's line is the site of both writes, so without labels
    they are one site; a label per caller names them (nested labels join with '/'), and the
    label is gone after its block. Outside a recording label is a no-op."""
    torch = need_torch()
    out = tmp_path / "labels.jsonl"
    x = torch.ones(4)

    def helper(t):
        t.mul_(2)

    with streamsim.record.label("nothing records"):
        helper(x)
    with streamsim.record(out):
        with streamsim.record.label("forward"):
            helper(x)
            with streamsim.record.label("mb0"):
                helper(x)
        helper(x)
    names = [x.get("name") for x in lines_of(out) if x["op"] == "host"]
    assert names == ["forward: mul_", "forward/mb0: mul_", "mul_"]
    with pytest.raises(ValueError, match="non-empty string"):
        with streamsim.record.label(""):
            pass
