"""Where a proposed fix sits against a variant that fixes the same bug, and what each costs.

A model often carries the fix a project merged as a variant (vLLM's ``fixed_54962``), and the
report of the racy variant proposes its own fix for each root cause. The two may differ: the
proposed wait goes right before the write that races, the merged one at the top of
``execute_model``, and the earlier wait costs more. ``compare`` shows it (issue 27, "costs that
explain themselves"): for each root cause of the baseline (the racy variant) that has a proposed
fix, and each other variant that has no root cause between the same two sites on the same
buffer (it *removes* it), where that variant's sync sits and what it costs, beside the proposed
fix and its measured cost (the baseline's fix cost of that root cause).

Where a variant's sync sits is read from its own trace: the ops it issues at the root cause's two
sites, at the same rank, step and occurrence as the root cause's first instance, and the
happens-before chain from the first to the second (``analysis.why.HBIndex``); its first sync
edge (a handle wait, an event wait, a host sync, an ``is_completed()`` observed True, a
``record_stream``) is the variant's sync, at the code line of the op it leads to. A variant that
orders them by no sync does without one (it no longer makes the two ops touch the same bytes, as
a copy does); one that issues no op at one of the sites is written another way.

Costs are against the baseline, in the words of a fix cost (``FixCost``): the makespan change
and the largest change of a rank's peak live bytes. Linear in each variant's ops.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Sequence

from ..analysis.checks import FixCost, duration
from ..analysis.findings import verdict_word
from ..analysis.rootcause import RootCause, Site, site_of
from ..analysis.why import HORIZON, HBIndex
from ..trace import Op, Trace

# HB edge kind -> what the sync is, in words (the edges a sync adds; docs/semantics.md)
SYNC_WORDS = {"handle": "handle wait", "event": "event wait", "host_sync": "host sync",
              "query": "is_completed() seen True", "record_stream": "free held by record_stream"}
FIX_WORDS = {"wait_handle": "handle wait", "event": "event wait", "event_sync": "event sync",
             "record_stream": "record_stream"}


@dataclass(frozen=True)
class VariantSync:
    """How one variant removes a root cause (``verdict``: its ``Findings.verdict``): its sync's
    ``kind`` (a :data:`SYNC_WORDS` key), ``label`` and ``location`` (the code line of the op the
    sync edge leads to), or none of them and ``note`` saying why (no sync orders the two ops; an op is not issued there). ``cost``:
    the variant's metrics against the baseline's (``syncs`` 0: not a fix re-run)."""

    variant: str
    verdict: str
    kind: str | None
    label: str
    location: str
    note: str
    cost: FixCost
    before: Site | None = None  # the host action its thread issues right after the sync
    ahead_us: float | None = None  # from the sync's end to the second op's issue, same thread
    second: str = ""  # the label of the root cause's second op

    def after(self) -> str:
        """``clean``, ``LATENT: 21 hazards``: the variant's verdict, and its hazards if any."""
        n, word = self.cost.hazards_after, verdict_word(self.verdict)
        return word if not n else f"{word}: {_left(n)[:-5]}"

    def where(self) -> str:
        """``handle wait `w.wait()` at f.py:12``, or the note."""
        if self.kind is None:
            return self.note
        at = f" at {self.location}" if self.location else ""
        text = f"{SYNC_WORDS[self.kind]} `{self.label}`{at}"
        if self.before is not None:
            text += f", before `{self.before.label}`" + (
                f" at {self.before.location}" if self.before.location else "")
        if self.ahead_us is not None and self.ahead_us > 0:
            text += f", {duration(self.ahead_us)} ahead of `{self.second}`"
        return text

    def to_json_dict(self) -> dict:
        got = self.cost.peak_change()
        return {"variant": self.variant, "verdict": self.verdict,
                "sync": None if self.kind is None else
                {"kind": self.kind, "label": self.label, "location": self.location or None,
                 "before": None if self.before is None else self.before.to_json_dict(),
                 "ahead_us": None if self.ahead_us is None else round(self.ahead_us, 3)},
                "note": self.note or None,
                "makespan_change": round(self.cost.makespan_change, 6),
                "peak_change_rank": None if got is None else got[0],
                "peak_change_bytes": None if got is None else got[1]}


