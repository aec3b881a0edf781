"""CUDA's own ordering, from the ``torch.cuda._gpu_trace`` callbacks, as op-log lines.

The callbacks CSAN's ``EventHandler`` takes (integers: event, stream and pointer ids) map to:

| callback | line |
|---|---|
| event record (event, stream) | ``record`` of the event on the stream |
| event wait (event, stream) | ``wait_event``: the stream waits for the event |
| event synchronize (event) | ``sync_event``: the host waits |
| stream synchronize (stream) | ``sync_stream`` |
| device synchronize | ``sync_device`` |
| memory allocation / deallocation (pointer) | ``alloc`` / ``free`` of the block's buffer |
| event creation / deletion, stream creation | names only (no line) |

A CUDA aten op is a ``launch`` on the current stream (:mod:`.mode`). Events that NCCL records
and waits inside a c10d op (its own ordering between the current and the comm stream, which the
op log's comm ops already carry) are dropped: the mode says when a c10d op is running
(:attr:`CudaHooks.in_c10d`), and an event first seen then is NCCL's for good.

Tested on CPU only, by calling the callbacks with integers as CSAN's own tests drive its
``EventHandler``; it has not run on a GPU (docs/recording.md).
"""
from __future__ import annotations

from typing import Any, Callable


class CudaHooks:
    """Maps gpu-trace callbacks to lines; ``emit(fields)`` writes one (the mode adds site, t)."""

    def __init__(self, emit: Callable[[dict], None], default_stream: int = 0):
        self.emit = emit
        self.streams: dict[int, str] = {default_stream: "compute"}
        self.events: dict[int, str] = {}
        self.internal: set[int] = set()  # NCCL's events
        self.blocks: dict[int, str] = {}  # live allocation pointer -> buffer name
        self.allocations = 0
        self.in_c10d = False

    def stream(self, sid: int) -> str:
        name = self.streams.get(sid)
        if name is None:
            name = self.streams[sid] = f"stream{len(self.streams)}"
        return name

    def _event(self, eid: int) -> str | None:
        if eid in self.internal:
            return None
        if self.in_c10d and eid not in self.events:
            self.internal.add(eid)
            return None
        name = self.events.get(eid)
        if name is None:
            name = self.events[eid] = f"event{len(self.events) + 1}"
        return name

    # -- the callbacks ------------------------------------------------------------------------------
    def event_creation(self, eid: int) -> None:
        if self.in_c10d:
            self.internal.add(eid)
        else:
            self._event(eid)

    def event_deletion(self, eid: int) -> None:
        self.internal.discard(eid)
        self.events.pop(eid, None)

    def event_record(self, eid: int, sid: int) -> None:
        name = self._event(eid)
        if name is not None:
            self.emit({"op": "record", "event": name, "stream": self.stream(sid)})

    def event_wait(self, eid: int, sid: int) -> None:
        name = self._event(eid)
        if name is not None:
            self.emit({"op": "wait_event", "event": name, "stream": self.stream(sid)})

    def event_synchronization(self, eid: int) -> None:
        name = self._event(eid)
        if name is not None:
            self.emit({"op": "sync_event", "event": name})

    def stream_creation(self, sid: int) -> None:
        self.stream(sid)

    def stream_synchronization(self, sid: int) -> None:
        self.emit({"op": "sync_stream", "stream": self.stream(sid)})

    def device_synchronization(self) -> None:
        self.emit({"op": "sync_device"})

    def memory_allocation(self, ptr: int) -> None:
        self.allocations += 1
        name = self.blocks[ptr] = f"cuda{self.allocations}"
        self.emit({"op": "alloc", "buffer": name})

    def memory_deallocation(self, ptr: int) -> None:
        name = self.blocks.pop(ptr, None)
        if name is not None:
            self.emit({"op": "free", "buffer": name})

    def block_of(self, ptr: int) -> str | None:
        """The buffer of the live allocation that starts at ``ptr`` (a storage's data_ptr)."""
        return self.blocks.get(ptr)

    CALLBACKS = ("event_creation", "event_deletion", "event_record", "event_wait",
                 "memory_allocation", "memory_deallocation", "stream_creation",
                 "device_synchronization", "stream_synchronization", "event_synchronization")

    def register(self, gpu_trace: Any) -> None:
        """Register every callback with ``torch.cuda._gpu_trace`` (CUDA present only)."""
        for name in self.CALLBACKS:
            getattr(gpu_trace, f"register_callback_for_{name}")(getattr(self, name))
