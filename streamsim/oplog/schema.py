"""What an op log may say: its ops, fields and limits, and the records a parsed log is made of.

The format itself is documented for users in docs/oplog.md; :mod:`.read` checks a log
against these tables and builds :class:`OpLog`.

``isend`` and ``irecv`` take an optional ``p2p_streams`` field, ``"per_group"`` or ``"per_pair"``:
the NCCL stream the group's point-to-point ops run on (``Simulation.group(..., p2p_streams=)``).
``per_group`` (what a log without the field means, as every version-1 log did): the group's
own stream ``nccl:<group>``, FIFO with its collectives and all its other p2p ops. ``per_pair``:
one stream per unordered pair of ranks, ``nccl:<group>:<low>-<high>``. It is a property of the
group: every line that gives it must give the same value (else an error naming both lines), and
lines of the group that leave it out follow it. The writer puts it on every ``isend``/``irecv``
line of a ``per_pair`` group (so any subset of the lines, such as a shrunk log, still says it) and
on no line of a ``per_group`` one (so version-1 logs are written exactly as before).

``isend`` and ``irecv`` also take an optional ``batch`` (a non-negative integer): consecutive lines
of one host thread with the same ``batch`` are one ``batch_isend_irecv``, on the group's own
stream (whatever ``p2p_streams`` says), started together; a ``wait`` on any of their handles waits
for all of them. A batch's lines name one group and one (current) stream; another line of the
thread ends the batch, and its id may not be used again by that thread.
"""
from __future__ import annotations

import json
from dataclasses import InitVar, dataclass, field
from collections.abc import Sequence
from typing import Any

from ..kinds import COMMON_FIELDS, GLOO_KINDS, HANDLE_KINDS, NCCL_KINDS, OP_KINDS
from ..sim.groups import P2P_STREAMS
from ..sim.memory import Ref

COMMON = COMMON_FIELDS
# op -> its own optional fields (beyond COMMON); REQUIRED lists those that must be present: both from
# the vocabulary (streamsim.kinds), in its order (the "unknown op" message lists FIELDS).
FIELDS: dict[str, tuple[str, ...]] = {k.name: k.fields for k in OP_KINDS.values()}
REQUIRED: dict[str, tuple[str, ...]] = {k.name: k.required for k in OP_KINDS.values() if k.required}
# Declarations (op log v2): lines that describe the cost model, not ops. Each field is optional.
DECLARATIONS: dict[str, tuple[str, ...]] = {
    "group": ("op", "group", "backend", "ranks", "latency", "bandwidth", "eager_bytes",
              "blocking_wait", "p2p_streams"),
    "config": ("op", "launch_overhead"),
}
NCCL_OPS = NCCL_KINDS
GLOO_OPS = GLOO_KINDS
HANDLE_OPS = HANDLE_KINDS
DEFAULT_GROUP = {**{k: "pp" for k in NCCL_OPS}, **{k: "cpu" for k in GLOO_OPS}}
# A wait a recorder inferred, not saw (``"inferred": "completion"``: the op was seen completed,
# its wait ran in C++), and a receive from any source: their default names, which every report,
# picture and trace shows where it shows the op
# op sets of the reader's fast path (fastpath, and the compiled reader it binds) and of build
COLLECTIVE_OPS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                            "broadcast"})  # (the fast path's: no root, no ranks list)
ROOTED_OPS = frozenset({"reduce", "gather", "scatter", "barrier"})  # (the fast path's: no ranks
# list; a barrier has no root nor tensor, but its line is read by the same rule)
EVENT_OPS = frozenset({"record", "wait_event", "sync_event"})
BUFFER_OPS = frozenset({"alloc", "free", "record_stream"})  # (their ``buffer``: a life's)
INFERRED_BY = ("completion",)
INFERRED_NAME = "wait (inferred: seen completed, waited in C++)"
ANY_SOURCE_NAME = "irecv (from any source)"
DEFAULT_SIZE = 1  # bytes of a buffer whose size nothing in the log names
MAX_RANK = 2**31 - 1  # ranks and peers (torch.distributed ranks are C ints)
MAX_BYTES = 2**63 - 1  # nbytes and offsets (tensor sizes are int64)
MAX_DIMS = 64  # dims of a strided ref (PyTorch's own limit on a tensor's dims is 64 too)
MAX_DUR = 1e15  # microseconds (31 years): anything above is a unit mistake, and a huge integer
# cannot even be converted to a float
LIMITS = {"rank": MAX_RANK, "peer": MAX_RANK, "root": MAX_RANK, "nbytes": MAX_BYTES, "offset": MAX_BYTES,
          "step": 2**63 - 1, "batch": 2**63 - 1, "eager_bytes": 2**63 - 1}


