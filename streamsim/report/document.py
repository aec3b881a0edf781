"""The content of a hazard report as a list of simple blocks, rendered to Markdown and to HTML.

One function, :func:`build_document`, decides *what* a report says (summary, parameters, each finding
with its accesses, buffer, why nothing orders them, manifest or latent, the fix and its cost, the
pictures, deadlock, warnings, metrics); :mod:`streamsim.report.markdown` and :mod:`streamsim.report.html` only decide
*how* it looks. So the Markdown and the HTML page always say the same thing. The blocks and the
inline helpers are :mod:`streamsim.report.blocks` (imported here under the same names).

Inline text is a tuple of spans ``(style, text)`` with style ``""`` (plain), ``"code"`` or ``"b"``.
"""
from __future__ import annotations

from typing import Sequence

from ..analysis.findings import Hazard
from ..analysis.fixes import no_fix_reason
from .blocks import (Block, Bullets, Heading, Image, Para, Pictures, Span, Table, Text, bold,
                     code, nbytes, t, ticks, us)
from .report import NO_STEPS, Report, memory_line
from ..trace import Op, Trace
from ..analysis.why import EDGE_TEXT, HORIZON, HBIndex, Link, Why, explain, free_verdict
from ..kinds import HB_EDGE_WORDS

MAX_OCCURRENCES = 5  # other instances listed per root cause
MAX_EXPLAINED = 20  # root causes explained in full (each explanation walks part of the trace)
MAX_PATTERN_ROWS = 200  # rows of the root-cause table (an unnamed op log line is its own site)
MAX_WARNINGS = 3  # warnings shown per kind


def op_short(op: Op) -> Text:
    """``name`` (step k) on agent."""
    return t(code(op.name), f"{op.when() and ' ' + op.when()} on {op.agent}")


def op_full(op: Op) -> Text:
    where = t(" at ", code(op.location)) if op.location else ()
    line = f" (op log line {op.line})" if op.line is not None and not op.location else ""
    return op_short(op) + where + t(line, f", ran {us(op.start)} – {us(op.end)}")


MAX_CHAIN = 8  # edges shown in full; a longer chain shows its ends and names what lies between


def chain(trace: Trace, links: Sequence[Link]) -> Text:
    """``a`` —kind→ ``b`` —kind→ ``c``; a chain longer than ``MAX_CHAIN`` edges keeps its first and
    last three and says how many edges, through which agents, it skips."""
    def run(part: Sequence[Link]) -> Text:
        out: Text = ()
        for link in part:
            out += t(f" —{link.kind}→ ") + op_short(trace.op(link.dst))
        return out
    out: Text = op_short(trace.op(links[0].src))
    if len(links) <= MAX_CHAIN:
        return out + run(links)
    middle = links[3:-3]
    through = list(dict.fromkeys(str(trace.op(l.dst).agent) for l in middle[:-1]))
    more = f" and {len(through) - 5} more" if len(through) > 6 else ""
    kinds = sorted({l.kind for l in middle})
    return (out + run(links[:3])
            + t(f" —… {len(middle)} more edges ({', '.join(kinds)}) through "
                f"{', '.join(through[:5] if more else through)}{more} …→ ")
            + op_short(trace.op(middle[-1].dst)) + run(links[-3:]))


# --- the document ---------------------------------------------------------------------------------

def build_document(report: Report, pictures: Pictures | None = None) -> list[Block]:
    """Every block of ``report``'s document; ``pictures`` (when the files exist) are embedded."""
    r = report
    title = f"{r.model} [{r.variant}]" if r.model else r.source
    doc: list[Block] = [Heading(1, t("streamsim report: ", title)),
                        Para(t(bold(r.summary()))),
                        Para(t("Source ", code(r.source), "; simulated ", f"{len(r.trace.ops):,} ops "
                               f"on {len(r.trace.agents)} agents; exit code {r.exit_code}."))]
    if r.applied is not None:  # --apply-fixes: the fixed run, and what its fixes cost
        c = r.applied
        doc.append(Para(t(bold("Fixed run"), f": the run re-simulated with its {c.syncs} "
                          f"proposed sync{'s' * (c.syncs != 1)} inserted "
                          "(--apply-fixes); against the run as written: ") + _cost(c)))
    doc += _parameters(r)
    doc += _hazards(r, pictures)
    doc += _deadlock(r, pictures)
    if not r.findings.hazards and r.findings.deadlock is None:
        doc.append(Heading(2, t("Findings")))
        doc.append(Para(t("No data hazard and no deadlock: every pair of conflicting accesses is "
                          "ordered by happens-before.")))
        if pictures is not None and pictures.missing_hb:
            doc.append(Para(t(pictures.missing_hb)))
    doc += _warnings(r)
    doc += _metrics(r, pictures)
    return doc


