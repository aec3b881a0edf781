"""Drive PyTorch's CUDA Sanitizer (``torch.cuda._sanitizer.EventHandler``) over an op log's ops.

Run by ``benchmarks/check.py --vs-csan`` with a Python that has CPU PyTorch (no GPU is needed: the
handler is plain Python bookkeeping). Reads the op log (launch, record, wait_event lines), turns each
line into the call CSAN's dispatch mode would make (a kernel launch with the data pointers it reads
and writes, an event record, a stream waiting an event), creates the streams, events and
allocations first (as the program would have), then times the calls, in this process:

    python csan_driver.py LOG stubbed|shipped

``stubbed``: the stack capture (``traceback.StackSummary.extract``, called for every launch and
allocation) returns an empty summary; ``shipped``: as released, capturing the (shallow) stack of
this loop. Argument preparation (the pointer sets and alias dicts CSAN's ``ArgumentHandler`` builds)
is done before the clock starts: CSAN is timed on its analysis alone, in its favour. Prints JSON:
ops, seconds, errors (race reports).
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from contextlib import nullcontext
from unittest import mock


def calls_of(path: str) -> tuple[dict, dict, dict, list[tuple]]:
    """Streams, events, data pointers (name -> id) and the handler calls of the log's lines."""
    streams: dict[str, int] = {}
    events: dict[str, int] = {}
    ptrs: dict[str, int] = {}
    calls: list[tuple] = []

    def ptr(name: str) -> int:
        return ptrs.setdefault(name, 0x10000 * (len(ptrs) + 1))
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            s = streams.setdefault(d.get("stream", "compute"), len(streams) + 1)
            op = d["op"]
            if op == "launch":
                reads = {ptr(b) for b in d.get("reads", [])}
                writes = {ptr(b) for b in d.get("writes", [])}
                aliases = {p: [f"arg{i}"] for i, p in enumerate(reads | writes)}
                calls.append((0, s, reads - writes, writes, set(writes), d.get("name", op),
                              aliases))
            elif op in ("record", "wait_event"):
                ev = events.setdefault(d["event"], len(events) + 1)
                calls.append((1 if op == "record" else 2, ev, s))
            else:
                raise SystemExit(f"{path}: op {op!r} is not driven by this benchmark")
    return streams, events, ptrs, calls


def run(path: str, stubbed: bool) -> dict:
    from torch.cuda._sanitizer import EventHandler
    streams, events, ptrs, calls = calls_of(path)
    handler = EventHandler()
    stub = mock.patch.object(traceback.StackSummary, "extract",
                             classmethod(lambda cls, *a, **k: cls()))
    with stub if stubbed else nullcontext():
        t0 = time.perf_counter()
        for s in streams.values():
            handler._handle_stream_creation(s)
        for e in events.values():
            handler._handle_event_creation(e)
        for p in ptrs.values():
            handler._handle_memory_allocation(p)
        launch = handler._handle_kernel_launch
        record, wait = handler._handle_event_record, handler._handle_event_wait
        errors = 0
        for c in calls:
            kind = c[0]
            if kind == 0:
                errors += len(launch(*c[1:]))
            elif kind == 1:
                record(c[1], c[2])
            else:
                wait(c[1], c[2])
        seconds = time.perf_counter() - t0
    return {"ops": len(calls), "seconds": seconds, "errors": errors}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2] == "stubbed")))
