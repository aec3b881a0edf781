"""Point-to-point and collective communication on the engine's comm streams.

Matching (the k-th send from A to B in a group pairs with the k-th receive on B from A), eager and
rendezvous timing, collectives that end together, batches of point-to-point ops launched together
(``batch_isend_irecv``), and the notes for sends no receive matched. The :class:`Engine` inherits
these from :class:`CommMixin`; its stream loop calls ``_run_p2p``, ``_run_batch`` and
``_run_collective`` for comm ops.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..kinds import COLLECTIVE_KINDS, COMM_ROLES, OP_KINDS, kinds_where, stream_role
from ..trace import TRANSFER_START, Agent, Blocked, Note
from .errors import ModelError
from .groups import GroupConfig
from .memory import nbytes_of
from .records import Rec, StreamState

if TYPE_CHECKING:  # (annotations only: simpy is imported where an Engine is made)
    import simpy

P2P_KINDS = kinds_where(comm="p2p")  # run by the comm stream's p2p rules (matching, rendezvous)
P2P_SENDS = kinds_where(comm="p2p", direction="send")
# collectives whose bytes on the wire default to their inputs' size (the others: their outputs')
SIZED_BY_INPUTS = frozenset({"reduce_scatter", "all_to_all", "reduce"})
# rooted collectives whose bytes are the root's whole list: every rank's share times the ranks
# (gather: n inputs, scatter: n outputs), the same on every rank whether it holds the list or not
SIZED_BY_SHARE = {"gather": "inputs", "scatter": "outputs"}
_ROOT_FLOW = {k.name: k.root for k in OP_KINDS.values()}  # "to_root", "from_root" or None
# the collectives whose ranks must agree on the op and its root (a mismatch is an error; the
# version-1 collectives keep pairing by position alone, as they always did)
_MATCHED = frozenset(k for k, flow in _ROOT_FLOW.items() if flow is not None) | {"barrier"}


def wire_bytes(kind: str, inputs: list, outputs: list, ranks: int) -> int:
    """A collective's default bytes on the wire (its cost is the group's transfer time of them),
    from this rank's inputs and outputs (tensors) and the number of ranks: reduce_scatter,
    all_to_all and reduce move their inputs; gather ``ranks`` inputs and scatter ``ranks``
    outputs (the root's list, so that every rank costs it alike); barrier nothing (its latency
    alone); the others (all_reduce, all_gather, broadcast) their outputs, else their inputs."""
    if kind == "barrier":
        return 0
    if kind in SIZED_BY_SHARE:
        return ranks * nbytes_of(inputs if SIZED_BY_SHARE[kind] == "inputs" else outputs)
    return nbytes_of(inputs if kind in SIZED_BY_INPUTS else outputs or inputs)


def joined_members(rec: Rec, members: list[Rec]) -> list[int]:
    """The members of a collective whose start ``rec``'s end follows (its ``joins``): every
    other one, but for a rooted collective only what its data flow guarantees: into the root
    (``reduce``, ``gather``) the root's end follows every rank's start and a non-root's end
    nothing of the others (it may finish once its data left); out of the root (``scatter``)
    each non-root's end follows the root's start, and the root's end nothing of the others."""
    flow = _ROOT_FLOW.get(rec.kind)
    if flow is None:
        return [m.id for m in members if m is not rec]
    is_root = rec.agent.rank == rec.attrs["root"]
    if flow == "to_root":
        return [m.id for m in members if m is not rec] if is_root else []
    return [] if is_root else [m.id for m in members if m.agent.rank == rec.attrs["root"]]


class P2PMatch:
    """One matched (or half-matched) point-to-point transfer."""

    __slots__ = ("send", "recv", "recv_started", "arrived", "arrival")

    def __init__(self, env: simpy.Environment):
        self.send: Rec | None = None
        self.recv: Rec | None = None
        self.recv_started = env.event()
        self.arrived = env.event()
        self.arrival: float | None = None


