"""The trace: every op the engine ran, with its agent, timing, accesses and sync edges.

The trace is the hinge of streamsim's pipeline: the engine writes it, the analyses and renderers read
it and nothing else. Records are frozen dataclasses so that a stage cannot alter what another sees.

Ordering is carried by three fields of an :class:`Op` (see docs/semantics.md):

* ``issuer``: the host action that enqueued a stream op (the *enqueue* edge);
* ``after``: ops that end before this op starts (events, NCCL enqueue, handle waits, host syncs,
  ``is_completed()`` observed True, ``record_stream`` on free); an op a stall left waiting keeps the
  ops it still waited for in ``attrs["waiting_for"]`` instead (see :func:`waited_on`);
* ``joins``: ops whose start happens before this op's *end* (message and collective edges: the
  sender's read is ordered before everything that follows the receive, not before the receive
  itself).

Program order (consecutive ops of one agent) is implicit in ``Op.index``. ``start_seq``/``end_seq``
place the op's start and end in one global sequence that is a linear extension of happens-before
(the engine's own execution order, which follows simulated time); :func:`issue_keys` gives the
order of issue, which the analysis follows instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from .kinds import HOST_ROLE, COMM_ROLES, GLOO_ROLE, stream_role
from .strided import Strided, overlap

HOST = "host"
STREAM = "stream"

READ = "read"
WRITE = "write"


@dataclass(frozen=True, slots=True, order=True)
class Agent:
    """Something that runs ops one at a time: a host thread or a stream of one rank."""

    rank: int
    kind: str  # HOST or STREAM
    name: str  # "main", "compute", "nccl:pp", "gloo:cpu"

    @property
    def role(self) -> str:
        """``host``, ``stream``, ``nccl`` (a process group's comm stream) or ``gloo`` (a gloo
        group's channel): see :mod:`streamsim.kinds`."""
        return HOST_ROLE if self.kind == HOST else stream_role(self.name)

    @property
    def is_comm(self) -> bool:
        """A process group's comm stream or channel (NCCL or gloo), not a stream of the model's."""
        return self.kind != HOST and stream_role(self.name) in COMM_ROLES

    @property
    def is_gloo(self) -> bool:
        """A gloo group's channel: its ops block the host, and its handles' waits too."""
        return self.kind != HOST and stream_role(self.name) == GLOO_ROLE

    def __str__(self) -> str:
        return f"rank{self.rank}/{self.name}"


@dataclass(frozen=True, slots=True)
class View:
    """Bytes ``[offset, offset + nbytes)`` of the storage ``buffer`` on ``rank``; with a
    ``pattern`` (a strided view, :mod:`streamsim.strided`), only the bytes of that pattern within
    that range, its hull."""

    rank: int
    buffer: str
    offset: int
    nbytes: int
    pattern: Strided | None = None

    @property
    def end(self) -> int:
        return self.offset + self.nbytes

    def overlaps(self, other: "View") -> bool:
        """Do the two views share a byte (exactly, for strided views too)?"""
        if self.rank != other.rank or self.buffer != other.buffer:
            return False
        if self.pattern is None and other.pattern is None:
            return self.offset < other.end and other.offset < self.end
        return overlap(self.offset, self.nbytes, self.pattern, other.offset, other.nbytes,
                       other.pattern)

    def __str__(self) -> str:
        pat = "" if self.pattern is None else f" strided {self.pattern.text()}"
        return f"rank{self.rank}:{self.buffer}[{self.offset}:{self.end}{pat}]"


@dataclass(frozen=True, slots=True)
class Access:
    """One read or write of a view by an op, during ``window`` (fractions of the op's duration)."""

    view: View
    mode: str  # READ or WRITE
    window: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True, slots=True)
class Op:
    """One op as it ran: a host action, a kernel, a comm op, an event record, a wait, ..."""

    id: int
    agent: Agent
    index: int  # position in its agent's program order (0-based)
    kind: str  # an op kind of streamsim.kinds.OP_KINDS: launch, host, record, wait_event, ...
    name: str
    enqueued: float  # when the host issued it (host actions: their start)
    start: float
    end: float
    start_seq: int
    end_seq: int
    accesses: tuple[Access, ...] = ()  # reads first, then writes (as the engine lists them: the
    # analysis checks an in-place op's read against the previous write before its own write)
    issuer: int | None = None
    after: tuple[int, ...] = ()
    joins: tuple[int, ...] = ()
    location: str = ""  # "models/x.py:42" or "log.jsonl:7"
    step: int | None = None
    line: int | None = None  # op-log line, when the input was an op log
    handle: str | None = None  # the Work handle name of an async op
    attrs: Mapping[str, object] = field(default_factory=dict)  # read-only, as the op: ops with
    # equal attrs may share one dict (the compiled replay shares the common ones: memory)

    @property
    def duration(self) -> float:
        return self.end - self.start

    def window_time(self, access: Access) -> tuple[float, float]:
        """Simulated interval during which ``access`` touches memory."""
        d = self.end - self.start
        return (self.start + access.window[0] * d, self.start + access.window[1] * d)

    @property
    def microbatch(self) -> int | None:
        """The micro-batch label of the op (``host.microbatch`` in a model), if it has one: kept in
        ``attrs`` so that runs without it carry nothing."""
        return self.attrs.get("microbatch")

    def when(self, short: bool = False) -> str:
        """The op's labels: ``step 3``, ``step 3 micro-batch 1``, ``micro-batch 1`` or ``""``;
        ``short`` (pictures): ``s3``, ``s3 mb1``, ``mb1``."""
        parts = []
        if self.step is not None:
            parts.append(f"s{self.step}" if short else f"step {self.step}")
        m = self.attrs.get("microbatch")
        if m is not None:
            parts.append(f"mb{m}" if short else f"micro-batch {m}")
        return " ".join(parts)

    def describe(self) -> str:
        where = f" at {self.location}" if self.location else ""
        when = self.when()
        return f"{self.name} on {self.agent}{' ' + when if when else ''}{where}"