@dataclass(frozen=True)
class FixAgainstVariants:
    """Root cause ``index`` (1-based, as the report numbers it) of the baseline: its proposed
    fix (``fix_kind``, before the op at ``fix_label``/``fix_location``) and its measured
    ``fix_cost`` (None: not costed), and the variants that remove it (``variants``)."""

    index: int
    root_cause: RootCause
    fix_kind: str
    fix_label: str
    fix_location: str
    fix_cost: FixCost | None
    variants: tuple[VariantSync, ...]

    def proposed(self) -> str:
        """``handle wait before `copy_` at f.py:9``."""
        at = f" at {self.fix_location}" if self.fix_location else ""
        return f"{FIX_WORDS.get(self.fix_kind, self.fix_kind)} before `{self.fix_label}`{at}"

    def to_json_dict(self) -> dict:
        rc, cost = self.root_cause, self.fix_cost
        got = cost.peak_change() if cost is not None else None
        return {"root_cause": self.index, "kind": rc.kind, "buffer": rc.buffer,
                "first_site": rc.first.to_json_dict(), "second_site": rc.second.to_json_dict(),
                "proposed_fix": {"kind": self.fix_kind, "text": rc.fix,
                                 "before": {"label": self.fix_label,
                                            "location": self.fix_location or None},
                                 "makespan_change": None if cost is None
                                 else round(cost.makespan_change, 6),
                                 "peak_change_rank": None if got is None else got[0],
                                 "peak_change_bytes": None if got is None else got[1]},
                "variants": [v.to_json_dict() for v in self.variants]}


def fixes_against_variants(base, others: Sequence[tuple[str, object]]
                           ) -> list[FixAgainstVariants]:
    """For each root cause of report ``base`` (fix-costed) with a proposed fix, the variants of
    ``others`` (``(name, Report)``) that remove it, in their order (none: the root cause is left
    out)."""
    out = []
    f = base.findings
    index: dict[str, HBIndex] = {}  # variant -> its trace's HB edges, built once
    places: dict[str, _Places] = {}  # variant (and the baseline, "") -> where its ops stand
    for i, rc in enumerate(f.root_causes):
        if rc.fix is None:
            continue
        removers = [(name, r) for name, r in others if not _has(r.findings.root_causes, rc)]
        if not removers:
            continue
        first = f.hazards[rc.instances[0]]
        fix = next(f.hazards[j].fix for j in rc.instances
                   if f.hazards[j].fix is not None and f.hazards[j].fix.kind == rc.fix_kind)
        before = base.trace.op(fix.before)
        here = places.get("")
        if here is None:
            here = places[""] = _Places(base.trace)
        wanted = [here.key(base.trace.op(first.first)), here.key(base.trace.op(first.second))]
        rows = tuple(_variant(name, r, base, wanted, index, places) for name, r in removers)
        out.append(FixAgainstVariants(i + 1, rc, fix.kind, site_of(before).label,
                                      before.location, base.cost_of(i), rows))
    return out


def _has(root_causes: Sequence[RootCause], rc: RootCause) -> bool:
    return any((o.kind, o.buffer, o.first, o.second) == (rc.kind, rc.buffer, rc.first, rc.second)
               for o in root_causes)


def _variant(name: str, report, base, wanted: list[tuple], index: dict,
             places: dict) -> VariantSync:
    cost = FixCost(0, base.metrics, report.metrics, len(report.findings.hazards),
                   report.findings.deadlock is not None)
    verdict = report.findings.verdict  # (manifest, deadlock, latent, clean: as compare's JSON)
    there = places.get(name)
    if there is None:
        there = places[name] = _Places(report.trace)
    found = [there.at(k) for k in wanted]
    instead = [there.at_line(k) for k in wanted]
    missing = [(k, o) for k, got, o in zip(wanted, found, instead) if got is None]
    if missing:
        (_, s, *_), other = missing[0]
        if other is not None:  # (the same line issues another op: a copy, another buffer)
            note = f"none: at {s.location} it issues `{site_of(other).label}` instead"
        else:
            note = f"none: it issues no `{s.label}`" + (f" at {s.location}" if s.location else "")
        return VariantSync(name, verdict, None, "", "", note, cost)
    x, y = found
    hb = index.get(name)
    if hb is None:
        hb = index[name] = HBIndex(report.trace)
    chain = hb.reaches(x.id, y.agent, y.end_seq + HORIZON)
    reached = report.trace.op(chain[-1].dst) if chain else None
    if reached is None or reached.index > y.index:
        return VariantSync(name, verdict, None, "", "",
                           "none: no sync orders the two ops, which no longer touch the same "
                           "bytes", cost)
    link = next((l for l in chain if l.kind in SYNC_WORDS), None)
    if link is None:  # (ordered by program order, enqueue or messages alone)
        return VariantSync(name, verdict, None, "", "",
                           "none: the two ops are ordered without a sync (program order)", cost)
    to = report.trace.op(link.dst)
    src = report.trace.op(to.issuer) if to.issuer is not None else to
    nxt = _next_action(report.trace, src)
    second = report.trace.op(y.issuer) if y.issuer is not None else y
    ahead = second.start - src.end if nxt is not None and src.agent == second.agent else None
    return VariantSync(name, verdict, link.kind, site_of(src).label, src.location, "", cost,
                       site_of(nxt) if nxt is not None else None, ahead, site_of(y).label)