class CollectiveMatch:
    __slots__ = ("members", "expected", "all_started", "end")

    def __init__(self, env: simpy.Environment, expected: int):
        self.members: list[Rec] = []
        self.expected = expected
        self.all_started = env.event()
        self.end = 0.0


class CommMixin:
    """The engine's comm side (see the module docstring). Its own state is the matching of
    point-to-point ops and collectives (:meth:`_init_comm`); of the Engine it uses only what is
    declared below, so that its interface to the engine is this list."""

    env: simpy.Environment  # the simulation's clock and events
    groups: dict[str, GroupConfig]  # the declared process groups
    hosts_of_rank: dict[int, list]  # rank -> its host threads (who a stalled receive waits for)
    matches: dict[int, object]  # comm op id -> its P2PMatch or CollectiveMatch, set at issue
    notes: list[Note]  # the trace's notes (sends no receive matched)
    done_event: Callable[[Rec], simpy.Event]  # fires when an op ends
    mark_start: Callable[[Rec, float], None]
    mark_end: Callable[[Rec, float], None]

    def _init_comm(self) -> None:
        """The comm side's own state: the matching tables (:meth:`p2p_entry`,
        :meth:`collective_entry`) and how many sends, receives and collectives each side issued."""
        self.p2p: dict[tuple, P2PMatch] = {}
        self.p2p_issued: dict[tuple, int] = {}
        self.collectives: dict[tuple, CollectiveMatch] = {}
        self.coll_issued: dict[tuple, int] = {}

    def _release_comm(self) -> None:
        """Drop the matching tables once the trace is built (see Engine._release)."""
        self._init_comm()

    def comm_streams(self, rank: int) -> list[str]:
        """The comm streams of ``rank``'s declared groups: ``nccl:<group>`` of each NCCL group
        holding it, with ``p2p_streams="per_pair"`` its pair streams, ``gloo:<group>`` of each
        gloo group (its collectives' and ``isend_object`` channel) and its tensor point-to-point
        channels ``gloo:<group>:to<peer>``/``from<peer>``."""
        out = []
        for g in self.groups.values():
            if rank in g.ranks:
                out.append(f"{g.backend}:{g.name}")
                if g.backend == "gloo":
                    out += [f"gloo:{g.name}:{way}{q}" for q in g.ranks if q != rank
                            for way in ("to", "from")]
                elif g.p2p_streams == "per_pair":
                    out += [g.p2p_stream(rank, q) for q in g.ranks if q != rank]
        return out

    def checked_stream(self, rank: int, name: str) -> str:
        """``name``, refused when it starts with ``nccl:``/``gloo:`` but is no comm stream of
        ``rank``'s groups: a typo there silently made a new, empty stream (a ``record_stream``
        on it then ordered nothing, and metrics counted it as comm)."""
        if stream_role(name) in COMM_ROLES and name not in self.comm_streams(rank):
            known = ", ".join(self.comm_streams(rank)) or "none: no declared group holds it"
            raise ModelError(f"stream {name!r}: no comm stream of rank {rank} has this name (its "
                             f"comm streams: {known}); a name starting with nccl: or gloo: is a "
                             "process group's: get it with host.group(NAME).comm_stream(peer)")
        return name

    def p2p_entry(self, group: str, src: int, dst: int, is_send: bool) -> P2PMatch:
        """The k-th send src→dst pairs with the k-th receive on dst from src (per group)."""
        side = (group, src, dst, is_send)
        k = self.p2p_issued.get(side, 0)
        self.p2p_issued[side] = k + 1
        key = (group, src, dst, k)
        m = self.p2p.get(key)
        if m is None:
            m = self.p2p[key] = P2PMatch(self.env)
        return m

    def _run_p2p(self, s: StreamState, rec: Rec):
        env = self.env
        m: P2PMatch = self.matches.pop(rec.id)
        cfg = self.groups[rec.attrs["group"]]
        dur = rec.dur
        self.mark_start(rec, env.now)
        if rec.kind in P2P_SENDS:
            # gloo's tensor send is always a rendezvous: its pair writes into the buffer the
            # receiver posted, so a 4-byte send/send cross deadlocks as it does under gloo
            rendezvous = rec.attrs["nbytes"] > cfg.eager_bytes or (
                rec.kind == "isend" and cfg.backend == "gloo")
            if rendezvous and not m.recv_started.triggered:
                s.blocked = lambda: Blocked(s.agent, rec.id, f"rendezvous {_with_peer(rec, 'to')}"
                                            " waits for the matching receive",
                                            self._peer_agents(m.recv, rec.attrs["peer"]))
                yield m.recv_started
                s.blocked = None
                _transfer_from(rec, env.now)
            if dur > 0:
                yield env.timeout(dur)
            self.mark_end(rec, env.now)
            m.arrival = env.now
            m.arrived.succeed()
        else:
            m.recv_started.succeed()
            if not m.arrived.triggered:
                s.blocked = lambda: Blocked(s.agent, rec.id, f"{_with_peer(rec, 'from')} waits "
                                            "for the matching send's data",
                                            self._peer_agents(m.send, rec.attrs["peer"]))
                yield m.arrived
                s.blocked = None
            rec.joins = [m.send.id]
            _transfer_from(rec, m.send.attrs.get(TRANSFER_START, m.send.start))
            self.mark_end(rec, env.now)

    def _run_batch(self, s: StreamState, first: Rec):
        """The ops of one ``batch_isend_irecv`` (queued back to back on the group's stream, the
        first already taken off the queue) start together, as one NCCL group does once it is
        closed: when the last of them was enqueued and what each waits for is done. Each runs as
        an unbatched op would (:meth:`_run_p2p`), so a batch holding a send and a receive with
        the same peer cannot rendezvous-deadlock; the stream goes on when all of them ended."""
        env = self.env
        members = [first]
        q = s.queue
        while len(members) < first.attrs["batch_size"]:
            if not q:  # (every member is enqueued by the one batch call that enqueued the first)
                s.wake = env.event()
                yield s.wake
                continue
            rec = q.popleft()
            if rec.attrs.get("batch") != first.attrs["batch"]:
                raise ModelError(f"{rec.name} was enqueued on {s.agent} inside batch "
                                 f"{first.attrs['batch']} ({first.name}): another host thread "
                                 "used the stream while the batch was being issued")
            members.append(rec)
        latest = max(r.enqueued for r in members)
        if latest > env.now:
            yield env.timeout(latest - env.now)
        for rec in members[1:]:  # (the loop already waited for the first's)
            for dep in rec.after:
                if not dep.done:
                    s.blocked = lambda rec=rec, dep=dep: Blocked(
                        s.agent, rec.id, f"{rec.name} waits for {dep.name} on {dep.agent}",
                        (dep.agent,))
                    yield self.done_event(dep)
                    s.blocked = None
        lanes = [_Lane(s.agent) for _ in members]
        s.blocked = lambda: next((ln.blocked() if callable(ln.blocked) else ln.blocked
                                  for ln in lanes if ln.blocked is not None),
                                 Blocked(s.agent, first.id, f"batch of {first.name}", ()))
        yield env.all_of([env.process(self._run_p2p(ln, rec))
                          for ln, rec in zip(lanes, members)])
        s.blocked = None

    def _peer_agents(self, peer_rec: Rec | None, peer_rank: int) -> tuple[Agent, ...]:
        if peer_rec is not None:
            return (peer_rec.agent,)
        return tuple(h.agent for h in self.hosts_of_rank.get(peer_rank, ()) if not h.finished)

    def _not_joined(self, group: str, c: CollectiveMatch) -> tuple[Agent, ...]:
        """The host threads of the group's ranks that have not joined collective ``c``."""
        started = {m.agent.rank for m in c.members}
        return tuple(h.agent for r in sorted(set(self.groups[group].ranks) - started)
                     for h in self.hosts_of_rank.get(r, ()))

    def collective_entry(self, group: str, rank: int, size: int) -> CollectiveMatch:
        k = self.coll_issued.get((group, rank), 0)
        self.coll_issued[(group, rank)] = k + 1
        c = self.collectives.get((group, k))
        if c is None:
            c = self.collectives[(group, k)] = CollectiveMatch(self.env, size)
        return c

    def _run_collective(self, s: StreamState, rec: Rec):
        env = self.env
        c: CollectiveMatch = self.matches.pop(rec.id)
        self.mark_start(rec, env.now)
        first = c.members[0] if c.members else None
        if first is not None and (first.kind in _MATCHED or rec.kind in _MATCHED) and (
                first.kind, first.attrs.get("root")) != (rec.kind, rec.attrs.get("root")):
            raise ModelError(
                f"{rec.name} on rank{rec.agent.rank} ({rec.kind}{_root(rec)}) and {first.name} on "
                f"rank{first.agent.rank} ({first.kind}{_root(first)}) are the same collective of "
                f"group {rec.attrs['group']!r} (its k-th on each rank): every rank must issue the "
                "same op with the same root")
        c.members.append(rec)
        if len(c.members) == c.expected:
            c.end = env.now + max(m.dur for m in c.members)
            c.all_started.succeed()
        else:  # (who it waits for is worked out only if the run stalls: a scan of the group)
            s.blocked = lambda rec=rec, c=c: Blocked(
                s.agent, rec.id, f"{rec.name} waits for every rank of group "
                f"{rec.attrs['group']!r} to join", self._not_joined(rec.attrs["group"], c))
            yield c.all_started
            s.blocked = None
            _transfer_from(rec, env.now)
        if c.end > env.now:
            yield env.timeout(c.end - env.now)
        rec.joins = joined_members(rec, c.members)
        self.mark_end(rec, env.now)

    def unmatched_notes(self) -> None:
        for (group, src, dst, k), m in sorted(self.p2p.items(), key=lambda kv: kv[0][:3] + (kv[0][3],)):
            if m.send is not None and m.recv is None:
                self.notes.append(Note("unmatched-send", f"send #{k} from rank{src} to rank{dst} "
                                       f"on group {group!r} ({m.send.name}) has no matching "
                                       "receive", m.send.id))