@dataclass(frozen=True, slots=True)
class Blocked:
    """An agent that could not make progress when the simulation stalled."""

    agent: Agent
    op: int | None  # the op it is blocked in (or waiting to start)
    reason: str  # human text: "rendezvous send to rank1 (waits for its matching recv)"
    waits_for: tuple[Agent, ...] = ()  # agents whose progress would unblock it


@dataclass(frozen=True, slots=True)
class Stall:
    """The simulation stopped with agents still blocked and no event left that could unblock them."""

    time: float
    blocked: tuple[Blocked, ...]


@dataclass(frozen=True, slots=True)
class Note:
    """A non-fatal observation made while simulating (e.g. waiting an event never recorded)."""

    kind: str  # "event-never-recorded", "handle-never-waited", "unmatched-send", ...
    message: str
    op: int | None = None


@dataclass(frozen=True, slots=True)
class Alloc:
    """A model's ``host.buffer(name, nbytes)``: a storage of ``nbytes`` came to life on ``rank`` at
    simulated ``time`` (its host thread's clock), after the first ``issued`` ops were issued (ops
    with a smaller id). Allocation is host bookkeeping, not an op: it orders nothing (an op log's
    ``alloc`` line is a host op of kind ``alloc`` instead). ``buffer`` is the storage's name,
    ``label`` the name the model gave (``""``: the same), ``site`` the model's ``file:line`` that
    allocated it (root causes group by it); ``host`` the host thread that allocated it and
    ``stream`` its allocation stream (what ``dump_oplog`` writes on its ``alloc`` line)."""

    rank: int
    buffer: str
    nbytes: int
    time: float
    issued: int = 0
    site: str = ""
    label: str = ""
    host: str = "main"
    stream: str = "compute"


@dataclass(frozen=True, slots=True)
class Trace:
    """Everything one simulation produced, enough for every analysis and renderer."""

    ops: tuple[Op, ...]
    agents: tuple[Agent, ...]
    stall: Stall | None = None
    notes: tuple[Note, ...] = ()
    end_time: float = 0.0
    source: str = ""  # model path or op-log path
    meta: Mapping[str, object] = field(default_factory=dict)
    allocations: tuple[Alloc, ...] = ()  # a model's buffers, in the order they were allocated

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:
        """``<Trace 269,000 ops, 40 agents>`` (``, stalled`` when it ended in a stall): the
        dataclass repr would print every op."""
        return (f"<Trace {len(self.ops):,} op{'s' * (len(self.ops) != 1)}, {len(self.agents)} "
                f"agent{'s' * (len(self.agents) != 1)}{', stalled' if self.stall else ''}>")

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def op(self, op_id: int) -> Op:
        op = self.ops[op_id]
        assert op.id == op_id, "trace ops must be stored by id"
        return op

    def ops_by_id(self, ids: Sequence[int]) -> Sequence[Op] | Mapping[int, Op]:
        """The ops of ``ids``, indexed by id (a sequence or mapping that may hold others too):
        here all of them (``ops``: ids are positions); a trace whose ops are made when first
        read (``oplog.leanrun.LeanTrace``) makes these alone (a report's table of the ops it
        names), and gives every op it made alone so far."""
        return self.ops

    def ops_of_hazards(self, hazards: Sequence[Any]) -> Sequence[Op] | Mapping[int, Op]:
        """The ops ``hazards`` name (each one's first and second), indexed by id: here all the
        ops; a trace whose ops are made when first read (``oplog.leanrun.LeanTrace``) makes
        those, in one block (what a fix proposer and the root causes read)."""
        return self.ops

    def ops_of_kind(self, kind: str) -> list[Op]:
        """The ops of ``kind``, in id order (a trace whose ops are made when first read,
        ``oplog.leanrun.LeanTrace``, makes these alone)."""
        return [op for op in self.ops if op.kind == kind]

    def in_hb_order(self) -> Iterator[tuple[Op, bool]]:
        """Yield ``(op, is_start)`` in global sequence order: a linear extension of happens-before."""
        slots: list[tuple[Op, bool] | None] = [None] * (2 * len(self.ops))
        for op in self.ops:
            slots[op.start_seq] = (op, True)
            slots[op.end_seq] = (op, False)
        for s in slots:
            if s is not None:
                yield s


