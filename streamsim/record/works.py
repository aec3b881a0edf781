"""Waits on c10d ``Work`` handles and their futures, seen by replacing methods on the classes.

``Work.wait``, ``Work.is_completed``, ``Work.get_future`` and ``Future.wait`` are replaced on
the classes, not ``torch.distributed``'s functions: code that imported ``isend`` before a patch
keeps the original, and ``P2POp`` then raises ``ValueError`` on the patched one (it checks its
op by identity). A Work is held only weakly: on gloo, dropping an unwaited ``isend`` handle
makes the sender hang, and a recorder that kept handles alive would hide that; a handle dropped
before any wait (or ``is_completed()`` seen True) is warned on stderr as it goes.

A Work that C++ issued and waits itself (DDP's reducer waits its all-reduces in C++) is never
waited in Python: its wait is inferred from its completion, written with its provenance
(``"inferred": "completion"``, which reports show in its name) before the first op the program
issues after the Work is seen completed; the mode polls before every op.

The Work a c10d op returns reaches the program as the same Python object the mode made from its
boxed result (pybind keeps one wrapper per C++ object while one lives): :meth:`Works.issued`
keeps the wrapper alive until the program has it (the next op or wait), then only weakly.
"""
from __future__ import annotations

import sys
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable


INFERRED = {"inferred": "completion"}  # the field an inferred wait's line carries (docs/oplog.md)


def is_inferred(line: str | bytes) -> bool:
    """Whether op-log ``line`` is a wait this recorder inferred (a comment is not)."""
    import json
    s = line.strip()
    return bool(s) and s[:1] in ("{", b"{") and json.loads(s).get("inferred") == "completion"


@dataclass
class Handle:
    """A recorded Work: its op-log ``handle`` name, the op's label and site, its state;
    ``also``: the handles a wait on it waits too (a coalesced group's Work, :mod:`.coalesce`)."""

    name: str
    label: str
    site: str
    also: tuple[str, ...] = ()
    waited: bool = False
    on_done: Callable[[Any], None] | None = None  # called with the Work once seen completed


class Works:
    """The Works of one recording; ``emit(op, handle, t_ns, **fields)`` writes a wait or query
    line (``t_ns``: when the program called it)."""

    def __init__(self, emit: Callable[..., None]):
        self.emit = emit
        self.by_id: dict[int, tuple[weakref.ref, Handle]] = {}
        self.futures: dict[int, tuple[Any, Handle]] = {}
        self.fresh: list[Any] = []  # Works made by the op just recorded: alive until handed over
        self.dropped: list[Handle] = []
        self.originals: dict[tuple[type, str], Any] = {}
        self.inferred: list[tuple[Any, Handle]] = []  # C++-issued Works, until seen completed

    # -- tracking -----------------------------------------------------------------------------------
    def issued_by_cpp(self, work: Any, handle: Handle) -> None:
        """A Work that C++ issued and will wait itself (DDP's reducer, its start-up broadcasts):
        Python never waits it, so its wait is inferred from its completion (:meth:`poll`). Held
        strongly until then: C++ holds it anyway."""
        self.inferred.append((work, handle))

    def poll(self) -> None:
        """Write an inferred wait for each C++-issued Work now seen completed: what the program
        does from here on came after its completion (the provenance is the line's name)."""
        if not self.inferred or not self.originals:
            return
        cls = type(self.inferred[0][0])
        completed = self.originals[(cls, "is_completed")]
        future = self.originals[(cls, "get_future")]

        def done(work: Any) -> bool:
            if completed(work):
                return True
            try:  # (gloo marks the future done, and wakes its C++ waiter, before the Work)
                return future(work).done()
            except RuntimeError:  # (a backend without futures)
                return False
        t = time.monotonic_ns()
        still = []
        for work, h in self.inferred:
            if done(work):
                h.waited = True
                self.emit("wait", h, t, **INFERRED)
            else:
                still.append((work, h))
        self.inferred = still

    def issued(self, work: Any, handle: Handle) -> None:
        self.fresh.append(work)
        key = id(work)

        def gone(_ref, key=key, handle=handle):
            entry = self.by_id.get(key)
            if entry is not None and entry[1] is handle:
                del self.by_id[key]
            if not handle.waited and self.originals:  # (not after the recording ended)
                self.dropped.append(handle)
                print(f"streamsim record: warning: the handle of `{handle.label}` at "
                      f"{handle.site} was dropped before any wait(): nothing orders later work "
                      "after it (on gloo an unwaited isend may hang its sender)",
                      file=sys.stderr)
        self.by_id[key] = (weakref.ref(work, gone), handle)

    def handed_over(self) -> None:
        """The program has the Works of the last op: hold them only weakly from now on."""
        self.fresh.clear()

    def handle_of(self, work: Any) -> Handle | None:
        entry = self.by_id.get(id(work))
        if entry is None or entry[0]() is not work:
            return None
        return entry[1]

    # -- the replaced methods -----------------------------------------------------------------------
    def install(self, work_cls: type, future_cls: type) -> None:
        """Replace the methods (once; :meth:`uninstall` puts the originals back)."""
        works = self

        def patch(cls: type, name: str, make: Callable[[Any], Any]) -> None:
            orig = getattr(cls, name)
            self.originals[(cls, name)] = orig
            setattr(cls, name, make(orig))

        def wait(orig):
            def wait(self, *args, **kwargs):
                works.handed_over()
                h = works.handle_of(self)
                if h is not None:  # (written before it blocks: a wait that never returns, as
                    h.waited = True  # in a deadlock, was still issued)
                    works.emit("wait", h, time.monotonic_ns())
                out = orig(self, *args, **kwargs)
                if h is not None and h.on_done is not None:
                    done, h.on_done = h.on_done, None
                    done(self)
                return out
            return wait

        def is_completed(orig):
            def is_completed(self):
                works.handed_over()
                t = time.monotonic_ns()
                out = orig(self)
                h = works.handle_of(self)
                if h is not None:
                    h.waited = h.waited or bool(out)
                    works.emit("query", h, t, result=bool(out))
                    if out and h.on_done is not None:
                        done, h.on_done = h.on_done, None
                        done(self)
                return out
            return is_completed

        def get_future(orig):
            def get_future(self):
                fut = orig(self)
                h = works.handle_of(self)
                if h is not None:
                    works.futures[id(fut)] = (fut, h)
                return fut
            return get_future

        def future_wait(orig):
            def wait(self, *args, **kwargs):
                entry = works.futures.pop(id(self), None)
                if entry is not None and entry[0] is self:
                    entry[1].waited = True
                    works.emit("wait", entry[1], time.monotonic_ns())
                return orig(self, *args, **kwargs)
            return wait

        patch(work_cls, "wait", wait)
        patch(work_cls, "is_completed", is_completed)
        patch(work_cls, "get_future", get_future)
        patch(future_cls, "wait", future_wait)

    def uninstall(self) -> None:
        self.poll()
        self.inferred.clear()
        for (cls, name), orig in self.originals.items():
            setattr(cls, name, orig)
        self.originals.clear()
        self.fresh.clear()