def _root(rec: Rec) -> str:
    return f", root rank{rec.attrs['root']}" if "root" in rec.attrs else ""


def _transfer_from(rec: Rec, t: float) -> None:
    """Note that ``rec`` waited for its peers and transferred only from ``t`` (see
    :data:`streamsim.trace.TRANSFER_START`)."""
    if t > rec.start:
        rec.attrs[TRANSFER_START] = float(t)


def batch_issue_order(kinds: list[str]) -> list[int]:
    """The order in which a ``batch_isend_irecv`` issues its ops (indices into ``kinds``, each
    ``"isend"`` or ``"irecv"``): sends first, each kind in list order (the op-log replay tags its
    lines in this order too)."""
    return sorted(range(len(kinds)), key=lambda i: kinds[i] != "isend")


def _with_peer(rec: Rec, way: str) -> str:
    """``irecv(x) from rank1`` / ``isend(x) to rank1``: the op's name with its peer (``way`` is
    ``"from"`` or ``"to"``), unless the name already says it."""
    peer = f"{way} rank{rec.attrs['peer']}"
    return rec.name if rec.name.endswith(peer) else f"{rec.name} {peer}"


class _Lane:
    """What :meth:`CommMixin._run_p2p` needs of a stream (its agent, where it says what blocks
    it), one per op of a batch: the ops run at once, each may block on its own peer."""

    __slots__ = ("agent", "blocked")

    def __init__(self, agent: Agent):
        self.agent, self.blocked = agent, None
