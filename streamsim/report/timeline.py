"""Gantt chart of a run with matplotlib: one lane per rank × stream and host thread, ops coloured by
kind, the featured hazard's two access windows shaded red.

For long runs the chart keeps the steps within ``window`` of the featured hazard (or the whole run when
there is no hazard) and at most ``max_ops`` ops, nearest in time to the hazard, and says what it left
out. Host actions that take no simulated time are drawn as thin ticks so they stay visible.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .figures import new_figure
from .lanes import agent_label, lane_key
from ..analysis.findings import Hazard
from ..kinds import BY_AGENT, CATEGORIES, OP_KINDS
from ..analysis.metrics import format_bytes, memory_use
from ..analysis.slices import step_range
from ..trace import HOST, Op, Trace
from ..analysis.why import access_window, free_verdict

MAX_OPS = 3000
MAX_LANES = 48  # lanes drawn (a lane is an agent): 10,000 one-op ranks drew 20,000 lanes
WIDTH = 12.2  # inches: 1,171 px, shown at its natural size in the HTML report's 1,180 px column
TEXT_PT = 8.5  # the smallest text: 11.3 px at that size


def time_unit(span_us: float) -> tuple[str, float]:
    """The axis unit for a span of ``span_us`` microseconds and its size in µs: s, ms or µs."""
    if span_us >= 2e6:
        return "s", 1e6
    if span_us >= 2e3:
        return "ms", 1e3
    return "µs", 1.0

CATEGORY = CATEGORIES  # category -> (colour, legend text), from streamsim.kinds
_CATEGORY_OF = {k.name: k.category for k in OP_KINDS.values() if k.category != BY_AGENT}


def category(op: Op) -> str:
    """The colour category of ``op`` (see :data:`CATEGORY`): its kind's ``category`` in
    :mod:`streamsim.kinds`; for a kind drawn by where it runs (a kernel, host work) and a
    hand-built trace's own kind: ``host`` on a host thread, ``compute`` on a stream."""
    return _CATEGORY_OF.get(op.kind) or ("host" if op.agent.kind == HOST else "compute")


@dataclass(frozen=True)
class Selection:
    """The ops a chart shows and what it left out."""

    ops: tuple[Op, ...]
    notes: tuple[str, ...]


def select_ops(trace: Trace, hazard: Hazard | None, window: int | None = None,
               max_ops: int = MAX_OPS) -> Selection:
    """The ops to draw: within ``window`` steps of ``hazard``'s ops (all steps when ``window`` is None
    or there is no hazard), then the ``max_ops`` nearest in time to the hazard (or the first ones)."""
    ops = list(trace.ops)
    notes = []
    steps = step_range(trace, (hazard.first, hazard.second), window) \
        if window is not None and hazard is not None else None
    if steps is not None:
        known = [op.step for op in ops if op.step is not None]
        lo, hi = max(steps[0], min(known)), min(steps[1], max(known))
        keep = [op for op in ops if op.step is None or lo <= op.step <= hi]
        if len(keep) < len(ops):
            notes.append(f"steps {lo}–{hi} only (within {window} of the hazard)")
        ops = keep
    if len(ops) > max_ops:
        if hazard is not None:
            a, b = trace.op(hazard.first), trace.op(hazard.second)
            mid = (min(a.start, b.start) + max(a.end, b.end)) / 2
            ops = sorted(ops, key=lambda op: (abs((op.start + op.end) / 2 - mid), op.id))
        ops = sorted(ops[:max_ops], key=lambda op: op.id)
        notes.append(f"showing {max_ops:,} of {len(trace.ops):,} ops"
                     + (" (nearest in time to the hazard)" if hazard is not None else ""))
    agents = {op.agent for op in ops}
    if len(agents) > MAX_LANES:  # the hazard's ranks first, then in lane order
        ranks = {trace.op(h).agent.rank for h in (hazard.first, hazard.second)} if hazard else set()
        kept = set(sorted(agents, key=lambda a: (a.rank not in ranks, lane_key(a)))[:MAX_LANES])
        ops = [op for op in ops if op.agent in kept]
        notes.append(f"showing {MAX_LANES} of {len(agents):,} lanes"
                     + (" (the hazard's ranks first)" if hazard is not None else ""))
    return Selection(tuple(ops), tuple(notes))