def _parameters(r: Report) -> list[Block]:
    """Variant, every parameter, seed and jitter; three name/value pairs a row when there are many."""
    pairs = [(t("variant"), t(code(r.variant)))] if r.variant else []
    pairs += [(t(code(k)), t(code(v))) for k, v in r.params.items()]
    if r.seed is not None or r.jitter:  # (as the text report: a nominal run has no seed to show)
        pairs += [(t("seed"), t(code(r.seed))), (t("jitter"), t(code(r.jitter)))]
    per_row = 3 if len(pairs) > 8 else 1
    rows = []
    for i in range(0, len(pairs), per_row):
        row: tuple[Text, ...] = ()
        for name, value in pairs[i:i + per_row]:
            row += (name, value)
        rows.append(row + ((), ()) * (per_row - len(pairs[i:i + per_row])))
    return [Heading(2, t("Parameters")), Table(("parameter", "value") * per_row, tuple(rows))
            ] if pairs else []  # (a nominal op-log run chose nothing: no table)


def _verdict(trace: Trace, h: Hazard, why: Why) -> Text:
    ov = why.overlap
    if (freed := free_verdict(trace, h)) is not None:  # a free corrupts nothing by itself
        return t(bold("MANIFEST"), f": {freed}.")
    if h.manifest:  # the definition, then these numbers (a write before the read: no overlap)
        when = (f"the windows overlapped during [{ov[0]:,.1f}, {ov[1]:,.1f}] µs "
                f"({ov[1] - ov[0]:,.1f} µs)" if ov is not None else
                f"it started at {why.y_window[0]:,.1f} µs, the first ended at "
                f"{why.x_window[1]:,.1f} µs")
        return t(bold("MANIFEST"), f": the second access started before the first ended ({when}); "
                 "the data really was corrupted in this timing.")
    return t(bold("latent"), f": in this run the accesses were {why.gap:,.1f} µs apart, so this "
             "timing happened to be safe; nothing guarantees it, and another timing (longer "
             "transfer, jitter, other load) overlaps them.")


def _why_items(trace: Trace, h: Hazard, why: Why) -> list[tuple[Text, tuple[Text, ...]]]:
    x, y = trace.op(why.x), trace.op(why.y)
    items: list[tuple[Text, tuple[Text, ...]]] = []
    for op, links in ((x, why.x_after), (y, why.y_after)):
        subs = tuple(op_short(trace.op(l.src)) + t(f" ({EDGE_TEXT.get(l.kind, l.kind)})")
                     for l in links)
        head = op_short(op) + t(" is ordered after:" if subs else " is ordered after nothing.")
        items.append((head, subs))
    within = "" if why.complete else f" (the search looked {HORIZON // 2:,} ops either way)"
    if why.x_reaches is None:
        items.append((op_short(x) + t(f" is ordered before no op of {y.agent}: nothing on "
                                      f"{y.agent} ever waits for it{within}."), ()))
    else:
        end = trace.op(why.x_reaches[-1].dst)
        items.append((t(f"The first op of {y.agent} that ") + op_short(x)
                      + t(" is ordered before is ") + op_short(end) + t(": after ") + op_short(y)
                      + t(" in program order, too late. The chain:"),
                      (chain(trace, why.x_reaches),)))
    if why.y_covered is None:
        items.append((op_short(y) + t(f" is ordered after no op of {x.agent}: {y.agent} never "
                                      f"waits for {x.agent} before it{within}."), ()))
    else:
        start = trace.op(why.y_covered[0].src)
        items.append((t(f"The last op of {x.agent} that ") + op_short(y)
                      + t(" is ordered after is ") + op_short(start) + t(": before ") + op_short(x)
                      + t(" in program order, not enough. The chain:"),
                      (chain(trace, why.y_covered),)))
    fix = " (the root cause's fix adds it)" if h.fix is not None else \
        f" (no fix proposed: {no_fix_reason(trace, h)})"
    items.append((t(bold("Missing edge"), ": ") + op_short(x) + t(" → ") + op_short(y)
                  + t(fix + "."), ()))
    return items


def _cost(c) -> Text:
    """A measured cost (``FixCost``): makespan and mean step before → after, hazards left."""
    step = (f", mean step {us(c.before.mean_step_us)} → {us(c.after.mean_step_us)}"
            if c.before.steps else "")
    peak = c.peak_text()
    text = t("makespan ", bold(f"{us(c.before.makespan_us)} → {us(c.after.makespan_us)} "
                                f"({c.makespan_change:+.1%})"), peak and ", ", peak and bold(peak),
             f"{step}; {c.hazards_after} hazard{'s' * (c.hazards_after != 1)} left")
    if c.deadlock_after:
        text += t(", but the fixed run ", bold("DEADLOCKS"))
    if c.shift is not None:
        text += t("; " + c.explain(unit="µs"))
    return text + t(".")


