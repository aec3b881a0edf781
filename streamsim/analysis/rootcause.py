"""Root causes: hazard instances grouped by the two lines of code that race, with one fix for both.

A model's loop repeats one missing edge at every step and rank; a reviewer fixes it once, in the
code. Instances that share their kind, the buffer and the *sites* of both accesses are one root
cause. A site is where the op comes from in the user's code:

* in a model: the op's label and the ``file:line`` the model issued it from, the label being its
  name without the peer a comm op's default name carries (``isend(hidden) to rank1`` and
  ``... to rank2`` are one site);
* in an op log: the op's ``name`` and the line's ``site`` when it gives one (a recorder's user
  code line, ``file:line function``: every line of that name and site is one site); else the
  ``name`` when the line gives one (then every line of that name is one site), else the line itself.

A buffer whose ``alloc`` line gives a ``site`` (a recorded program's tensor) is grouped by that
allocation site, not by its name: a recorder names each storage it sees anew, so one missing wait
on a tensor made at one line in every step would otherwise be a root cause per step. A model's
buffer is grouped by the model line whose ``host.buffer`` made the life its second access touches
(``Trace.allocations``), for the same reason: each ``host.buffer`` is a tensor of its own, named
as the model likes (issue 27).

A hazard that the fix of an earlier hazard of the same kind and buffer orders too (the same
unwaited send or receive first, a later consumer that the wait placed before the earlier
consumer also comes after) is an instance of that root cause, whatever its own second site: a
received input read by a stage's forward and again by its backward is one missing wait, one root
cause, fixed by one wait before the forward. Once an instance shows it, every instance of the
later pair of sites goes with it (the code-level fix is the same line in every step; and where
the pass processes a receive after its readers, it names only the latest unordered read of each
agent, so an instance may lack its earlier pair).

Each root cause states one code-level fix, phrased from its instances' fixes (the sync to add, and
at which site); what it costs is measured by re-simulating (``pipeline.fixcost``).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

from .. import native
from ..trace import HOST, Op, Trace
from .findings import Fix, Hazard
from .fixes import no_fix_reason

_PEER = re.compile(r" (?:to|from) rank\d+$")


@dataclass(frozen=True, slots=True, order=True)
class Site:
    """Where an op comes from: its ``label`` and, unless a named op-log line, its ``location``
    (``file:line``). The JSON report names the fields the same (``{label, location}``, ``location``
    ``null`` when empty)."""

    label: str
    location: str = ""

    def __str__(self) -> str:
        return f"{self.label} at {self.location}" if self.location else self.label

    def to_json_dict(self) -> dict:
        return {"label": self.label, "location": self.location or None}


@dataclass(frozen=True, slots=True)
class RootCause:
    """Instances of one race between two sites: ``instances`` index ``Findings.hazards``.

    ``kind`` and ``buffer`` as in a :class:`~streamsim.Hazard`; ``first``/``second`` the two
    :class:`Site` s (JSON ``first_site``/``second_site``); ``manifest`` counts the instances that
    struck in this run, ``latent`` the others; ``ranks`` where it occurs; ``fix`` the code-level fix
    in words (JSON ``fix.text``) and ``fix_kind`` its kind (JSON ``fix.kind``), or ``no_fix`` says
    why there is none. Its measured cost is ``Report.cost_of(i)`` (JSON ``fix_cost``).
    """

    kind: str
    buffer: str
    first: Site
    second: Site
    instances: tuple[int, ...]
    manifest: int  # instances that struck in this run
    ranks: tuple[int, ...]
    fix: str | None  # the code-level fix, in words; None when no sync can fix it
    fix_kind: str | None = None  # the kind of its instances' fixes (see findings.Fix)
    no_fix: str = ""  # why there is none

    @property
    def latent(self) -> int:
        return len(self.instances) - self.manifest

    def describe(self) -> str:
        """One line: ``WAR on 'x' between `isend` (f.py:3) and `forward` (f.py:9)``."""
        return (f"{self.kind} on {self.buffer!r} between {_quote(self.first)} and "
                f"{_quote(self.second)}")


def site_of(op: Op) -> Site:
    """The site of ``op`` (see the module docstring)."""
    label = _PEER.sub("", op.name)
    site = op.attrs.get("site") if op.line is not None else None
    if site is not None:  # a recorded line: its label at its user code site
        return Site(label, str(site))
    if op.line is not None:  # an op log: the name when the line gives one, else the line
        return Site(label) if op.name != op.kind else Site(op.kind, op.location)
    return Site(label, op.location)


def root_causes(trace: Trace, hazards: Sequence[Hazard]) -> tuple[RootCause, ...]:
    """The root causes of ``hazards`` (found in ``trace``), in the order their first instances
    appear (hazards come in issue order of their second access)."""
    if not hazards:  # (no op read: a trace whose ops are not made yet stays so)
        return ()
    lives = _Lives(trace)
    groups = _grouped(trace, hazards, lives)
    said = native.root_cause_summaries(trace, hazards, list(groups.values()))
    if said is None:
        said = [_summary(trace, hazards, idx) for idx in groups.values()]
    out = []
    waits: dict[int, Op] | None = None  # waited op id -> the program's first wait of it (lazily)
    for ((kind, buffer, first, second), idx), summary in zip(groups.items(), said, strict=True):
        fix_kind, at, others, manifest, ranks, step_gap = summary
        if isinstance(buffer, tuple):
            buffer = lives.shown([hazards[i] for i in idx], buffer)
        text, why = None, ""
        if fix_kind is None:
            why = no_fix_reason(trace, hazards[idx[0]])
        else:
            example = hazards[at]
            later = None
            if fix_kind == "wait_handle":
                sent = trace.op(example.first)
                if sent.agent.is_gloo and sent.kind == "isend":
                    if waits is None:
                        waits = _first_waits(trace)
                    w = waits.get(example.first)
                    later = site_of(w) if w is not None else None
            text = code_fix(trace, example, first, second, step_gap, later)
            if others:
                text += (f" ({others} instance{'s' * (others != 1)} need{'s' * (others == 1)} "
                         "another sync: see the instances)")
        out.append(RootCause(kind, buffer, first, second, tuple(idx), manifest, ranks, text,
                             fix_kind, why))
    return tuple(out)


def _summary(trace: Trace, hazards: Sequence[Hazard], idx: list[int]) -> tuple:
    """What a root cause says of its instances (``hazards`` at ``idx``): ``(fix kind, the
    index of its example, others, manifest, ranks, step gap)``: the most common kind of their
    fixes (None: none has a fix) and the first instance with it, how many instances need
    another sync, how many struck in this timing, their ranks, and how many steps their
    accesses are apart (:func:`_step_gap`; None without a fix). Compiled where it runs
    (streamsim/native/_rootcause.pyx, ``summaries``: the same tuples)."""
    members = [hazards[i] for i in idx]
    kinds = [h.fix.kind for h in members if h.fix is not None]
    fix_kind = _most_common(kinds)
    manifest = sum(h.manifest for h in members)
    ranks = tuple(sorted({h.rank for h in members}))
    if fix_kind is None:
        return None, None, 0, manifest, ranks, None
    at = next(i for i, h in zip(idx, members) if h.fix is not None and h.fix.kind == fix_kind)
    return (fix_kind, at, len(members) - kinds.count(fix_kind), manifest, ranks,
            _step_gap(trace, members))


def _grouped(trace: Trace, hazards: Sequence[Hazard], lives: "_Lives | None"
             ) -> dict[tuple, list[int]]:
    """The hazards' indices by root cause: key (kind, buffer or the allocation site of the life
    the second access touches, the two sites) -> its instances, in the order the keys first
    appear; compiled where it runs (streamsim/native/_rootcause.pyx: the same dict)."""
    covered = _covered_by(trace, hazards)
    made_site = lives.site if lives is not None and lives.made else None  # (else None for all)
    got = native.root_cause_groups(trace, hazards, made_site, covered)
    if got is not None:
        return got
    groups: dict[tuple, list[int]] = {}
    sites: dict[int, Site] = {}

    def site(op_id: int) -> Site:
        s = sites.get(op_id)
        if s is None:
            s = sites[op_id] = site_of(trace.op(op_id))
        return s

    keys: list[tuple] = []
    merged: dict[tuple, tuple] = {}  # a pair of sites -> the pair whose fix orders it too
    for i, h in enumerate(hazards):
        made = lives.site(h) if lives else None
        buffer = h.buffer if made is None else made  # (a tuple: no buffer's name)
        key = (h.kind, buffer, site(h.first), site(h.second))
        c = covered.get(i)
        if c is not None and keys[c][:3] == key[:3] and keys[c] != key:
            merged.setdefault(key, keys[c])
        keys.append(key)
    for i, key in enumerate(keys):
        # The same missing wait: its earlier consumer's root cause, for every instance of these
        # sites (the code-level fix before the earlier consumer orders the later one in each;
        # an instance whose earlier pair the pass did not name, only its latest read, included)
        seen = 0
        while key in merged and seen < len(merged):
            key, seen = merged[key], seen + 1
        groups.setdefault(key, []).append(i)
    return groups


def _covered_by(trace: Trace, hazards: Sequence[Hazard]) -> dict[int, int]:
    """Hazard index -> the index of an earlier hazard whose fix orders it too: the same op
    instance first (one send or receive whose handle is not waited), a ``wait_handle`` fix, and a
    second op the wait placed before the earlier hazard's second op comes before as well (issued
    later by the same host thread when the wait blocks the host, enqueued later on the stream
    that waits otherwise). Such a hazard is one more consumer of the one missing wait (a
    received input read by a forward and again by its backward): an instance of that root
    cause, not a root cause of its own. Linear but for the consumers of one op instance."""
    by_first: dict[int, list[int]] = {}
    for i, h in enumerate(hazards):
        if h.fix is not None and h.fix.kind == "wait_handle":
            by_first.setdefault(h.first, []).append(i)
    out: dict[int, int] = {}
    for idx in by_first.values():
        if len(idx) < 2:
            continue
        for k, i in enumerate(idx):
            later = trace.op(hazards[i].second)
            issue = trace.op(later.issuer) if later.issuer is not None else later
            for j in idx[:k]:
                fix = hazards[j].fix
                before = trace.op(fix.before)
                if issue.agent != before.agent or issue.index < before.index:
                    continue
                if fix.wait_stream is None or later.agent == fix.wait_stream:
                    out[i] = out.get(j, j)
                    break
    return out


class _Lives:
    """Where each life of a buffer was made: from a model's ``Trace.allocations`` (its
    ``host.buffer`` calls) or an op log's ``alloc`` lines with a ``site``, in issue order (a
    model's allocation: the ops issued before it; a line: its op id), each with its label (a
    model's: the name it gave; a line's ``label``; None for a line without one, as a recorder
    writes)."""

    def __init__(self, trace: Trace):
        self.made: dict[tuple[int, str], list[tuple[int, str]]] = {}
        self.labels: dict[tuple[int, str], set] = {}
        for a in trace.allocations:
            self.labels.setdefault((a.rank, a.buffer), set()).add(a.label or a.buffer)
            if a.site:
                self.made.setdefault((a.rank, a.buffer), []).append((a.issued, a.site))
        if not trace.allocations:
            for op in trace.ops_of_kind("alloc"):
                if "site" in op.attrs:
                    key = (op.agent.rank, str(op.attrs["buffer"]))
                    self.made.setdefault(key, []).append((op.id, str(op.attrs["site"])))
                    self.labels.setdefault(key, set()).add(op.attrs.get("label"))

    def site(self, h: Hazard) -> tuple[str] | None:
        """``(file:line,)`` that made the life of ``h``'s buffer its second access touches (the
        last allocation of that storage issued before it), or None for a buffer nothing made."""
        life = self.made.get((h.rank, h.buffer))
        if not life:
            return None
        at = bisect_right(life, (h.second, "\uffff")) - 1
        return (life[max(at, 0)][1],)

    def shown(self, members: list[Hazard], made: tuple[str]) -> str:
        """How a root cause of buffers made at one site names them: a recorder's tensors (no
        label) ``tensor made at SITE``; a model's (or labelled lines'): the storage when all its
        instances touch one, else their common label (buffers of one name alive together: ``x``,
        ``x#2``), else where they were made (one line allocating buffers of several names)."""
        keys = {(h.rank, h.buffer) for h in members}
        labels = set().union(*(self.labels.get(k, {None}) for k in keys))
        if None not in labels:
            storages = {h.buffer for h in members}
            if len(storages) == 1:
                return storages.pop()
            if len(labels) == 1:
                return labels.pop()
        return f"tensor made at {made[0]}"


def _first_waits(trace: Trace) -> dict[int, Op]:
    """Each waited op's first ``wait`` (a handle's wait: the op is in its ``after``)."""
    out: dict[int, Op] = {}
    for op in trace.ops_of_kind("wait"):
        for x in op.after:
            out.setdefault(x, op)
    return out


def code_fix(trace: Trace, h: Hazard, first: Site, second: Site, step_gap: int | None,
             later_wait: Site | None = None) -> str:
    """The fix of ``h`` said at the level of the code: the sync to add and at which site.
    ``later_wait``: where the program itself waits the handle of a gloo send that the fix waits
    earlier (a gloo send's handle waited twice hangs: that wait moves, it is not added to)."""
    fix: Fix = h.fix  # type: ignore[assignment]
    a, b = trace.op(h.first), trace.op(h.second)
    whose = {0: "this step's ", 1: "the previous step's "}.get(step_gap, "") if step_gap is not None \
        else ""
    if fix.kind == "wait_handle":
        how = ("" if fix.wait_stream is not None or a.agent.is_gloo
               else " (a blocking wait: the host itself must not go on)")
        text = (f"before {_quote(second)}, wait{how} the handle returned by {whose}"
                f"{_quote(first)}")
        if later_wait is not None:
            text += (f"; move the program's own wait of it there from {_quote(later_wait)} "
                     "(a gloo send's handle waited twice hangs)")
        return text
    if fix.kind == "record_stream":
        return (f"call {h.buffer}.record_stream({a.agent.name}) before {_quote(second)}, so "
                f"that the allocator waits for {_quote(first)}")
    if fix.kind == "handoff":
        to = trace.op(fix.before).agent.name
        return (f"hand off from thread {a.agent.name} to {to}: put on a queue after "
                f"{_quote(first)} and get from it before {_quote(second)}")
    stream = fix.event_stream.name if fix.event_stream is not None else a.agent.name
    if fix.kind == "event_sync":
        return (f"record an event on {stream} after {_quote(first)} and synchronize it before "
                f"{_quote(second)}")
    wait_on = fix.wait_stream.name if fix.wait_stream is not None else b.agent.name
    return (f"record an event on {stream} after {_quote(first)} and make {wait_on} wait it "
            f"before {_quote(second)}")


def _quote(site: Site) -> str:
    return f"`{site.label}` ({site.location})" if site.location else f"`{site.label}`"


def _most_common(kinds: list[str]) -> str | None:
    if not kinds:
        return None
    counts: dict[str, int] = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    return max(counts, key=lambda k: (counts[k], -kinds.index(k)))


def _step_gap(trace: Trace, members: list[Hazard]) -> int | None:
    """How many steps the first access precedes the second in every instance, if always the same
    (``step`` of the host action that issued each)."""
    gaps = set()
    for h in members:
        sa, sb = _step(trace, h.first), _step(trace, h.second)
        if sa is None or sb is None:
            return None
        gaps.add(sb - sa)
    return gaps.pop() if len(gaps) == 1 else None


def _step(trace: Trace, op_id: int) -> int | None:
    op = trace.op(op_id)
    if op.step is None and op.agent.kind != HOST and op.issuer is not None:
        return trace.op(op.issuer).step
    return op.step


native.bind_root_causes(op=Op, site=Site, peer_sub=_PEER.sub, hazard=Hazard, fix=Fix)