def shown_number(v: int | float) -> str:
    """A number for a message: as written, unless it is an integer too long to print in full."""
    return f"an integer of {v.bit_length()} bits" if isinstance(v, int) and \
        v.bit_length() > 128 else str(v)


def shown_window(w: Any) -> str:
    """A window as written (JSON), huge integers shortened as by :func:`shown_number`."""
    if not isinstance(w, list):
        return json.dumps(w)
    return "[" + ", ".join(shown_number(x) if isinstance(x, int) and not isinstance(x, bool) else
                           json.dumps(x) for x in w) + "]"


# The fields few lines set, kept together in one tuple a line (``Line.rare``), in this order, with
# these defaults: each was a slot of every line, 8 bytes a line for each, most of them None
RARE_FIELDS = ("ranks", "blocking", "batch", "label", "channel", "root", "any_source", "inferred")
RARE_DEFAULTS = (None, False, None, None, None, None, False, None)


@dataclass(slots=True)
class Line:
    """One op of the log, validated and resolved (buffer refs are concrete :class:`Ref` views);
    read-only by convention (not frozen: building a frozen dataclass costs a call per field).

    ``reads``/``writes`` hold a kernel's or host work's refs, a send's tensors (``reads``), a
    receive's (``writes``), a collective's inputs and outputs. ``target`` is, for ``wait`` and
    ``query``, the line number of the op whose handle they name. For ``alloc``, ``free`` and
    ``record_stream``, ``nbytes`` is the size of the buffer's life (given by its alloc, else the
    largest extent any ref names), and a ``free``'s ``stream`` is the allocation stream.
    ``path`` is the log's (one string for all its lines): a line's :attr:`location` is made from
    it when read, not kept (a string a line, ~75 bytes, made and freed for every line read).

    The fields of :data:`RARE_FIELDS` (a collective's ``ranks``, a wait's ``blocking`` and
    ``inferred``, a send's or receive's ``batch`` and ``any_source``, an alloc's ``label``, a
    hand-off's ``channel``, a rooted collective's ``root``) are given and read as the others
    are, but kept in one tuple, ``rare`` (None where all of them are their defaults,
    :data:`RARE_DEFAULTS`; equal tuples one object where the reader makes them): 8 slots fewer,
    a line of 208 bytes where it was 272. They are ``InitVar`` fields, read by properties, so
    that ``Line(...)`` and ``dataclasses.replace`` take them as before.
    """

    lineno: int
    op: str
    path: str
    rank: int = 0
    host: str = "main"
    stream: str = "compute"
    name: str = ""
    dur: float | None = 1.0  # None: a declared group's comm op, timed by its cost model
    step: int | None = None  # the iteration the op belongs to (step metrics); None: no step
    reads: tuple[Ref, ...] = ()
    writes: tuple[Ref, ...] = ()
    event: str | None = None
    peer: int | None = None
    group: str | None = None
    ranks: InitVar[tuple[int, ...] | None] = None
    handle: str | None = None
    nbytes: int | None = None
    blocking: InitVar[bool] = False
    buffer: str | None = None
    target: int | None = None
    batch: InitVar[int | None] = None  # isend/irecv of one batch_isend_irecv: the batch's id
    site: str | None = None  # the user code the line comes from (a recorder's "file:line function")
    t: float | None = None  # when the program issued it (µs from the run's start): not earlier
    result: bool | None = None  # a query's observed is_completed(); None: simulated
    label: InitVar[str | None] = None  # an alloc's: the name the program gave the tensor (rootcause)
    channel: InitVar[str | None] = None  # a put's or get's channel (a hand-off between threads)
    root: InitVar[int | None] = None  # a rooted collective's root rank (reduce, gather, scatter)
    any_source: InitVar[bool] = False  # an irecv from any source: ``peer`` is the source observed
    inferred: InitVar[str | None] = None  # a wait's provenance: "completion" (inferred, not seen)
    rare: tuple | None = field(default=None, init=False)  # RARE_FIELDS' values; None: defaults

    def __post_init__(self, ranks, blocking, batch, label, channel, root, any_source, inferred
                      ) -> None:
        rare = (ranks, blocking, batch, label, channel, root, any_source, inferred)
        self.rare = None if rare == RARE_DEFAULTS else rare

    @property
    def location(self) -> str:
        """``FILE:LINE``, where the line is: what its ops' ``location`` and messages name."""
        return f"{self.path}:{self.lineno}"


