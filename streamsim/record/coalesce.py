"""Coalesced c10d groups: ``batch_isend_irecv`` on NCCL, seen by replacing two methods.

On a backend that coalesces (NCCL), ``torch.distributed.batch_isend_irecv`` runs its sends and
receives inside ``_coalescing_manager`` (torch/distributed/distributed_c10d.py): between
``ProcessGroup._start_coalescing`` and ``ProcessGroup._end_coalescing`` each op is dispatched as
usual, but ProcessGroupNCCL only queues it (``pointToPoint`` returns no Work while coalescing);
``_end_coalescing`` issues them as one NCCL group and returns the one Work the program waits.
Recorded op by op, as a gloo program's are, they would be separate ``isend``/``irecv`` lines with
no ``batch`` and no handle the program waits: the replay would run them one after the other (a
pipeline whose ranks both send first deadlocks there) and warn every handle never waited.

So the recorder replaces both methods on the class (as :mod:`.works` does ``Work.wait``): from the
start of a coalesced group to its end, a thread's lines are held; its point-to-point ops in a
group the recording declared ``nccl`` get one ``batch`` id (docs/oplog.md: they start together,
and a wait on any of them waits for all); at the end the held lines are written, the batch's
members last and together (an ``alloc`` line that came between two members goes before them, at
the first member's time: a batch is consecutive lines), and the group's Work is tied to the
batch: its wait is a ``wait`` on the first member's handle, plus one on each member outside the
batch (a collective coalesced with them, or a member in a group not declared ``nccl``, where
``batch`` is no field). A group coalesced inside another (of another process group) is a batch
of its own, with its own Work; its lines stay held in the outer group's until that one ends.
On gloo, ``batch_isend_irecv`` does not coalesce (``supports_coalescing`` is false): its ops are
issued and recorded one by one, each with its Work, as they run.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..kinds import OP_KINDS
from .works import Handle

BATCHED_KINDS = frozenset(k for k, spec in OP_KINDS.items() if "batch" in spec.fields)  # (isend,
# irecv: the op-log kinds a ``batch`` field joins)


@dataclass
class Group:
    """One coalesced group being recorded on a thread: its batch id, its held lines, and the
    handles of its members (with whether each joined the batch)."""

    batch: int
    lines: list[dict] = field(default_factory=list)
    members: list[tuple[Handle, dict, bool]] = field(default_factory=list)


class Coalescing:
    """The coalesced groups of one recording. ``write(fields)`` writes a line the group held;
    ``issued(work, handle)`` registers the group's Work (as :meth:`.works.Works.issued`)."""

    def __init__(self, write: Callable[[dict], None], issued: Callable[[Any, Handle], None]):
        self.write = write
        self.issued = issued
        self.open: dict[int, list[Group]] = {}  # thread ident -> its groups being coalesced,
        # the innermost last (one started inside another, of another process group: its lines
        # are held in the outer one's when it ends)
        self.batches = 0  # batch ids given so far (ids are numbered in line order)
        self.originals: dict[str, Any] = {}

    # -- lines --------------------------------------------------------------------------------------
    def group(self) -> Group | None:
        """The (innermost) group the current thread is coalescing, if any."""
        groups = self.open.get(threading.get_ident()) if self.open else None
        return groups[-1] if groups else None

    def member(self, g: Group, fields: dict, handle: Handle, nccl: bool) -> None:
        """A c10d op dispatched inside group ``g``: a point-to-point op in an ``nccl`` group
        joins the batch; its Work is the group's, not its own."""
        batched = nccl and fields["op"] in BATCHED_KINDS
        if batched:
            fields["batch"] = g.batch
        g.members.append((handle, fields, batched))

    def started(self) -> None:
        self.open.setdefault(threading.get_ident(), []).append(Group(self.batches))
        self.batches += 1

    def ended(self, work: Any) -> None:
        """The group ends with ``work``, the Work ``_end_coalescing`` returned (None: none came
        back, or the call raised): write its lines, and tie ``work`` to its members."""
        me = threading.get_ident()
        groups = self.open.get(me)
        if not groups:
            return
        g = groups.pop()
        if groups:  # (inside another group: its lines stay held, in that group's)
            batched = self._flush(g, groups[-1].lines.append)
        else:
            del self.open[me]
            batched = self._flush(g, self.write)
        if not g.members:
            return
        names = ([next(h.name for h, _f, b in g.members if b)] if batched else []) + \
            [h.name for h, _f, b in g.members if not b]
        first = g.members[0][0]
        label = "batch_isend_irecv" if batched else first.label
        handle = Handle(names[0], label, first.site, also=tuple(names[1:]))
        if work is not None:
            self.issued(work, handle)

    def _flush(self, g: Group, write: Callable[[dict], None]) -> list[dict]:
        """Write ``g``'s held lines with ``write``, the batch's last and together; its batched
        lines back."""
        batched = [f for _h, f, b in g.members if b]
        keep = {id(f) for f in batched}
        start = None  # the batch's time, once its first member is passed
        for fields in g.lines:
            if id(fields) in keep:
                start = batched[0]["t"] if start is None else start
            else:
                if start is not None:  # (moved before the batch: at its start, as a thread's
                    fields["t"] = start  # lines are in time order)
                write(fields)
        for fields in batched:
            write(fields)
        return batched

    # -- the replaced methods -----------------------------------------------------------------------
    def install(self, group_cls: type) -> None:
        """Replace ``_start_coalescing`` and ``_end_coalescing`` on ``group_cls`` (ProcessGroup)."""
        me = self
        start = self.originals["_start_coalescing"] = group_cls._start_coalescing
        end = self.originals["_end_coalescing"] = group_cls._end_coalescing
        self.cls = group_cls

        def _start_coalescing(self, *args, **kwargs):
            out = start(self, *args, **kwargs)
            me.started()
            return out

        def _end_coalescing(self, *args, **kwargs):
            try:
                work = end(self, *args, **kwargs)
            except BaseException:
                me.ended(None)
                raise
            me.ended(work)
            return work

        group_cls._start_coalescing = _start_coalescing
        group_cls._end_coalescing = _end_coalescing

    def uninstall(self) -> None:
        for name, orig in self.originals.items():
            setattr(self.cls, name, orig)
        self.originals.clear()
        for groups in self.open.values():  # (groups the recording ended inside)
            while groups:
                g = groups.pop()
                self._flush(g, groups[-1].lines.append if groups else self.write)
        self.open.clear()
