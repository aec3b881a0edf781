"""Batches in an op log: the ``batch`` field's rules (read) and its lines grouped (replay).

Consecutive lines of one host thread with the same ``batch`` id are one ``batch_isend_irecv``
(docs/oplog.md). Another line of the thread ends the batch, and the thread may not use the id
again; a batch's lines name one group and one stream.
"""
from __future__ import annotations

from .schema import Line


class BatchRule:
    """The ``batch`` rule, checked line by line in file order (pass 1 of the reader)."""

    def __init__(self) -> None:
        # (rank, host) -> the batch its last line belonged to: (id, group, stream, first line)
        self.open: dict[tuple[int, str], tuple[int, str, str, int] | None] = {}
        self.closed: set[tuple[int, str, int]] = set()

    def check(self, spec: dict, lineno: int, error: type[Exception]) -> None:
        """Raise ``error`` (the reader's one-line error) if line ``lineno`` (its checked fields
        ``spec``) breaks the rule."""
        thread, batch = (spec["rank"], spec["host"]), spec.get("batch")
        open_ = self.open.get(thread)
        if open_ is not None and batch != open_[0]:  # this line ends the thread's open batch
            self.closed.add((*thread, open_[0]))
            self.open[thread] = open_ = None
        if batch is not None and open_ is None:
            if (*thread, batch) in self.closed:
                raise error(f"batch {batch} of rank {thread[0]} host {thread[1]!r} was ended by an "
                            "earlier line: a batch's lines are consecutive lines of one host "
                            "thread")
            self.open[thread] = (batch, spec["group"], spec["stream"], lineno)
        elif batch is not None and (spec["group"], spec["stream"]) != open_[1:3]:
            raise error(f"batch {batch} is on group {open_[1]!r}, stream {open_[2]!r} at line "
                        f"{open_[3]}: every line of a batch names the same group and stream")


    def refuses(self, thread: tuple[int, str], batch: int, group: str, stream: str) -> bool:
        """Whether :meth:`check` would refuse a line of ``thread`` in ``batch`` on ``group`` and
        ``stream``; changes nothing (the reader's fast paths ask before they take a line)."""
        open_ = self.open.get(thread)
        if open_ is not None and batch != open_[0]:
            open_ = None  # (check closes it first: the batch it closes is not this one)
        if open_ is None:
            return (*thread, batch) in self.closed
        return (group, stream) != open_[1:3]


def batches(lines: list[Line]) -> dict[int, list[Line] | tuple]:
    """For one thread's lines: index of a batch's first line -> the batch's lines; index of each
    of its other lines -> ``()`` (issued with the first)."""
    out: dict[int, list[Line] | tuple] = {}
    i = 0
    while i < len(lines):
        b = lines[i].batch
        if b is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].batch == b:
            out[j] = ()
            j += 1
        out[i] = lines[i:j]
        i = j
    return out