def _fix_cost(r: Report) -> Text:
    c, note = r.fix_cost, r.root_cause_cost_note  # note: root causes the budget left uncosted
    if c is None:
        return t("Cost not measured (", code("run"), " and ", code("check"), " re-simulate with "
                 "the fixes unless ", code("--no-fix-cost"), "; not under ",
                 code("--strategy pct"), ", whose delays a fix's extra ops would move).")
    return t(f"Every proposed fix applied at once ({c.syncs} sync{'s' * (c.syncs != 1)}), "
             "re-simulated: ") + _cost(c) + t(note and " ", note)


def _hazards(r: Report, pictures: Pictures | None) -> list[Block]:
    f = r.findings
    if not f.root_causes:
        return []
    trace = r.trace
    index = HBIndex(trace)
    k, n = len(f.root_causes), len(f.hazards)
    doc: list[Block] = [Heading(2, t(f"Root causes ({k} root cause{'s' * (k != 1)} of {n} data "
                                     f"hazard{'s' * (n != 1)})")),
                        Para(t("A root cause is one race between two places in the code (same kind, "
                               "buffer, and the sites of both accesses), repeated at every step "
                               "and rank where it occurs; each has one fix, measured by "
                               "re-simulating with it at every instance, and is explained below "
                               "from its first manifest instance (the first one when none "
                               "struck).")),
                        _summary_table(r),
                        Para(_fix_cost(r))]
    for n_rc, rc in enumerate(f.root_causes[:MAX_EXPLAINED], 1):
        hs = [f.hazards[i] for i in rc.instances]
        h = next((x for x in hs if x.manifest), hs[0])  # the instance that struck, if any
        doc.append(Heading(3, t(f"{n_rc}. {rc.kind} on ", code(rc.buffer), " between ",
                                code(rc.first.label), _at(rc.first), " and ",
                                code(rc.second.label), _at(rc.second))))
        doc.append(Para(t(f"{len(hs)} instance{'s' * (len(hs) != 1)} ({rc.manifest} manifest, "
                          f"{rc.latent} latent) on rank{'s' * (len(rc.ranks) != 1)} "
                          f"{', '.join(map(str, rc.ranks))}.")))
        if rc.fix is not None:
            doc.append(Para(t(bold("Fix"), ": ") + ticks(rc.fix) + t(".")))
            c = r.cost_of(n_rc - 1)
            doc.append(Para(t(bold("Cost"), " (re-simulated with this fix at every instance): ")
                            + _cost(c) if c is not None else
                            t(bold("Cost"), ": not measured for this root cause.")))
        else:
            doc.append(Para(t(bold("No fix proposed"), ": ", rc.no_fix, ".")))
        why = explain(trace, h, index)
        a, b = trace.op(h.first), trace.op(h.second)
        lo, hi = h.range
        doc.append(Para(t(("First manifest" if h.manifest else "First") + " instance, in full:")))
        doc.append(Bullets((
            (t(bold("first"), f": {h.first_mode} by ") + op_full(a)
             + t(f"; access window [{_win(why, a.id)}] µs"), ()),
            (t(bold("second"), f": {h.second_mode} by ") + op_full(b)
             + t(f"; access window [{_win(why, b.id)}] µs"), ()),
            (t(bold("memory"), ": bytes ", code(f"[{lo}, {hi})"), f" ({nbytes(hi - lo)}) of buffer ",
               code(rc.buffer), f" on rank {h.rank}"), ()),
            (_verdict(trace, h, why), ()),
        )))
        doc.append(Para(t(bold("Why nothing orders them."), " Happens-before comes only from "
                          f"{', '.join(HB_EDGE_WORDS[:-1])} and {HB_EDGE_WORDS[-1]} edges; "
                          "simulated time orders nothing.")))
        doc.append(Bullets(tuple(_why_items(trace, h, why))))
        if len(hs) > 1:
            items = []
            for x in [x for x in hs if x is not h][:MAX_OCCURRENCES]:
                xa, xb = trace.op(x.first), trace.op(x.second)
                items.append((t(f"{x.first_mode} ") + op_short(xa) + t(f" / {x.second_mode} ")
                                + op_short(xb) + t(", ", "manifest" if x.manifest else "latent"), ()))
            if len(hs) > 1 + MAX_OCCURRENCES:
                items.append((t(f"… and {len(hs) - 1 - MAX_OCCURRENCES} more of this root cause "
                                "(all in report.json)"), ()))
            doc.append(Para(t("Other instances:")))
            doc.append(Bullets(tuple(items)))
        if n_rc == 1:
            doc += _hb_picture(pictures)
    if k > MAX_EXPLAINED:
        doc.append(Para(t(f"The other {k - MAX_EXPLAINED} root causes are not explained here (the "
                          "first ones are, in the order of the table); report.json has every one, "
                          "with every instance.")))
    return doc


