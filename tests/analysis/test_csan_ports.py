"""PyTorch's CUDA Sanitizer scenarios (test/test_cuda_sanitizer.py, class TestEventHandler) as op logs.

Each CSAN test drives its event handler with kernel launches (``read_only`` / ``read_write`` tensors
on streams), event records and waits, and syncs, and asserts which launches report errors and how
many. Here each becomes an op log, simulated and checked by ``streamsim.analysis.hb.analyse_hazards``:
``assert_good_kernel_launch(...)`` = no hazard whose *second* op is that launch,
``assert_bad_kernel_launch(n, ...)`` = exactly ``n`` hazards whose second op is that launch.
``stream_id(i)`` is stream ``s<i>``, ``tensor_id(i)`` buffer ``t<i>``, ``event_id(i)`` event
``e<i>``; ``read_write`` tensors are writes (CSAN treats them as writes).

CSAN sees one host thread issuing ops with no timing. So that "second" means "issued later" here too,
every launch is followed by host work (``gap``) longer than the kernel: each op starts, and so is
met by the analysis, in issue order. The gaps order nothing (host work is not a sync).
"""
from __future__ import annotations

import json

import pytest

from streamsim.oplog import parse_oplog, simulate_oplog

hb = pytest.importorskip("streamsim.analysis.hb")