def draw_timeline(trace: Trace, hazard: Hazard | None = None, *, title: str = "",
                  window: int | None = None, max_ops: int = MAX_OPS) -> Figure:
    """The Gantt chart of ``trace`` (see module); ``hazard`` is highlighted when given."""
    sel = select_ops(trace, hazard, window, max_ops)
    ops = sel.ops
    agents = sorted({op.agent for op in ops} | ({trace.op(hazard.first).agent,
                                                 trace.op(hazard.second).agent}
                                                if hazard is not None else set()), key=lane_key)
    row = {a: i for i, a in enumerate(agents)}
    t0 = min((op.start for op in ops), default=0.0)
    t1 = max((op.end for op in ops), default=1.0)
    span = max(t1 - t0, 1e-9)
    tick = span / 900  # the width drawn for an op that takes no simulated time

    cats = [category(op) for op in ops]
    used = set(cats)

    def blocked_wait(op, cat: str) -> bool:
        """A host thread blocked in a wait: drawn as a thin pale band (a legend entry of its own)."""
        return (op.agent.kind == HOST and cat != "host" and op.end - op.start > tick
                and not op.attrs.get("unfinished"))
    entries = len(used) + (trace.stall is not None) + (hazard is not None) + any(
        map(blocked_wait, ops, cats))
    rows = max(1, -(-entries // 6))  # legend rows of at most 6 entries, evenly filled
    ncol = max(1, -(-entries // rows))
    n = len(agents)
    split = hazard is not None and _access_line_too_long(trace, hazard)
    # the hazard's text (a line more when split) and the legend
    extra = (0.45 + 0.17 * split if hazard is not None else 0.0) + 0.2 * (rows - 1)
    # the title (wrapped: never clipped), and the notes on a line under it
    title_lines = textwrap.wrap(title or "timeline", int(WIDTH * 72 / (11 * 0.62)))
    head_h = 0.35 + 0.2 * len(title_lines) + (0.22 if sel.notes else 0.0)
    memory = memory_use(trace) if ops else None
    mem_h = MEMORY_H + 0.6 if memory is not None and memory.series else 0.0  # (its time axis)
    height = 1.45 + head_h + 0.42 * n + extra + mem_h
    fig = new_figure(WIDTH, height)
    bottom = (1.05 + extra + mem_h) / height
    ax = fig.add_axes((0.17, bottom, 0.81, 1 - bottom - head_h / height))
    ax.set_ylim(max(n, 1) - 0.5, -0.5)
    ax.set_xlim(t0 - span * 0.01, t1 + span * 0.01)
    ax.set_yticks(range(n), [agent_label(a) for a in agents], fontsize=TEXT_PT)
    unit, scale = time_unit(span)
    ax.set_xlabel(f"simulated time ({unit})", fontsize=9)
    ax.tick_params(axis="x", labelsize=TEXT_PT)
    locator = MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10])
    ax.xaxis.set_major_locator(locator)
    ticks = locator.tick_values(*ax.get_xlim())
    step = (ticks[1] - ticks[0]) / scale if len(ticks) > 1 else 1.0
    digits = next((d for d in range(7) if abs(round(step, d) - step) < 1e-9 * max(step, 1)), 6)
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{round(v / scale, digits) + 0.0:,.{digits}f}"))
    if span < 1e-6:  # nothing took simulated time (a run that stalled at once): one tick
        ax.set_xticks([t0])
    ax.grid(axis="x", color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)
    for i in range(n):
        if i % 2:
            ax.axhspan(i - 0.5, i + 0.5, color="#f6f6f8", zorder=0)

    h = 0.62
    label_min = span / 40  # wide enough to carry a name
    waited = False
    for op, cat in zip(ops, cats):
        y = row[op.agent]
        w = op.end - op.start
        stuck = bool(op.attrs.get("unfinished"))  # caught by a stall: blocked for good
        # A host thread blocked in a wait spends the run in one long op: a thin pale band, so
        # that the host's own work (ticks and full bars) stands out against it.
        blocked = blocked_wait(op, cat)
        waited |= blocked
        bh = 0.24 if blocked else h
        ax.add_patch(Rectangle((op.start, y - bh / 2), max(w, tick), bh, fc=CATEGORY[cat][0],
                               alpha=0.45 if blocked else 1.0,
                               ec="#d00000" if stuck else "white" if w > tick else
                               CATEGORY[cat][0], lw=1.6 if stuck else 0.4,
                               hatch="xx" if stuck else None, zorder=2))
        if w >= label_min:
            step = f" {op.when(short=True)}" if op.when() else ""
            chars = int(w / span * WIDTH * 0.81 * 72 / (TEXT_PT * 0.62))  # characters that fit
            text = ("waits: " if blocked else "") + f"{op.name}{step}"
            if len(text) > chars:
                text = text[:max(chars - 1, 1)] + "…"
            ax.text(op.start + w / 2, y - (0.3 if blocked else 0), text, ha="center",
                    va="center", fontsize=TEXT_PT, color="black" if stuck or blocked else "white",
                    zorder=3, clip_on=True,
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85)
                    if stuck else None)  # readable over the hatching

    if mem_h:
        _memory_panel(fig, ax, memory, (1.05 + extra) / height, MEMORY_H / height, t1, unit,
                      scale)
    if not ops:  # an empty op log, say: an empty chart that says so, not an error
        ax.text(0.5, 0.5, "no ops in this trace", transform=ax.transAxes, ha="center",
                va="center", fontsize=10, color="#666666")
    legend = [Patch(fc=CATEGORY[c][0], label=CATEGORY[c][1]) for c in CATEGORY if c in used]
    if waited:
        legend.append(Patch(fc="#b0b0b0",
                            label="host blocked waiting (thin band, colour of its kind)"))
    if trace.stall is not None:
        ax.axvline(trace.stall.time, color="#d00000", lw=1.2, ls="--", zorder=5)
        ax.text(trace.stall.time, -0.5, " stall", color="#d00000", fontsize=TEXT_PT, ha="right",
                va="bottom", fontweight="bold")
        legend.append(Patch(fc="white", ec="#d00000", hatch="xx", lw=1.6,
                            label="blocked when the run stalled"))
    if hazard is not None:
        _highlight(ax, trace, hazard, row, (0.42 + 0.2 * (rows - 1)) / height, split)
        legend.append(Patch(fc="#ff0000", alpha=0.25, ec="#d00000", hatch="///",
                            label="conflicting access windows"))
    fig.legend(handles=legend, loc="lower center", ncol=ncol, fontsize=TEXT_PT, frameon=False,
               bbox_to_anchor=(0.5, 0.04 / height))
    fig.suptitle("\n".join(title_lines), x=0.01, y=1 - 0.1 / height, ha="left", va="top", fontsize=11,
                 fontweight="bold")
    if sel.notes:
        fig.text(0.01, 1 - (0.16 + 0.2 * len(title_lines)) / height, "; ".join(sel.notes), ha="left", va="top",
                 fontsize=TEXT_PT, color="#8a4b00", style="italic")  # (not beside the title:
        # a long title ran into it)
    return fig


MEMORY_H = 1.25  # inches: the memory panel under the lanes


def _memory_panel(fig, ax, memory, bottom: float, height: float, t1: float, unit: str,
                  scale: float) -> None:
    """Live bytes per rank over the chart's time span: one step line a rank (the largest eight
    ranks' peaks when there are more), in the unit that reads best, under the lanes."""
    mx = fig.add_axes((0.17, bottom, 0.81, height), sharex=ax)
    peak = max(memory.peak.values(), default=0)
    size, name = next(((s, u) for s, u in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
                       if peak >= 2 * s), (1, "B"))
    ranks = sorted(memory.series, key=lambda r: (-memory.peak[r], r))[:8]
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f")
    for i, r in enumerate(sorted(ranks)):
        pts = memory.series[r]
        xs = [p[0] for p in pts] + [max(t1, pts[-1][0])]
        ys = [p[1] / size for p in pts] + [pts[-1][1] / size]
        mx.step(xs, ys, where="post", lw=1.4, color=colours[i % len(colours)],
                label=f"rank{r} (peak {format_bytes(memory.peak[r])})")
    mx.set_ylabel(f"live {name}", fontsize=TEXT_PT)
    mx.set_ylim(0, max(peak / size, 1e-9) * 1.5)  # (headroom: the legend sits over it)
    mx.tick_params(axis="both", labelsize=TEXT_PT)
    mx.set_xlabel(f"simulated time ({unit}); memory: live bytes of the buffers the run "
                  "allocates, per rank", fontsize=9)
    mx.grid(color="#e6e6e6", lw=0.6)
    mx.legend(loc="upper left", fontsize=TEXT_PT, ncol=min(len(ranks), 4), frameon=True,
              framealpha=0.85)
    mx.xaxis.set_major_formatter(ax.xaxis.get_major_formatter())
    if memory.note:  # what the lines cannot say (ranks that free nothing, ...), under the legend
        mx.text(0.995, 0.05, "\n".join(textwrap.wrap(memory.note, 120)), transform=mx.transAxes,
                ha="right", va="bottom", fontsize=TEXT_PT, color="#8a4b00", style="italic",
                bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85))