def _at(site) -> str:
    return f" ({site.location})" if site.location else ""


def _summary_table(r: Report) -> Table:
    f = r.findings
    rows = []
    for n, rc in enumerate(f.root_causes[:MAX_PATTERN_ROWS], 1):
        c = r.cost_of(n - 1)
        rows.append((t(str(n)), t(rc.kind), t(code(rc.buffer)),
                     t(code(rc.first.label), _at(rc.first)), t(code(rc.second.label), _at(rc.second)),
                     t(str(len(rc.instances))), t(str(rc.manifest)),
                     t(", ".join(map(str, rc.ranks))),
                     t(f"{c.makespan_change:+.1%}" if c is not None else "—")))
    if len(f.root_causes) > MAX_PATTERN_ROWS:
        more = f.root_causes[MAX_PATTERN_ROWS:]
        rows.append((t("…"), t(f"{len(more)} more root causes"), t(""), t(""), t(""),
                     t(str(sum(len(rc.instances) for rc in more))),
                     t(str(sum(rc.manifest for rc in more))), t(""), t("")))
    return Table(("#", "kind", "buffer", "first access", "second access", "instances",
                  "manifest", "ranks", "fix cost (makespan)"), tuple(rows))


def _win(why: Why, op_id: int) -> str:
    lo, hi = why.x_window if op_id == why.x else why.y_window
    return f"{lo:,.1f}, {hi:,.1f}"


def _hb_picture(pictures: Pictures | None) -> list[Block]:
    if pictures is None or pictures.hb is None:
        return [Para(t(pictures.missing_hb))] if pictures and pictures.missing_hb else []
    return [Image("hb", pictures.hb, "happens-before slice", t(pictures.hb_caption))]


def _deadlock(r: Report, pictures: Pictures | None) -> list[Block]:
    d = r.findings.deadlock
    if d is None:
        return []
    trace = r.trace
    rows = []
    for b in d.blocked:
        op = t("—") if b.op is None or not 0 <= b.op < len(trace.ops) else op_short(trace.op(b.op))
        rows.append((t(str(b.agent)), op, t(b.reason),
                     t(", ".join(map(str, b.waits_for)) or "—")))
    doc: list[Block] = [Heading(2, t("Deadlock")),
                        Para(t("The simulation stalled with these agents blocked for good:")),
                        Table(("agent", "blocked in", "reason", "waits for"), tuple(rows))]
    if d.cycle:
        doc.append(Para(t(bold("Wait-for cycle"), ": ",
                          code(" → ".join(map(str, d.cycle + d.cycle[:1]))))))
    else:
        doc.append(Para(t("No wait-for cycle: an agent waits for something that never comes.")))
    if not r.findings.hazards:
        doc += _hb_picture(pictures)
    return doc


def _warnings(r: Report) -> list[Block]:
    ws = r.findings.warnings
    if not ws:
        return []
    by_kind: dict[str, list] = {}
    for w in ws:
        by_kind.setdefault(w.kind, []).append(w)
    items = []
    for kind, group in by_kind.items():
        subs = tuple(t(w.message) for w in group[:MAX_WARNINGS])
        if len(group) > MAX_WARNINGS:
            subs += (t(f"… and {len(group) - MAX_WARNINGS} more {kind}"),)
        items.append((t(code(kind), f" ({len(group)})"), subs))
    return [Heading(2, t(f"Warnings ({len(ws)})")), Bullets(tuple(items))]


def _metrics(r: Report, pictures: Pictures | None) -> list[Block]:
    m = r.metrics
    rows = [("makespan", us(m.makespan_us))]
    rows += [("steps", str(m.steps)), ("mean step", us(m.mean_step_us)),
             ("p99 step", us(m.p99_step_us))] if m.steps else [("steps", NO_STEPS)]
    rows += [("pipeline bubble (compute idle)", f"{m.bubble_share:.1%}"),
             ("comm/compute overlap", f"{m.comm_overlap_share:.1%}")]
    rows.append(("peak memory (live bytes)", memory_line(m).split(": ", 1)[1]))
    if (c := r.fix_cost) is not None:
        rows.append(("makespan with the fixes", f"{us(c.after.makespan_us)} ({c.makespan_change:+.1%})"))
        if m.steps:
            rows.append(("mean step with the fixes", us(c.after.mean_step_us)))
    doc: list[Block] = [Heading(2, t("Timing")),
                        Table(("metric", "value"), tuple((t(k), t(v)) for k, v in rows))]
    if pictures is not None and pictures.timeline:
        doc.append(Image("timeline", pictures.timeline, "timeline", t(pictures.timeline_caption)))
    for note in (pictures.notes if pictures is not None else ()):
        doc.append(Para(t(note)))
    return doc