def _rare_field(i: int, default: Any) -> property:
    """The property that reads item ``i`` of a line's ``rare`` tuple (``default`` without one)."""
    def get(self: Line) -> Any:
        rare = self.rare
        return default if rare is None else rare[i]
    get.__name__ = RARE_FIELDS[i]
    return property(get, doc=f"A line's {RARE_FIELDS[i]!r} (kept in ``rare``).")


for _i, (_name, _default) in enumerate(zip(RARE_FIELDS, RARE_DEFAULTS)):
    setattr(Line, _name, _rare_field(_i, _default))  # (in place of the InitVars' defaults)


# every field a line is made of, in order, RARE_FIELDS among them (what a kind's replay call
# may name): its slots but ``rare``, and its InitVars
LINE_FIELDS = tuple(f for f in Line.__dataclass_fields__ if f != "rare")


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A process group the log uses: backend from its declaration or its ops, ranks = declared,
    users, peers and ``ranks`` lists, ``p2p_streams`` from its declaration or its
    ``isend``/``irecv`` lines (``per_group`` if none says); the cost settings of a ``group``
    declaration (None: the engine's default for the backend)."""

    name: str
    backend: str  # "nccl" or "gloo"
    ranks: tuple[int, ...]
    p2p_streams: str = "per_group"  # one of P2P_STREAMS
    latency: float | None = None
    bandwidth: float | None = None
    eager_bytes: int | None = None
    blocking_wait: bool = False
    declared: bool = False  # a `group` line declared it: its comm ops' dur defaults to the cost


@dataclass(frozen=True)
class OpLog:
    """A parsed op log: its lines in file order, host threads in order of appearance, groups,
    and the launch overhead a ``config`` declaration gives (µs a stream op costs its host).

    ``lines`` is a read-only sequence of :class:`Line`: a tuple, or where the compiled reader
    read the log, its rows (``streamsim.native._lines.Rows``: 96 bytes a line, a ``Line`` made
    each time one is read, equal to the one the pure-Python reader makes, not the same object)."""

    path: str
    lines: Sequence[Line]  # a tuple; the compiled reader's rows (streamsim/native/_lines.pyx)
    threads: tuple[tuple[int, str], ...]
    groups: dict[str, GroupSpec] = field(default_factory=dict)
    launch_overhead: float = 0.0

    def __len__(self) -> int:
        return len(self.lines)

    def thread_lines(self, rank: int, host: str) -> list[Line]:
        return [ln for ln in self.lines if ln.rank == rank and ln.host == host]