def _access_line_too_long(trace: Trace, hazard: Hazard) -> bool:
    """Whether "read by ... × write by ..." would run past the figure's width on one line (long
    op names): then each access gets a line of its own."""
    a, b = trace.op(hazard.first), trace.op(hazard.second)
    chars = len(a.name) + len(b.name) + len(str(a.agent)) + len(str(b.agent)) + 100  # the rest
    return chars > WIDTH * 72 / (TEXT_PT * 0.55)


def _highlight(ax, trace: Trace, hazard: Hazard, row: dict, text_y: float,
               split: bool = False) -> None:
    """Shade both access windows red on their lanes (at least a sliver wide, so a short access
    stays visible), label them, shade their overlap across the chart, and describe the hazard in
    two lines under the axis (three with ``split``: one an access; the text at figure height
    ``text_y``)."""
    a, b = trace.op(hazard.first), trace.op(hazard.second)
    wa = access_window(trace, a.id, hazard, hazard.first_mode)
    wb = access_window(trace, b.id, hazard, hazard.second_mode)
    x0, x1 = ax.get_xlim()
    sliver = (x1 - x0) / 250
    for n, (op, (lo, hi), mode) in enumerate(((a, wa, hazard.first_mode),
                                              (b, wb, hazard.second_mode)), 1):
        y = row[op.agent]
        w = max(hi - lo, sliver)
        ax.add_patch(Rectangle((lo, y - 0.5), w, 1.0, fc="#ff0000", alpha=0.25, ec="#d00000",
                               lw=1.4, hatch="///", zorder=4))
        right = lo + w < x0 + 0.8 * (x1 - x0)  # label on the side with room
        step = f" {op.when(short=True)}" if op.when() else ""
        ax.text(lo + w + sliver if right else lo - sliver, y - 0.5, f"{mode}{step}",
                ha="left" if right else "right", va="top", fontsize=TEXT_PT, color="#b00000",
                fontweight="bold", zorder=6,
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
    lo, hi = max(wa[0], wb[0]), min(wa[1], wb[1])
    if lo < hi:
        ax.axvspan(lo, hi, color="#ff0000", alpha=0.10, zorder=1)

    def who(op, mode: str, w: tuple[float, float]) -> str:
        step = f" ({op.when()})" if op.when() else ""
        return f"{mode} by {op.name}{step} on {op.agent} [{w[0]:,.0f}–{w[1]:,.0f} µs]"  # (exact)
    freed = free_verdict(trace, hazard, short=True)  # (a free is an instant: no overlap)
    verdict = ("latent: {:,.1f} µs apart in this run, but nothing orders them".format(lo - hi)
               if not hazard.manifest else f"MANIFEST: {freed}" if freed else
               "MANIFEST: the second access started before the first ended" +
               (f" (the windows overlap for {hi - lo:,.1f} µs)" if lo < hi else
                f" (it ended {lo - hi:,.1f} µs before the first began)"))
    fig = ax.figure
    line = 0.16 / fig.get_figheight()
    fig.text(0.5, text_y + line * (1 + split),
             f"{hazard.kind} on {hazard.buffer} (rank {hazard.rank}) — {verdict}", ha="center",
             va="bottom", fontsize=9, color="#b00000", fontweight="bold")
    first, second = who(a, hazard.first_mode, wa), who(b, hazard.second_mode, wb)
    for n, text in enumerate([f"{first}   ×", second] if split else [f"{first}   ×   {second}"]):
        fig.text(0.5, text_y + line * (split - n), text, ha="center", va="bottom",
                 fontsize=TEXT_PT, color="#b00000")