def _next_action(trace: Trace, op: Op) -> Op | None:
    """The first host action its thread issued after host action ``op`` from another code line
    (a loop of waits at one line is one place); None: there is none."""
    for o in trace.ops[op.id + 1:]:
        if o.agent == op.agent and o.location != op.location:
            return o
    return None


class _Places:
    """Where each op of a trace stands, to find the op of another run of the model that stands
    at the same place: its agent, site and step, and its occurrence among the ops of that
    agent, site and step (and among those of that agent, code line and step: what a variant
    issues there instead). One pass over the ops, then lookups."""

    def __init__(self, trace: Trace):
        self.by_site: dict[tuple, list[Op]] = {}
        self.by_line: dict[tuple, list[Op]] = {}
        for o in trace.ops:  # (in id order)
            self.by_site.setdefault((o.agent, site_of(o), o.step), []).append(o)
            if o.location:
                self.by_line.setdefault((o.agent, o.location, o.step), []).append(o)

    def key(self, op: Op) -> tuple:
        """``(agent, site, step, k, k at its line)`` of one of this trace's ops."""
        site = site_of(op)
        same = self.by_site[(op.agent, site, op.step)]
        line = self.by_line.get((op.agent, op.location, op.step), [])
        return (op.agent, site, op.step, _position(same, op), _position(line, op))

    def at(self, key: tuple) -> Op | None:
        """The op at place ``key`` (:meth:`key` of another trace's op), or None."""
        same = self.by_site.get(key[:3], ())
        return same[key[3]] if key[3] < len(same) else None

    def at_line(self, key: tuple) -> Op | None:
        """The op issued from the same code line at the same occurrence, or None."""
        agent, site, step, _, k = key
        line = self.by_line.get((agent, site.location, step), ()) if site.location else ()
        return line[k] if 0 <= k < len(line) else None


def _position(ops: list[Op], op: Op) -> int:
    """Where ``op`` is in ``ops`` (sorted by id); -1 when not there."""
    i = bisect_left(ops, op.id, key=lambda o: o.id)
    return i if i < len(ops) and ops[i].id == op.id else -1


def _left(n: int) -> str:
    return f"{n:,} hazard{'s' * (n != 1)} left"


def render_fix_sites(items: list[FixAgainstVariants], baseline: str, *,
                     markdown: bool = False, all_fixes: FixCost | None = None) -> str:
    """The section ``compare`` prints after its table ('' when there is nothing to show); its
    last line is what ``all_fixes`` (every proposed fix at once) costs, when measured."""
    if not items:
        return ""
    title = (f"proposed fixes of {baseline}'s root causes against the variants without them "
             f"(where the sync sits; cost vs {baseline})")
    head = ["fix", "sync", "after", "makespan", "peak memory"]
    out = [f"**{title[0].upper()}{title[1:]}**" if markdown else f"{title}:"]
    for it in items:
        rc = it.root_cause
        left = "-" if it.fix_cost is None else _left(it.fix_cost.hazards_after)
        body = [["proposed", it.proposed(), left,
                 "not costed" if it.fix_cost is None else f"{it.fix_cost.makespan_change:+.1%}",
                 "-" if it.fix_cost is None else (it.fix_cost.peak_text() or "-")]]
        body += [[v.variant, v.where(), v.after(), f"{v.cost.makespan_change:+.1%}",
                  v.cost.peak_text() or "-"] for v in it.variants]
        what = f"[{it.index}] {rc.describe()}"
        if markdown:
            out += ["", what, "", "| " + " | ".join(head) + " |",
                    "|" + "|".join("---" for _ in head) + "|"]
            out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
            continue
        widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
        fmt = lambda cells: "    " + "  ".join(
            c.rjust(w) if i in (3,) else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
        out += [what, fmt(head), fmt(["-" * w for w in widths])] + [fmt(row) for row in body]
    if all_fixes is not None:
        out += ["" if markdown else None, f"every proposed fix at once ({all_fixes.syncs:,} sync"
                f"{'s' * (all_fixes.syncs != 1)}): {all_fixes.makespan_change:+.1%} makespan, "
                f"{all_fixes.peak_text() or 'no memory counted'}, "
                f"{_left(all_fixes.hazards_after)}"]
    return "\n".join(x for x in out if x is not None) + "\n"
