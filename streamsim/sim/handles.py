"""The objects a host program holds: CUDA streams and events, ``Work`` handles, process groups,
and the signals a replay's threads hold one another back with.

Each is a thin handle on its :class:`~streamsim.sim.host.Host`: its methods call the host thread
that is running (objects may be shared between threads), which issues the op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from .groups import GroupConfig
from .errors import ModelError
from .memory import Tensor
from .origins import Origin
from .records import Rec

if TYPE_CHECKING:  # (annotations only: simpy is imported where an Engine is made)
    import simpy


class HostThread(Protocol):
    """What a handle needs of the host thread it belongs to (a :class:`streamsim.sim.host.Host`,
    which imports this module): its rank, new events, and the host a call is made on (the thread
    that is running), whose method then issues the op."""

    rank: int

    def _caller(self) -> Any: ...

    def event(self, name: str | None = None) -> Any: ...


class Stream:
    """A CUDA stream of one rank (``torch.cuda.Stream``), named: ``host.stream("side")`` makes or
    finds one (``"compute"`` is the default stream).

    A process group's ops run on comm streams named ``nccl:<group>`` (its collectives, and its
    isend/irecv with ``p2p_streams="per_group"``), ``nccl:<group>:<low>-<high>`` (isend/irecv
    with ``per_pair``) and ``gloo:<group>`` (``isend_object``). Get one with
    ``host.group(G).comm_stream()`` (``comm_stream(peer)`` for a p2p op's), e.g. for
    ``host.record_stream(buf, stream)``; a name starting with ``nccl:`` or ``gloo:`` that no
    declared group of the rank has is an error, not a new stream.
    """

    __slots__ = ("_host", "name")

    def __init__(self, host: HostThread, name: str):
        self._host, self.name = host, name

    def wait_event(self, event: "Event") -> None:
        """``stream.wait_event(e)``: later ops of this stream wait for the event's captured work."""
        self._host._caller().wait_event(event, self)

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event or self._host.event()
        event.record(self)
        return event

    def wait_stream(self, other: "Stream") -> None:
        """``stream.wait_stream(other)``: record an event on ``other`` and wait it here."""
        ev = self._host.event(f"wait_stream:{other.name}")
        ev.record(other)
        self.wait_event(ev)

    def synchronize(self) -> None:
        """``stream.synchronize()``: the host blocks until this stream's work so far is done."""
        self._host._caller().sync_stream(self.name)

    def __repr__(self) -> str:
        return f"Stream(rank{self._host.rank}:{self.name})"


class Event:
    """A CUDA event (``torch.cuda.Event``): captures a stream's position when recorded."""

    __slots__ = ("_host", "name", "_recorded")

    def __init__(self, host: HostThread, name: str):
        self._host, self.name = host, name
        self._recorded: Rec | None = None

    def record(self, stream: Stream | None = None) -> None:
        self._host._caller().record(self, stream)

    def wait(self, stream: Stream | None = None) -> None:
        """``event.wait(stream)``: the stream (current by default) waits for the captured work."""
        h = self._host._caller()
        h.wait_event(self, stream or h.current_stream())

    def synchronize(self) -> None:
        """``event.synchronize()``: the host blocks until the captured work is done."""
        self._host._caller().sync_event(self)

    def query(self) -> bool:
        """``event.query()``: True when the captured work is done (then it orders it before the host)."""
        return self._host._caller().query_event(self)

    def __repr__(self) -> str:
        return f"Event({self.name})"


class Work:
    """An async handle (``torch.distributed.Work``) of one comm op; ``_recs``: the ops it
    completes with (its own, or every op of its ``batch_isend_irecv``)."""

    __slots__ = ("_host", "_rec", "_recs", "_cfg", "name", "waited")

    def __init__(self, host: HostThread, rec: Rec, cfg: GroupConfig, name: str,
                 recs: tuple[Rec, ...] | None = None):
        self._host, self._rec, self._cfg, self.name = host, rec, cfg, name
        self._recs = recs or (rec,)
        self.waited = False

    def wait(self, blocking: bool | None = None) -> None:
        """NCCL: the current stream waits for the op (host blocks only with blocking wait).
        Gloo: the host blocks until the op is done."""
        self._host._caller().wait_work(self, blocking)

    def is_completed(self, observed: bool | None = None) -> bool:
        """True when the op has finished at this point of simulated time (orders it if True).

        ``observed`` is what a recorded program saw (op log ``query`` with ``result``): the
        program went on as it did, so True waits (the host) until the op is done and orders it,
        as the program was ordered after it; False orders nothing, whatever the simulated state."""
        return self._host._caller().query_work(self, observed)

    def __repr__(self) -> str:
        return f"Work({self.name})"


class Signal:
    """A one-shot signal between host threads of a run (:meth:`Host.signal`): a thread blocks
    on it (:meth:`Host.wait_signal`) until another thread's program sets it (:meth:`set`). It
    stands for no CUDA or torch object and makes no op: an op-log replay holds a line back with
    it until the line it waits for was issued."""

    __slots__ = ("_event",)

    def __init__(self, event: simpy.Event):
        self._event = event

    def set(self) -> None:
        """Wake the threads waiting for it (once: a signal is not set twice)."""
        self._event.succeed()

    @property
    def is_set(self) -> bool:
        return self._event.triggered


@dataclass(frozen=True)
class P2POp:
    """``dist.P2POp``: one op of a :meth:`Group.batch_isend_irecv`. ``op`` is ``"isend"`` or
    ``"irecv"``; the keywords are those of :meth:`Group.isend` (``dur``: sends only), and
    ``origin`` the file line a replay's op stands for (:attr:`Host.origin`; None: the host's)."""

    op: str
    tensor: Tensor | Sequence[Tensor]
    peer: int
    nbytes: int | None = None
    dur: float | None = None
    name: str | None = None
    handle: str | None = None
    origin: Origin | None = None

    def __post_init__(self):
        if self.op not in ("isend", "irecv"):
            raise ModelError(f"P2POp: op must be 'isend' or 'irecv', not {self.op!r}")
        if self.op == "irecv" and self.dur is not None:
            raise ModelError("P2POp: a receive takes no dur (it lasts until its data arrives)")


class Group:
    """A process group as seen from one rank: ``host.group("pp")``."""

    __slots__ = ("_host", "cfg")

    def __init__(self, host: HostThread, cfg: GroupConfig):
        self._host, self.cfg = host, cfg

    @property
    def name(self) -> str:
        return self.cfg.name

    @property
    def rank_in_group(self) -> int:
        return self.cfg.ranks.index(self._host.rank)

    @property
    def size(self) -> int:
        return len(self.cfg.ranks)

    def comm_stream(self, peer: int | None = None, kind: str | None = None) -> Stream:
        """The comm stream this group's ops run on from this rank, e.g. for ``record_stream``:
        ``nccl:<group>`` (collectives; isend/irecv too with ``p2p_streams="per_group"``), with
        ``peer`` the stream of an isend/irecv with that rank (``nccl:<group>:<low>-<high>`` with
        ``per_pair``), ``gloo:<group>`` for a gloo group (its collectives and ``isend_object``),
        with ``peer`` and ``kind`` (``"isend"``/``"irecv"``) a gloo group's tensor channel
        ``gloo:<group>:to<peer>``/``from<peer>``."""
        cfg, rank = self.cfg, self._host.rank
        if peer is not None and (peer not in cfg.ranks or peer == rank):
            raise ModelError(f"comm_stream: peer must be another rank of group {cfg.name!r} "
                             f"(ranks {list(cfg.ranks)}), not {peer!r}")
        if peer is None or (cfg.backend == "gloo" and kind is None):
            return Stream(self._host, f"{cfg.backend}:{cfg.name}")
        if cfg.backend == "gloo":
            return Stream(self._host, cfg.p2p_stream(rank, peer, kind))
        return Stream(self._host, cfg.p2p_stream(rank, peer))

    def _need(self, backend: str, what: str) -> None:
        if self.cfg.backend != backend:
            raise ModelError(f"{what} needs a {backend} group; {self.cfg.name!r} is "
                             f"{self.cfg.backend}")

    def isend(self, tensors: Tensor | Sequence[Tensor], dst: int, *, nbytes: int | None = None,
              dur: float | None = None, name: str | None = None, handle: str | None = None) -> Work:
        """``dist.isend``: NCCL, on the group's (or pair's) comm stream; gloo, on the channel
        ``gloo:<group>:to<dst>``, a rendezvous whatever its size, its wait blocking the host."""
        return self._host._caller().p2p(self.cfg, "isend", _listify(tensors), dst, nbytes, dur,
                                        name, handle)

    def irecv(self, tensors: Tensor | Sequence[Tensor], src: int, *, nbytes: int | None = None,
              name: str | None = None, handle: str | None = None) -> Work:
        """``dist.irecv``: NCCL, on the group's (or pair's) comm stream; gloo, on the channel
        ``gloo:<group>:from<src>``, its wait blocking the host."""
        return self._host._caller().p2p(self.cfg, "irecv", _listify(tensors), src, nbytes, None,
                                        name, handle)

    def all_reduce(self, tensors: Tensor | Sequence[Tensor], **kw) -> Work:
        t = _listify(tensors)
        return self._collective("all_reduce", t, t, **kw)

    def all_gather(self, outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
                   **kw) -> Work:
        return self._collective("all_gather", _listify(inputs), _listify(outputs), **kw)

    def all_gather_into_tensor(self, output: Tensor, input: Tensor, **kw) -> Work:
        """``dist.all_gather_into_tensor``: the same op as :meth:`all_gather` (one output)."""
        return self._collective("all_gather", [input], [output], **kw)

    def reduce_scatter(self, output: Tensor | Sequence[Tensor],
                       inputs: Tensor | Sequence[Tensor], **kw) -> Work:
        """``dist.reduce_scatter_tensor(output, input)`` / ``dist.reduce_scatter(output,
        input_list)``: reads every input, writes this rank's shard (``output``); bytes on the
        wire default to the inputs' size."""
        return self._collective("reduce_scatter", _listify(inputs), _listify(output), **kw)

    def all_to_all(self, outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
                   **kw) -> Work:
        """``dist.all_to_all_single(output, input)`` / ``dist.all_to_all(output_list,
        input_list)``: reads every input, writes every output; bytes default to the inputs'."""
        return self._collective("all_to_all", _listify(inputs), _listify(outputs), **kw)

    def batch_isend_irecv(self, ops: Sequence[P2POp]) -> list[Work]:
        """``dist.batch_isend_irecv(p2p_op_list)``: the ops start together on the group's own
        stream ``nccl:<group>`` (even with ``p2p_streams="per_pair"``); one Work per op, each
        completing with the whole batch."""
        self._need("nccl", "batch_isend_irecv")
        for op in ops:
            if not isinstance(op, P2POp):
                raise ModelError(f"batch_isend_irecv takes P2POp items, got {type(op).__name__}")
        return self._host._caller().batch_p2p(self.cfg, list(ops))

    def broadcast(self, tensors: Tensor | Sequence[Tensor], src: int, **kw) -> Work:
        t = _listify(tensors)
        reads = t if self._host.rank == src else []
        return self._collective("broadcast", reads, t, **kw)

    def barrier(self, *, dur: float | None = None, name: str | None = None,
                handle: str | None = None) -> Work:
        """``dist.barrier(async_op=True)``: no tensor; every rank's completion follows every
        rank's start. Its wait blocks the host on NCCL too (ProcessGroupNCCL makes the current
        stream wait for it, then synchronizes that stream); ``dist.barrier()`` is
        ``g.barrier().wait()``. Costs the group's latency alone."""
        return self._collective("barrier", [], [], dur=dur, name=name, handle=handle)

    def reduce(self, tensors: Tensor | Sequence[Tensor], dst: int, **kw) -> Work:
        """``dist.reduce(tensor, dst)``: every rank reads its tensor; only ``dst`` (a global
        rank) writes it, with the result. ``dst``'s completion follows every rank's start; another
        rank's follows nothing of the others (it may finish once its data left)."""
        t = _listify(tensors)
        return self._collective("reduce", t, t if self._host.rank == dst else [], root=dst, **kw)

    def gather(self, tensor: Tensor | Sequence[Tensor],
               gather_list: Sequence[Tensor] | None = None, dst: int = 0, **kw) -> Work:
        """``dist.gather(tensor, gather_list, dst)``: every rank reads ``tensor``; only ``dst``
        writes, its ``gather_list`` (given on ``dst`` only, as torch requires). Ordered as
        :meth:`reduce`; bytes on the wire default to the ranks times the tensor's size."""
        if self._host.rank == dst and not gather_list:
            raise ModelError(f"gather: rank {dst} is the destination: it needs a gather_list")
        if self._host.rank != dst and gather_list:
            raise ModelError(f"gather: gather_list is given on rank {self._host.rank}, not the "
                             f"destination rank {dst} (torch refuses it there)")
        return self._collective("gather", _listify(tensor), list(gather_list or ()), root=dst,
                                **kw)

    def scatter(self, tensor: Tensor | Sequence[Tensor],
                scatter_list: Sequence[Tensor] | None = None, src: int = 0, **kw) -> Work:
        """``dist.scatter(tensor, scatter_list, src)``: only ``src`` reads, its ``scatter_list``
        (given on ``src`` only, as torch requires); every rank writes ``tensor``. Each rank's
        completion follows ``src``'s start; ``src``'s follows nothing of the others. Bytes on the
        wire default to the ranks times the tensor's size."""
        if self._host.rank == src and not scatter_list:
            raise ModelError(f"scatter: rank {src} is the source: it needs a scatter_list")
        if self._host.rank != src and scatter_list:
            raise ModelError(f"scatter: scatter_list is given on rank {self._host.rank}, not the "
                             f"source rank {src} (torch refuses it there)")
        return self._collective("scatter", list(scatter_list or ()), _listify(tensor), root=src,
                                **kw)

    def collective(self, kind: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor], *,
                   nbytes: int | None = None, dur: float | None = None, name: str | None = None,
                   handle: str | None = None, root: int | None = None) -> Work:
        """The collective of kind ``kind`` (a collective of ``streamsim.kinds.COLLECTIVE_KINDS``)
        reading ``inputs`` and writing ``outputs`` of this rank, as its named method does with
        them (``all_reduce(t)`` is ``collective("all_reduce", [t], [t])``); ``root``: a rooted
        one's global root rank. For code that has the op's kind as data (an op-log replay)."""
        return self._collective(kind, list(inputs), list(outputs), nbytes=nbytes, dur=dur,
                                name=name, handle=handle, root=root)

    def _collective(self, kind: str, inputs: list, outputs: list, *, nbytes: int | None = None,
                    dur: float | None = None, name: str | None = None,
                    handle: str | None = None, root: int | None = None) -> Work:
        return self._host._caller().collective(self.cfg, kind, inputs, outputs, nbytes, dur, name,
                                               handle, root)

    def send_object(self, nbytes: int | None, dst: int, *, name: str | None = None,
                    dur: float | None = None) -> None:
        """Gloo ``send_object``: the host blocks (rendezvous above the eager threshold).
        ``nbytes`` None: a size not known, sent as 0 bytes (the latency alone)."""
        self._need("gloo", "send_object")
        self._host._caller().send_object(self.cfg, nbytes or 0, dst, name, dur)

    def recv_object(self, src: int, *, name: str | None = None) -> None:
        """Gloo ``recv_object``: the host blocks until the matching object arrives."""
        self._need("gloo", "recv_object")
        self._host._caller().recv_object(self.cfg, src, name)

    def isend_object(self, nbytes: int | None, dst: int, *, name: str | None = None,
                     handle: str | None = None, dur: float | None = None) -> Work:
        """Gloo non-blocking object send; returns a gloo Work (its wait blocks the host).
        ``nbytes`` None: as for :meth:`send_object`."""
        self._need("gloo", "isend_object")
        return self._host._caller().isend_object(self.cfg, nbytes or 0, dst, name, handle, dur)


def _listify(t) -> list:
    return list(t) if isinstance(t, (list, tuple)) else [t]