class Csan:
    """Builds the op log of one CSAN scenario and records each launch's expected error count."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.expected: dict[int, int] = {}  # launch line -> expected number of hazards

    def _add(self, d: dict) -> int:
        self.lines.append(d)
        return len(self.lines)

    def launch(self, stream: int, read_only=(), read_write=(), *, errors: int = 0) -> int:
        line = self._add({"op": "launch", "stream": f"s{stream}", "name": f"kernel{len(self.lines)}",
                          "reads": [f"t{t}" for t in read_only],
                          "writes": [f"t{t}" for t in read_write], "dur": 1})
        self._add({"op": "host", "name": "gap", "dur": 2})
        self.expected[line] = errors
        return line

    good = launch

    def bad(self, errors: int, stream: int, read_only=(), read_write=()) -> int:
        return self.launch(stream, read_only, read_write, errors=errors)

    def record(self, event: int | str, stream: int) -> None:
        self._add({"op": "record", "event": f"e{event}", "stream": f"s{stream}"})

    def wait(self, event: int | str, stream: int) -> None:
        self._add({"op": "wait_event", "event": f"e{event}", "stream": f"s{stream}"})

    def sync_device(self) -> None:
        self._add({"op": "sync_device"})

    def sync_stream(self, stream: int) -> None:
        self._add({"op": "sync_stream", "stream": f"s{stream}"})

    def sync_event(self, event: int) -> None:
        self._add({"op": "sync_event", "event": f"e{event}"})

    def text(self) -> str:
        return "".join(json.dumps(d) + "\n" for d in self.lines)

    def check(self):
        """Simulate, analyse, and compare each launch's hazards (as second op) with CSAN's verdict."""
        trace = simulate_oplog(parse_oplog(self.text(), "csan.jsonl"))
        hazards = hb.analyse_hazards(trace, fixes=False)
        got: dict[int, int] = {}
        for h in hazards:
            second = trace.op(h.second)
            assert second.kind == "launch", f"hazard on a non-launch: {h}"
            got[second.line] = got.get(second.line, 0) + 1
            assert trace.op(h.first).line < second.line, "the second op must be the later-issued one"
        verdicts = {line: got.get(line, 0) for line in self.expected}
        assert verdicts == self.expected
        assert set(got) <= set(self.expected)
        return trace, hazards


def test_empty_kernel_launch():
    c = Csan()
    c.good(0)
    c.check()


def test_simple_passing():
    c = Csan()
    c.good(1, read_only=[1])
    c.good(2, read_only=[1])
    c.check()


def test_simple_error():
    c = Csan()
    c.good(1, read_only=[1])
    c.bad(1, 2, read_write=[1])
    _, hazards = c.check()
    assert [h.kind for h in hazards] == ["WAR"]


def test_simple_sync():
    c = Csan()
    c.good(1, read_only=[1])
    c.record(0, 1)
    c.wait(0, 2)
    c.good(2, read_write=[1])
    c.check()


def test_reads_check_last_write():
    # Not only the first read is checked against the last write: every read is.
    c = Csan()
    c.good(1, read_write=[1])
    c.record(0, 1)
    c.wait(0, 2)
    c.good(2, read_only=[1])
    c.bad(1, 3, read_only=[1])
    _, hazards = c.check()
    assert [h.kind for h in hazards] == ["RAW"]


def test_branch_sync():
    # Two streams may read after both waited for a third, but not write without more syncs.
    c = Csan()
    c.good(1, read_write=[1])
    c.record(0, 1)
    c.wait(0, 2)
    c.wait(0, 3)
    c.good(2, read_only=[1])
    c.good(3, read_only=[1])
    c.bad(1, 2, read_write=[1])  # races with stream 3's read
    c.check()


def test_chain_sync():
    c = Csan()
    iterations = 10
    c.good(0, read_only=[1])
    for i in range(iterations):
        c.record(i, i)
        c.wait(i, i + 1)
    c.good(iterations, read_write=[1])
    c.check()


def test_expired_record():
    c = Csan()
    c.good(1, read_only=[1])
    c.record(0, 1)
    c.good(1, read_only=[1])  # after the record: the wait below does not cover it
    c.wait(0, 2)
    c.bad(1, 2, read_write=[1])
    c.check()


@pytest.mark.parametrize("should_delete,should_create", [(True, True), (True, False), (False, True)])
def test_deleted_record(should_delete, should_create):
    # CSAN deletes and/or re-creates event 0 between its record and the wait, so the wait is on an
    # event with no record. An op log has no event lifetime: a new torch.cuda.Event is a new name.
    # Every subtest is therefore the same log: a wait on an event never recorded (a no-op, warned).
    c = Csan()
    c.good(1, read_only=[1])
    c.record(0, 1)
    c.wait("0_new", 2)
    c.bad(1, 2, read_write=[1])
    trace, _ = c.check()
    assert [n.kind for n in trace.notes] == ["event-never-recorded"]


def test_all_reads_checked_failing():
    c = Csan()
    iterations = 10
    for i in range(1, iterations):
        c.good(i, read_only=[1])
        c.record(i, i)
    for i in range(1, iterations):
        c.wait(i, 0)
    c.good(iterations, read_only=[1])
    c.record(iterations, iterations - 1)  # CSAN records on stream_id(i), i left at iterations - 1
    c.bad(1, 0, read_write=[1])  # does not synchronize with the last read
    c.check()


def test_all_reads_checked_passing():
    c = Csan()
    iterations = 10
    for i in range(1, iterations):
        c.good(i, read_only=[1])
        c.record(i, i)
    for i in range(1, iterations):
        c.wait(i, 0)
    c.good(0, read_write=[1])
    c.check()


def test_multiple_errors():
    c = Csan()
    iterations = 10
    c.good(0, read_write=list(range(iterations)))
    c.bad(iterations, 1, read_write=list(range(iterations)))  # one WAW per tensor
    _, hazards = c.check()
    assert sorted(h.buffer for h in hazards) == sorted(f"t{i}" for i in range(iterations))


def test_correct_state_merging():
    # After waiting for an event, a stream is ordered after the pointwise maximum of its own
    # position and the recorded one.
    c = Csan()
    c.good(1, read_write=[1])
    c.good(2, read_write=[2])
    c.record(1, 1)
    c.record(2, 2)
    c.good(1, read_write=[1])
    c.good(2, read_write=[2])
    c.wait(1, 2)
    c.wait(2, 1)
    c.record(3, 2)
    c.wait(3, 1)
    c.good(1, read_write=[1, 2])
    c.check()


def test_record_override():
    # Re-recording an event replaces its capture (stream 1's read is no longer covered).
    c = Csan()
    c.good(1, read_only=[1])
    c.good(2, read_only=[2])
    c.record(1, 1)
    c.record(1, 2)
    c.wait(1, 3)
    c.bad(1, 3, read_write=[1])
    c.check()


def test_multiple_wait():
    # One event can be waited on by several streams.
    c = Csan()
    c.good(1, read_write=[1])
    c.record(1, 1)
    c.wait(1, 2)
    c.wait(1, 3)
    c.good(2, read_only=[1])
    c.good(3, read_only=[1])
    c.check()


def test_device_synchronize():
    # A device synchronize orders every stream's work before everything the host issues next.
    c = Csan()
    iterations = 10
    for i in range(1, iterations):
        c.good(i, read_write=[i])
    c.sync_device()
    c.good(0, read_write=list(range(1, iterations)))
    c.check()


def test_device_synchronization_expired():
    # A device synchronize orders only the work issued before it.
    c = Csan()
    c.good(1, read_write=[1])
    c.sync_device()
    c.good(1, read_write=[1])
    c.bad(1, 2, read_write=[1])
    c.check()


def test_new_stream_is_synchronized():
    # A stream first used after a host sync is ordered after the synced work (an op log has no
    # stream creation: the stream exists from its first use).
    c = Csan()
    c.good(1, read_write=[1])
    c.sync_device()
    c.good(2, read_write=[1])
    c.check()


def test_stream_synchronize():
    # stream.synchronize() orders that stream's work before later host actions, not other streams'.
    c = Csan()
    c.good(0, read_write=[1])
    c.good(1, read_write=[2])
    c.sync_stream(0)
    c.good(2, read_only=[1])
    c.good(3, read_only=[1])
    c.bad(1, 4, read_only=[2])
    c.check()


def test_event_synchronize():
    # event.synchronize() orders the captured work only, not what the stream did after the record.
    c = Csan()
    c.good(1, read_write=[1])
    c.record(1, 1)
    c.good(1, read_write=[2])
    c.sync_event(1)
    c.good(2, read_write=[1])
    c.bad(1, 2, read_write=[2])
    c.check()