# ``attrs`` key of a comm op that waited for its peers before moving data (a rendezvous send
# before its receive was posted, a receive posted before the data left, a collective before its
# last rank joined): when the transfer began. Absent when that was the op's start.
TRANSFER_START = "transfer_start"


def transfer_start(op: Op) -> float:
    """When ``op`` began to do its work: a comm op's :data:`TRANSFER_START`, else its start."""
    return op.attrs.get(TRANSFER_START, op.start)


def waited_on(op: Op) -> tuple[int, ...]:
    """The ops ``op`` waited for: its ``after`` edges, and the waits a stall left unsatisfied
    (``attrs["waiting_for"]``: those ops never ended, so they order nothing; on a host action, the
    waits of the stream op it enqueued, which a stall kept from starting and the trace leaves out)."""
    pending = op.attrs.get("waiting_for")
    return op.after + tuple(pending) if pending else op.after


def issue_point(op: Op) -> int:
    """The host action that issued ``op`` (``op`` itself for a host action or an op with no issuer)."""
    return op.id if op.agent.kind == HOST or op.issuer is None else op.issuer


def issue_keys(trace: Trace) -> list[int]:
    """Each op's priority in *issue order* (smaller first; ties go to the smaller op id).

    The analysis takes ops by key, each right after the predecessors it still needs (pulled in
    depth first, smallest key first; see ``analysis.hb``): so every op goes at its place of issue,
    and what it must wait for (a receive's completion needs its matched send) comes forward to meet
    it. The keys:

    * an op log (its ops carry ``line``): the line of the host action that issued the op, the host
      action before the stream op it enqueued; an action a fix inserted (no line) goes right after
      the previous line of its thread;
    * a model: the threads' actions taken round-robin by program position (the k-th action of every
      host thread, in agent order, before the (k+1)-th of any), a stream op right after its host
      action. The engine's own interleaving of threads follows simulated time, which must not decide
      what is reported;
    * a trace whose stream ops do not name the host action that issued them (built by hand): op ids.
    """
    ops = trace.ops
    n = len(ops)
    keys = [0] * n
    host_ops: list[Op] = []
    stream_ops: list[Op] = []
    for op in ops:
        (host_ops if op.agent.kind == HOST else stream_ops).append(op)
    # Threads are told apart by equality, but looked up per op by identity (ops share their Agent
    # objects; hashing the Agent dataclass per op was most of this function's time).
    distinct = {id(op.agent): op.agent for op in host_ops}
    index_of = {ag: i for i, ag in enumerate(sorted(set(distinct.values())))}
    thread = {i: index_of[ag] for i, ag in distinct.items()}
    if any(op.line is not None for op in host_ops):
        last = [0] * len(index_of)
        for op in host_ops:  # (ids follow each thread's program order)
            t = thread[id(op.agent)]
            if op.line is not None:
                keys[op.id] = op.line * 4
                last[t] = op.line
            else:
                keys[op.id] = last[t] * 4 + 2
    elif all(op.issuer is not None for op in stream_ops):
        width = 2 * max(1, len(index_of))
        for op in host_ops:
            keys[op.id] = op.index * width + 2 * thread[id(op.agent)]
    else:
        return list(range(n))
    for op in stream_ops:
        r = op.issuer
        keys[op.id] = keys[r] + 1 if r is not None else (op.line or 0) * 4 + 1
    return keys


def trace_from_ops(ops: list[dict], **kw) -> Trace:
    """Build a trace by hand (for tests): each dict holds Op fields except id, index and seqs
    (accesses are put in Op's order: reads first).

    Each op starts and ends before the next one starts, so ``issuer``, ``after`` and ``joins`` must
    name earlier ops (enough for hand-written examples; the engine records real overlapping orders):
    anything else is a ValueError, not a silently different trace (-1 would name the last op).
    """
    agents: dict[Agent, int] = {}
    built: list[Op] = []
    seq = 0
    for i, spec in enumerate(ops):
        for key in ("after", "joins", "issuer"):
            named = spec.get(key)
            for r in (() if named is None else (named,) if key == "issuer" else named):
                if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < i:
                    raise ValueError(f"op {i} ({spec.get('name', '?')}): {key} names {r!r}, "
                                     f"which is not an earlier op (0 to {i - 1})")
        agent = spec["agent"]
        idx = agents.get(agent, 0)
        agents[agent] = idx + 1
        fields = dict(enqueued=spec.get("start", 0.0), start=0.0, end=0.0)
        fields.update(spec)
        fields["accesses"] = tuple(sorted(fields.get("accesses", ()), key=lambda acc: acc.mode != READ))
        built.append(Op(id=i, index=idx, start_seq=seq, end_seq=seq + 1, **fields))
        seq += 2
    return Trace(ops=tuple(built), agents=tuple(sorted(agents)), **kw)
