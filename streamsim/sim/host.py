"""A host thread as its program sees it: launches, copies, syncs, comm ops, buffers, frees.

Every call issues ops through the engine (``host_op``, ``enqueue``, ``blocking_op``); the methods
read like the torch.cuda and torch.distributed calls they stand for.

One module because it is one class, the host thread a program holds: its stream, memory and comm
calls share its state (the per-thread Access cache, handle numbering, the current stream), and
the handles of :mod:`.handles` call back into it.
"""
from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

from greenlet import getcurrent

from ..trace import Agent, Alloc, Blocked, Note, READ, WRITE, Access, View
from .comm import batch_issue_order, wire_bytes
from .groups import GroupConfig
from .engine import Engine
from .errors import ModelError
from . import handoff, labels
from .handles import Event, Group, Signal, Stream, Work, _listify
from .memory import Buffer, Ref, Tensor, as_view, labels_of, nbytes_of, new_storage
from .records import HostState, Rec


_MAX_CACHED = 1 << 16  # Accesses a host keeps per mode for reuse
_BY_INPUT = frozenset({"reduce", "gather"})  # named by their input: only the root has an output


class Host(handoff.Calls):
    """One host thread of one rank: the object a host program receives and calls."""

    def __init__(self, engine: Engine, h: HostState):
        self._e, self._h = engine, h
        self.rank = h.agent.rank
        self.thread = h.agent.name
        self._events: dict[str, Event] = {}
        self._buffers: dict[str, Buffer] = {}
        self._handles = 0
        self._whole: dict[str, dict] = {READ: {}, WRITE: {}}  # a whole buffer's (rank, name,
        # nbytes), a View or a Ref -> its Access (see _accesses)
        self._views: dict[View, View] = {}  # the one View object of each value in those
        self.log: list[str] = []  # an action log a model may append to (for call-order tests)

    # -- context ---------------------------------------------------------------------------------
    def _caller(self) -> "Host":
        """The host thread that is running now (objects may be shared between threads)."""
        e = self._e
        if e.main_glet is None or getcurrent() is e.main_glet:
            raise ModelError("streamsim API calls must be made from a running host program "
                             "(a function passed to Simulation.spawn)")
        return e.current.api

    step, microbatch, origin = labels.step, labels.microbatch, labels.origin  # see sim.labels

    @property
    def now(self) -> float:
        return self._h.clock

    def stream(self, name: str = "compute") -> Stream:
        """This rank's stream ``name`` (made on first use); comm streams: ``Group.comm_stream``."""
        return Stream(self, self._e.stream(self.rank, name).agent.name)

    def current_stream(self) -> Stream:
        return Stream(self, self._h.current_stream)

    @contextlib.contextmanager
    def use_stream(self, stream: Stream | str) -> Iterator[Stream]:
        """``with torch.cuda.stream(s):`` — ops issued inside go to ``stream``."""
        name = stream if isinstance(stream, str) else stream.name
        self._e.stream(self.rank, name)
        prev, self._h.current_stream = self._h.current_stream, name
        try:
            yield Stream(self, name)
        finally:
            self._h.current_stream = prev

    def event(self, name: str | None = None) -> Event:
        if name is None:
            name = f"event{len(self._events)}"
        ev = self._events.get(name)
        if ev is None:
            ev = self._events[name] = Event(self, name)
        return ev

    def buffer(self, name: str, nbytes: int, stream: Stream | str | None = None) -> Buffer:
        """A new tensor, its own storage (``name`` labels it), on ``stream`` (default: current)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ModelError(f"buffer {name!r}: nbytes must be a non-negative int, got {nbytes!r}")
        s = stream if isinstance(stream, str) else (stream.name if stream else self._h.current_stream)
        e, rank = self._e, self.rank
        storage = new_storage(rank, name, e.live, e.held, e.labels)  # (a new tensor's own)
        buf = self._buffers[storage] = Buffer(rank, storage, nbytes, s, name)
        e.allocations.append(Alloc(rank, storage, nbytes, float(self._h.clock), len(e.recs),
                                   e.location_of("host.buffer"), "" if storage == name else name,
                                   self._h.agent.name, s))
        e.freed.pop((rank, storage), None)  # a new life of a freed storage: the block reused
        return buf

    def alloc(self, buffer: str, nbytes: int | None, *, stream: str = "compute",
              label: str | None = None, name: str = "alloc") -> None:
        """An allocation as an action of the program (an op log's ``alloc`` line): a host op of
        kind ``alloc``, of no duration, that starts a new life of storage ``buffer`` (its uses
        are no longer after a free), its ``attrs`` naming the buffer, its size (None: not
        stated), its allocation ``stream`` and ``label`` (the name the program gave the tensor),
        so that it has a place in reports. Unlike :meth:`buffer` it makes no storage of its own
        and returns nothing: ``buffer`` names the storage the following actions use. It enqueues
        nothing (allocation is host work), so it changes no stream's order."""
        e = self._e
        rec = e.host_op(self._h, "alloc", name)
        rec.attrs.update(buffer=buffer, nbytes=nbytes, stream=stream)
        if label is not None:
            rec.attrs["label"] = label
        e.freed.pop((self.rank, buffer), None)  # a new life: uses are no longer late

    # -- the program's own time and order (a replay's calls) ---------------------------------------
    def idle_until(self, t: float) -> None:
        """The thread spent the time up to ``t`` (µs) in code the simulation does not see (an op
        log's ``t``: when the recorded program issued its next line): its clock moves on to ``t``,
        and no op is made. Nothing happens when the clock is at ``t`` or later already."""
        if t > self._h.clock:
            self._h.clock = t

    def settle(self) -> None:
        """Let simulated time reach this thread's clock before the program decides something
        from state the rank's other threads share (a replay's line order): they then act in
        simulated-time order, not in the order their programs happened to run ahead. The calls
        that touch shared state (streams, events, groups) settle by themselves."""
        self._e.settle(self._h)

    def signal(self) -> Signal:
        """A new :class:`Signal`: one thread waits for it (:meth:`wait_signal`), another sets it."""
        return Signal(self._e.env.event())

    def wait_signal(self, signal: Signal, reason: str, waits_for: Iterable[Agent] = ()) -> None:
        """Block this thread, in simulated time, until ``signal`` is set (by another thread's
        program). ``reason`` says what it waits for and ``waits_for`` the threads that can set it,
        both for a deadlock's report should it never be set. Before it blocks, the syncs that a
        fix inserts after this thread's last action run (the thread it waits for may be waiting
        for them)."""
        e, h = self._e, self._h
        e.flush_post_injections(h)
        e.block(h, signal._event, Blocked(h.agent, None, reason, tuple(waits_for)))

    # -- stream ops --------------------------------------------------------------------------------
    def launch(self, name: str, *, reads: Iterable[Tensor] = (), writes: Iterable[Tensor] = (),
               dur: float = 1.0, stream: Stream | str | None = None) -> None:
        """Launch a kernel on ``stream`` (default: the current stream)."""
        self._e.enqueue(self._h, self._h.current_stream if stream is None else
                        self._stream_name(stream), "launch", name, dur,
                        self._accesses(reads, writes))

    def copy(self, dst: Tensor, src: Tensor, *, dur: float = 1.0, name: str = "copy_",
             stream: Stream | str | None = None) -> None:
        """``dst.copy_(src)`` on the current stream."""
        self.launch(name, reads=[src], writes=[dst], dur=dur, stream=stream)

    def _accesses(self, reads: Iterable[Tensor], writes: Iterable[Tensor]) -> tuple[Access, ...]:
        """:func:`memory.accesses`, reusing one frozen Access per value and mode: a whole
        storage's by its rank, name and size (a model's buffer of each step is a new object of
        the same storage), a View's and a Ref's by their own value (frozen: equal ones are one).
        A new View and Access per kernel argument was most of the cost of a launch; and the HB
        pass finds an access's state by its view object, by its value only for an object it has
        not seen (an op log's refs are interned, one object per distinct ref): vllm_pp's 130,864
        accesses were as many objects, of 53,462 values."""
        if not reads and not writes:
            return ()
        out = []
        views = self._views
        for mode, items in ((READ, reads), (WRITE, writes)):
            cache = self._whole[mode]
            for t in items:
                kind = type(t)
                key = (t.rank, t.name, t.nbytes) if kind is Buffer else t
                cached = kind is Buffer or kind is View or kind is Ref  # (not a subclass)
                acc = cache.get(key) if cached else None
                if acc is None:
                    view = as_view(t)
                    if cached:  # (interned with the Access that keeps it: as bounded)
                        if len(cache) > _MAX_CACHED:  # (a model making a view per launch)
                            cache.clear()
                            views.clear()
                        view = views.setdefault(view, view)  # (a read's and a write's: one)
                    acc = Access(view, mode, t.window) if isinstance(t, Ref) else \
                        Access(view, mode)
                    if cached:
                        cache[key] = acc
                out.append(acc)
        return tuple(out)

    def _stream_name(self, stream: Stream | str | None) -> str:
        if stream is None:
            return self._h.current_stream
        return stream if isinstance(stream, str) else stream.name

    def record(self, event: Event, stream: Stream | None = None) -> None:
        rec = self._e.enqueue(self._h, self._stream_name(stream), "record", f"record({event.name})",
                              0.0)
        rec.attrs["event"] = event.name
        event._recorded = rec

    def wait_event(self, event: Event, stream: Stream | str | None = None) -> None:
        self._e.settle(self._h)
        after = [event._recorded] if event._recorded is not None else []
        rec = self._e.enqueue(self._h, self._stream_name(stream), "wait_event",
                              f"wait_event({event.name})", 0.0, after=after)
        rec.attrs["event"] = event.name
        if not after:
            self._note_unrecorded(event, rec)

    def _note_unrecorded(self, event: Event, rec: Rec) -> None:
        self._e.notes.append(Note("event-never-recorded", f"{rec.name} at {rec.location}: event "
                                  f"{event.name!r} was never recorded, so the wait orders nothing",
                                  rec.id))

    def free(self, buffer: Buffer) -> None:
        """Drop the last reference: the caching allocator takes the block back on its stream.

        The free is a write on the allocation stream; after ``record_stream(s)`` it also waits for
        ``s``'s work issued so far (the allocator's event).
        """
        e = self._e
        e.settle(self._h)
        key = (self.rank, buffer.name)
        e.live.discard(key)  # (a new host.buffer of its name may reuse the block)

        def recorded_work() -> list[Rec]:  # (read once the free's issue ran any injected fix)
            recorded = e.recorded_streams.pop(key, ())
            e.held.update([key] if recorded else [])  # (back once their work ran: not reused)
            return [r for r in (e.stream(self.rank, n).last for n in recorded) if r is not None]
        earlier = e.freed.pop(key, None)  # (the free's own write is no use of a freed buffer)
        rec = e.enqueue(self._h, buffer.stream, "free", f"free({buffer.label})", 0.0,
                        self._accesses((), (buffer,)), after=recorded_work)
        rec.attrs["buffer"] = buffer.name
        if earlier is not None:
            rec.attrs["after_free"] = (buffer.name,)
            e.notes.append(Note("double-free", f"{rec.name} at {rec.location} frees "
                                f"{buffer.name!r} on rank{self.rank} again: {earlier.name} at "
                                f"{earlier.location} already freed it (no alloc since)", rec.id))
        e.freed[key] = rec

    def record_stream(self, buffer: Buffer, stream: Stream | str) -> None:
        """``tensor.record_stream(s)``: a later free also waits for ``s``'s work up to the free."""
        name = self._e.checked_stream(self.rank, self._stream_name(stream))
        rec = self._e.host_op(self._h, "record_stream", f"record_stream({buffer.label}, {name})")
        rec.attrs.update(buffer=buffer.name, stream=name)
        self._e.recorded_streams.setdefault((self.rank, buffer.name), []).append(name)

    # -- host work and syncs ------------------------------------------------------------------------
    def host_work(self, name: str, *, reads: Iterable[Tensor] = (), writes: Iterable[Tensor] = (),
                  dur: float = 0.0) -> None:
        """Python work on the host thread itself (e.g. filling a pinned buffer)."""
        self._e.host_op(self._h, "host", name, dur,
                        self._accesses(reads, writes) if reads or writes else ())

    def sleep(self, dur: float, name: str = "host work") -> None:
        self.host_work(name, dur=dur)

    def sync_event(self, event: Event) -> None:
        e, h = self._e, self._h
        rec = e.blocking_op(h, "sync_event", f"{event.name}.synchronize()")
        rec.attrs["event"] = event.name
        if event._recorded is None:
            self._note_unrecorded(event, rec)
        else:
            e.wait_recs(h, rec, [event._recorded], f"{event.name}.synchronize() waits for its "
                        "captured work")
        e.end_blocking(h, rec)

    def sync_stream(self, stream_name: str) -> None:
        e, h = self._e, self._h
        rec = e.blocking_op(h, "sync_stream", f"{stream_name}.synchronize()")
        rec.attrs["stream"] = stream_name
        s = e.stream(self.rank, stream_name)
        e.wait_recs(h, rec, [s.last] if s.last else [], f"{stream_name}.synchronize()")
        e.end_blocking(h, rec)

    def synchronize(self) -> None:
        """``torch.cuda.synchronize()``: the host blocks until every stream of the rank drains."""
        e, h = self._e, self._h
        rec = e.blocking_op(h, "sync_device", "cuda.synchronize()")
        lasts = [s.last for a, s in sorted(e.streams.items())  # gloo work is not a CUDA stream
                 if a.rank == self.rank and s.last and not a.is_gloo]
        e.wait_recs(h, rec, lasts, "cuda.synchronize() waits for every stream")
        e.end_blocking(h, rec)

    def query_event(self, event: Event) -> bool:
        e, h = self._e, self._h
        rec = e.blocking_op(h, "query", f"{event.name}.query()")
        target = event._recorded
        done = target is None or target.done
        if done and target is not None:
            rec.after = [*rec.after, target]
        rec.attrs["result"] = done
        e.end_blocking(h, rec)
        return done

    def group(self, name: str) -> Group:
        cfg = self._e.groups.get(name)
        if cfg is None:
            raise ModelError(f"unknown process group {name!r}")
        if self.rank not in cfg.ranks:
            raise ModelError(f"rank {self.rank} is not in group {name!r} (ranks {list(cfg.ranks)})")
        return Group(self, cfg)

    # -- comm ----------------------------------------------------------------------------------------
    def _nccl_enqueue_edge(self) -> list[Rec]:
        """ProcessGroupNCCL makes its comm stream wait for the current stream's position: taken when
        the op is issued, after any sync a fix inserted before it (hence a callable for enqueue)."""
        current = self._e.stream(self.rank, self._h.current_stream)
        return [current.last] if current.last is not None else []

    def _new_handle(self, given: str | None, kind: str) -> str:
        self._handles += 1
        return given or f"{kind}#{self._handles}"

    def p2p(self, cfg: GroupConfig, kind: str, tensors: list, peer: int, nbytes: int | None,
            dur: float | None, name: str | None, handle: str | None) -> Work:
        self._e.settle(self._h)
        rec = self._p2p_rec(cfg, kind, tensors, peer, nbytes, dur, name, handle,
                            cfg.p2p_stream(self.rank, peer, kind))
        return self._work(rec, cfg)

    def _p2p_rec(self, cfg: GroupConfig, kind: str, tensors: list, peer: int,
                 nbytes: int | None, dur: float | None, name: str | None, handle: str | None,
                 stream: str, batch: tuple[int | None, int] | None = None) -> Rec:
        """Enqueue one isend/irecv on ``stream`` and enter it in the p2p matching; ``batch`` is
        (id or None for the batch's first op, size) for an op of a ``batch_isend_irecv``."""
        if peer not in cfg.ranks:
            raise ModelError(f"{kind}: peer rank {peer} is not in group {cfg.name!r}")
        e = self._e
        size, is_send = nbytes_of(tensors) if nbytes is None else nbytes, kind == "isend"
        mode = "read" if is_send else "write"
        acc = self._accesses(tensors, ()) if is_send else self._accesses((), tensors)
        rec = e.enqueue(self._h, stream, kind,
                        name or f"{kind}({labels_of(e.labels, tensors)}) "
                                f"{'to' if is_send else 'from'} rank{peer}",
                        (cfg.transfer_time(size) if dur is None else dur) if is_send else 0.0,
                        acc, after=self._nccl_enqueue_edge)
        if batch is not None:  # (before the next enqueue: the stream loop may look at it then)
            rec.attrs.update(batch=rec.id if batch[0] is None else batch[0], batch_size=batch[1])
        src, dst = (self.rank, peer) if is_send else (peer, self.rank)
        m = e.p2p_entry(cfg.name, src, dst, is_send)
        if is_send:
            m.send = rec
        else:
            m.recv = rec
        e.matches[rec.id] = m
        rec.handle = self._new_handle(handle, kind)
        rec.attrs.update(group=cfg.name, peer=peer, nbytes=size, mode=mode, dur=rec.dur)
        return rec

    def batch_p2p(self, cfg: GroupConfig, ops: list) -> list[Work]:
        """``dist.batch_isend_irecv``: the ops go to the group's own stream ``nccl:<group>`` (a
        batched op uses the group's communicator whatever ``p2p_streams`` says), sends first, and
        start together. One Work per op, in the list's order; each completes with the whole batch,
        as the one Work ProcessGroupNCCL returns for a coalesced batch does."""
        if not ops:
            raise ModelError("batch_isend_irecv needs at least one P2POp")
        h = self._h
        self._e.settle(h)
        order = batch_issue_order([op.op for op in ops])
        recs: dict[int, Rec] = {}
        batch: tuple[int | None, int] = (None, len(ops))
        # One call issues the members back to back: the rank's other threads must not catch up
        # (settle) between two of them, or their ops could land inside the batch on its stream.
        shared, h.shared = h.shared, False
        origin = h.origin  # (a replay's batch: each op its own line's, P2POp.origin)
        try:
            for i, op in ((i, ops[i]) for i in order):
                if op.origin is not None:
                    h.origin = op.origin
                recs[i] = self._p2p_rec(cfg, op.op, _listify(op.tensor), op.peer, op.nbytes, op.dur,
                                        op.name, op.handle, f"nccl:{cfg.name}", batch)
                batch = (recs[i].attrs["batch"], len(ops))
        finally:
            h.shared, h.origin = shared, origin
        members = tuple(recs[i] for i in order)
        return [self._work(recs[i], cfg, members) for i in range(len(ops))]

    def _work(self, rec: Rec, cfg: GroupConfig, recs: tuple[Rec, ...] | None = None) -> Work:
        work = Work(self, rec, cfg, rec.handle, recs)
        if rec.issuer is not None:
            self._e.issued_work(rec.issuer, work)
        return work

    def collective(self, cfg: GroupConfig, kind: str, inputs: list, outputs: list,
                   nbytes: int | None, dur: float | None, name: str | None,
                   handle: str | None, root: int | None = None) -> Work:
        """A collective of ``cfg`` on its comm stream; ``root``: a rooted one's (``reduce``,
        ``gather``, ``scatter``) global root rank, which must be in the group."""
        e = self._e
        if root is not None and root not in cfg.ranks:
            raise ModelError(f"{kind}: root rank {root} is not in group {cfg.name!r} "
                             f"(ranks {list(cfg.ranks)})")
        e.settle(self._h)
        if nbytes is None:
            nbytes = wire_bytes(kind, inputs, outputs, len(cfg.ranks))
        size = nbytes
        named = inputs if kind in _BY_INPUT else outputs
        rec = e.enqueue(self._h, f"{cfg.backend}:{cfg.name}", kind,
                        name or f"{kind}({labels_of(self._e.labels, named)})",
                        cfg.transfer_time(size) if dur is None else dur,
                        self._accesses(inputs, outputs), after=self._nccl_enqueue_edge)
        e.matches[rec.id] = e.collective_entry(cfg.name, self.rank, len(cfg.ranks))
        rec.handle = self._new_handle(handle, kind)
        rec.attrs.update(group=cfg.name, nbytes=size, ranks=cfg.ranks, dur=rec.dur)
        if root is not None:
            rec.attrs["root"] = root
        return self._work(rec, cfg)

    def wait_work(self, work: Work, blocking: bool | None) -> None:
        e, h = self._e, self._h
        targets = list(work._recs)
        gloo = work._cfg.backend == "gloo"
        again = gloo and work._rec.kind == "isend" and work._rec.id in e.gloo_sends_waited
        if gloo and work._rec.kind == "isend":
            e.gloo_sends_waited.add(work._rec.id)
        work.waited = True
        if blocking is None:
            blocking = work._cfg.blocking_wait
        if work._rec.kind == "barrier" and not gloo:
            # ProcessGroupNCCL's barrier: the current stream waits for it, then the host syncs
            # the current stream (dist.barrier() orders the hosts, not only the streams)
            blocking = True
            current = e.stream(self.rank, h.current_stream).last
            if current is not None and current not in targets:
                targets.append(current)
        if gloo or blocking:
            rec = e.blocking_op(h, "wait", f"{work.name}.wait()")
            rec.attrs.update(handle=work.name, blocking=True)
            if again:
                e.notes.append(Note(
                    "gloo-send-waited-twice", f"{rec.name} at {rec.location} waits the handle of "
                    f"{work._rec.name} (issued at {work._rec.location}) a second time: under gloo "
                    "a second wait() on an isend's handle hangs (seen with torch 2.13: it waits "
                    "for a send never made); the simulation takes it as satisfied", rec.id))
            e.wait_recs(h, rec, targets, f"{work.name}.wait() blocks the host")
            e.end_blocking(h, rec)
        else:
            rec = e.enqueue(h, h.current_stream, "wait", f"{work.name}.wait()", 0.0,
                            after=targets)
            rec.attrs.update(handle=work.name, blocking=False)

    def query_work(self, work: Work, observed: bool | None = None) -> bool:
        e, h = self._e, self._h
        rec = e.blocking_op(h, "query", f"{work.name}.is_completed()")
        done = all(r.done for r in work._recs) if observed is None else observed
        if observed and not all(r.done for r in work._recs):  # (seen done: it was done by then)
            e.wait_recs(h, rec, work._recs, f"{work.name}.is_completed() was observed True")
        elif done:
            rec.after = [*rec.after, *work._recs]
        if done:
            work.waited = True
        rec.attrs.update(handle=work.name, result=done)
        if not done:  # no edge names the op it asked about: keep its id (for the op-log writer)
            rec.attrs["queried"] = work._rec.id
        e.end_blocking(h, rec)
        return done

    def send_object(self, cfg: GroupConfig, nbytes: int, dst: int, name: str | None,
                    dur: float | None = None) -> None:
        e, h = self._e, self._h
        rec = e.blocking_op(h, "send_object", name or f"send_object to rank{dst}")
        dur = e.scaled(cfg.transfer_time(nbytes) if dur is None else dur, rec)  # (jitter too)
        rec.attrs.update(group=cfg.name, peer=dst, nbytes=nbytes, dur=dur)
        m = e.p2p_entry(cfg.name, self.rank, dst, True)
        m.send = rec
        if nbytes > cfg.eager_bytes and not m.recv_started.triggered:
            e.block(h, m.recv_started, Blocked(h.agent, rec.id, f"blocking send_object to rank"
                                               f"{dst} ({nbytes} B > gloo eager threshold) waits "
                                               "for the matching recv_object",
                                               e._peer_agents(m.recv, dst)))
        e.block(h, e.env.timeout(dur))
        e.end_blocking(h, rec)
        m.arrival = e.env.now
        m.arrived.succeed()

    def recv_object(self, cfg: GroupConfig, src: int, name: str | None) -> None:
        e, h = self._e, self._h
        rec = e.blocking_op(h, "recv_object", name or f"recv_object from rank{src}")
        rec.attrs.update(group=cfg.name, peer=src)
        m = e.p2p_entry(cfg.name, src, self.rank, False)
        m.recv = rec
        m.recv_started.succeed()
        if not m.arrived.triggered:
            e.block(h, m.arrived, Blocked(h.agent, rec.id, f"recv_object from rank{src} waits for "
                                          "the matching send", e._peer_agents(m.send, src)))
        rec.joins = [m.send.id]
        e.end_blocking(h, rec)

    def isend_object(self, cfg: GroupConfig, nbytes: int, dst: int, name: str | None,
                     handle: str | None, dur: float | None = None) -> Work:
        e = self._e
        rec = e.enqueue(self._h, f"gloo:{cfg.name}", "isend_object",
                        name or f"isend_object to rank{dst}",
                        cfg.transfer_time(nbytes) if dur is None else dur)
        m = e.p2p_entry(cfg.name, self.rank, dst, True)
        m.send = rec
        e.matches[rec.id] = m
        rec.handle = self._new_handle(handle, "isend_object")
        rec.attrs.update(group=cfg.name, peer=dst, nbytes=nbytes, dur=rec.dur)
        return self._work(rec, cfg)
