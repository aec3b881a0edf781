"""Draw an HB slice (a hazard's or a deadlock's, see :mod:`streamsim.analysis.slices`) with matplotlib.

Layout: one horizontal lane per rank × agent ("rank0 / compute", "rank0 / main (host)"); inside a
lane the ops run left to right in program order, and every HB edge points right (columns are a
longest-path layering of the slice, so the picture reads as time flowing left to right without
piling up the many host actions that take no simulated time). Edges are styled by kind (program order
thin grey, enqueue dotted, the sync kinds coloured, see :data:`EDGE_STYLE` and the legend); the two
conflicting ops and the missing edge are red. Pictures are capped at ``max_nodes`` ops, nearest to the
finding first, and say so.
"""
from __future__ import annotations

import re
import textwrap
from collections import defaultdict
from typing import Mapping

import networkx as nx
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch
from matplotlib.transforms import ScaledTranslation

from .figures import new_figure
from ..analysis.findings import Fix
from .lanes import agent_label, lane_key
from ..analysis.slices import MAX_NODES, cap_nodes
from ..trace import HOST, Agent, Trace

# kind -> (colour, line style, width, legend text)
EDGE_STYLE: dict[str, tuple[str, str, float, str]] = {
    "program": ("#9a9a9a", "-", 0.9, "program order"),
    "enqueue": ("#8c8c8c", ":", 1.0, "enqueue (host → stream)"),
    "nccl_enqueue": ("#e07b00", "-", 1.6, "NCCL enqueue (comm waits on current stream)"),
    "event": ("#1f5fbf", "-", 1.6, "event wait"),
    "handle": ("#1a9641", "-", 1.8, "handle wait"),
    "message": ("#7b3294", "--", 1.6, "message (send → recv end)"),
    "collective": ("#c51b7d", "--", 1.6, "collective"),
    "host_sync": ("#8c510a", "-", 1.6, "host sync"),
    "query": ("#01858a", "-", 1.4, "is_completed() True"),
    "record_stream": ("#6b8e23", "-", 1.4, "record_stream"),
    "handoff": ("#5e3c99", "-", 1.6, "hand-off (put → get)"),
    "waits_for": ("#d00000", "--", 2.2, "waits for (deadlock)"),
    "missing": ("#d00000", "--", 2.4, "missing edge (the fix)"),
}
_FILL = {"host": "#eeeeee", "stream": "#dbe9f8", "comm": "#e9def3"}
_RED_FILL = "#ffd2d2"

COL_W = 1.45  # inches per column: a box holds 16 characters of 9-point text a line
LANE_H = 1.2  # inches per lane: a box holds a tag, three name lines and the step line
LEGEND_MAX_COLUMNS = 4  # entries a legend row: a row of 4 is about 900 px at the page's scale
NODE_PT = 9  # node text: 12 px when the SVG is shown at its natural size (HTML report)
NAME_CHARS = 16  # characters a line of a node's name
NAME_LINES = 3
LABEL_W = 1.9  # inches for lane labels (at least; more for long agent names)
LABEL_CHAR_W = 0.09  # inches per character of a bold 10-point lane label (DejaVu Sans, generous)


def short_fix(trace: Trace, fix: Fix | None) -> str:
    """A few words for the missing edge's label: what to add and where."""
    if fix is None:
        return "no single sync orders them"
    before = trace.op(fix.before)
    where = f"before {before.name}" + (f" ({before.when()})" if before.when() else "")
    if fix.kind == "wait_handle" and fix.handle_op is not None:
        return f"wait({trace.op(fix.handle_op).handle}) {where}"
    if fix.kind == "event" and fix.event_stream and fix.wait_stream:
        return f"event {fix.event_stream.name} → {fix.wait_stream.name} {where}"
    if fix.kind == "event_sync" and fix.event_stream:
        return f"event on {fix.event_stream.name} + synchronize {where}"
    if fix.kind == "record_stream" and fix.event_stream:
        return f"record_stream({fix.event_stream.name}) {where}"
    if fix.kind == "handoff" and fix.record_after is not None:
        return f"put on {trace.op(fix.record_after).agent.name}, get {where}"
    return fix.text[:60]


def _columns(graph: nx.DiGraph, trace: Trace, lanes: Mapping[int, Agent]) -> dict[int, int]:
    """Longest-path layering over the real edges plus lane order (ops of one lane strictly left to
    right even when the ops between them are not drawn)."""
    dag = nx.DiGraph()
    dag.add_nodes_from(graph)
    dag.add_edges_from((u, v) for u, v, k in graph.edges(data="kind")
                       if k not in ("missing", "waits_for"))
    per_lane: dict[Agent, list[int]] = defaultdict(list)
    for x in graph:
        per_lane[lanes[x]].append(x)
    for xs in per_lane.values():
        xs.sort(key=lambda x: trace.op(x).index)
        dag.add_edges_from(zip(xs, xs[1:]))
    if not nx.is_directed_acyclic_graph(dag):  # only for traces cut by a stall; fall back to seq
        order = sorted(graph, key=lambda x: trace.op(x).start_seq)
        return {x: i for i, x in enumerate(order)}
    col: dict[int, int] = {}
    for x in nx.lexicographical_topological_sort(dag, key=lambda x: trace.op(x).start_seq):
        col[x] = max((col[p] + 1 for p in dag.predecessors(x)), default=0)
    return col


_BREAKS = re.compile(r"[(\[]?[^\s(_.,/\[]*(?:[\s_.,/]+|(?=[(\[])|$)")


def wrap_name(name: str, width: int = NAME_CHARS, lines: int = NAME_LINES) -> list[str]:
    """``name`` in lines of at most ``width`` characters, broken after a space, ``_``, ``.``,
    ``,`` or ``/`` and before a ``(`` (``launch forward`` / ``(CUDA graph``), a word longer than a
    line split anywhere; a name those breaks would spill past ``lines`` lines but that fits them
    split anywhere is split anywhere; only a name longer than ``lines`` full lines ends in "…"."""
    pieces = [p for p in _BREAKS.findall(name) if p]
    out: list[str] = []
    for piece in pieces:
        while len(piece) > width:  # a word longer than a line
            if out and len(out[-1]) < width:
                room = width - len(out[-1])
                out[-1], piece = out[-1] + piece[:room], piece[room:]
            else:
                out.append(piece[:width])
                piece = piece[width:]
        if out and len(out[-1].rstrip()) + len(piece.rstrip()) <= width:
            out[-1] += piece
        elif piece.strip():
            out.append(piece)
    out = [ln.strip() for ln in out if ln.strip()]
    if len(out) > lines and len(name) <= width * lines:  # whole, if not at the nicest breaks
        out = [ln.strip() for ln in (name[i:i + width] for i in range(0, len(name), width))]
    if len(out) > lines:
        out = out[:lines - 1] + [out[lines - 1][:width - 1] + "…"]
    return out


def _label(trace: Trace, x: int) -> str:
    op = trace.op(x)
    name = "\n".join(wrap_name(op.name))
    step = f"step {op.step} · " if op.step is not None else ""
    if op.microbatch is not None:
        step += f"mb {op.microbatch} · "
    if op.line is not None:  # an op log: its line is how the user finds the op
        step += f"line {op.line} · "
    return f"{name}\n{step}#{op.id}"


def _border(c: tuple[float, float], toward: tuple[float, float], half: tuple[float, float]
            ) -> tuple[float, float]:
    """Where the segment from box centre ``c`` toward ``toward`` leaves the box (half-sizes
    ``half``). Computed here rather than by matplotlib's patch clipping, which costs seconds."""
    dx, dy = toward[0] - c[0], toward[1] - c[1]
    if dx == 0 and dy == 0:
        return c
    f = min(half[0] / abs(dx) if dx else float("inf"), half[1] / abs(dy) if dy else float("inf"))
    return c[0] + f * dx, c[1] + f * dy


def _arc_points(p: tuple[float, float], q: tuple[float, float], rad: float,
                n: int = 24) -> list[tuple[float, float]]:
    """Points along matplotlib's ``arc3,rad=rad`` from p to q (data units; the curve is bent in
    inches, where arc3 bends it: a column is COL_W wide, a lane LANE_H high, y points down)."""
    (x1, y1), (x2, y2) = (p[0] * COL_W, -p[1] * LANE_H), (q[0] * COL_W, -q[1] * LANE_H)
    cx, cy = (x1 + x2) / 2 + rad * (y2 - y1), (y1 + y2) / 2 - rad * (x2 - x1)
    out = []
    for i in range(n + 1):
        t = i / n
        x = (1 - t) ** 2 * x1 + 2 * (1 - t) * t * cx + t ** 2 * x2
        y = (1 - t) ** 2 * y1 + 2 * (1 - t) * t * cy + t ** 2 * y2
        out.append((x / COL_W, -y / LANE_H))
    return out


def _route(p: tuple[float, float], q: tuple[float, float], boxes: list[tuple[float, float]],
           half: tuple[float, float]) -> tuple[float, list[tuple[float, float]]]:
    """The least bent ``arc3`` from p to q that crosses no box centred at ``boxes`` (half-sizes
    ``half``), and its points; the one crossing the fewest boxes when every bend crosses one."""
    def hits(points: list[tuple[float, float]]) -> int:
        return sum(any(abs(x - bx) < half[0] and abs(y - by) < half[1] for x, y in points[1:-1])
                   for bx, by in boxes)
    best = None
    for rad in (0.0, 0.15, -0.15, 0.3, -0.3, 0.45, -0.45, 0.6, -0.6):
        points = _arc_points(p, q, rad)
        n = hits(points)
        if n == 0:
            return rad, points
        if best is None or n < best[0]:
            best = (n, rad, points)
    return best[1], best[2]


def _label_spot(along: list[tuple[float, float]], size: tuple[float, float],
                centres: list[tuple[float, float]], half: tuple[float, float],
                limits: tuple[float, float, float, float]) -> tuple[float, float]:
    """Where to centre a label of ``size`` (data units) for the edge drawn through the points
    ``along``: of the spots whose box overlaps no node box and stays inside ``limits`` (x0, x1,
    y0, y1), the nearest to the edge's middle, a spot that covers the edge counting as two columns
    farther (a node's text matters more than a stretch of the edge); else the middle."""
    mx, my = along[len(along) // 2]
    w, h = size[0] / 2 + 0.03, size[1] / 2 + 0.03

    def inside_and_off_nodes(x: float, y: float) -> bool:
        if x - w < limits[0] or x + w > limits[1] or y - h < limits[2] or y + h > limits[3]:
            return False
        return not any(abs(x - cx) < w + half[0] and abs(y - cy) < h + half[1]
                       for cx, cy in centres)

    def off_the_edge(x: float, y: float) -> bool:
        return not any(abs(x - ax) < w and abs(y - ay) < h for ax, ay in along)

    def cost(s: tuple[float, float]) -> tuple[float, tuple[float, float]]:
        # distance from the middle (a lane counts double), plus two columns' worth for lying on
        # the edge: a near spot on the edge beats a far one that needs a long leader line
        near = (s[0] - mx) ** 2 + (2 * (s[1] - my)) ** 2
        return (near + (0 if off_the_edge(*s) else 4.0), s)

    spots = [(mx + dx * 0.25, my + dy * 0.25) for dx in range(-40, 41) for dy in range(-12, 13)]
    free = [s for s in spots if inside_and_off_nodes(*s)]
    return min(free, key=cost) if free else (mx, my)


def draw_hb(graph: nx.DiGraph, trace: Trace, *, title: str = "",
            tags: Mapping[int, str] | None = None, missing_label: str = "",
            max_nodes: int = MAX_NODES, note: str = "") -> Figure:
    """A figure of ``graph`` (an HB slice: node ids are op ids of ``trace``, node attribute ``role``
    first/second/blocked/context, edge attribute ``kind``). ``tags`` puts a red first line in a
    node's box (e.g. ``{5: "WRITE"}``); ``missing_label`` labels the missing edge; ``note`` is a
    line under the picture (so is the count of ops left out when there are more than
    ``max_nodes``)."""
    tags = tags or {}
    focus = [x for x, r in graph.nodes(data="role") if r in ("first", "second", "blocked")]
    g, dropped = cap_nodes(graph, focus, max_nodes)
    notes = [note] if note else []
    if dropped:
        notes.append(f"showing {g.number_of_nodes()} of {graph.number_of_nodes()} ops "
                     f"(those nearest to the finding); see hb.dot for all")
    lanes = {x: trace.op(x).agent for x in g}
    lane_list = sorted(set(lanes.values()), key=lane_key)
    row = {a: i for i, a in enumerate(lane_list)}
    col = _columns(g, trace, lanes)
    ncols = max(col.values(), default=0) + 1
    label_w = max([LABEL_W] + [0.3 + LABEL_CHAR_W * len(agent_label(a)) for a in lane_list])
    width = label_w + max(ncols, 5) * COL_W + 0.4
    order = list(EDGE_STYLE)
    kinds = sorted({k for _, _, k in g.edges(data="kind", default="program")},
                   key=lambda k: order.index(k) if k in order else len(order))
    handles = [Line2D([], [], color=EDGE_STYLE[k][0], ls=EDGE_STYLE[k][1], lw=EDGE_STYLE[k][2],
                      label=EDGE_STYLE[k][3]) for k in kinds if k in EDGE_STYLE]
    if any(r in ("first", "second", "blocked") for _, r in g.nodes(data="role", default="")):
        handles.append(Patch(fc=_RED_FILL, ec="#d00000", lw=2, label="conflicting / blocked op"))
    # an entry takes about 3 inches; at most 4 a row, so that the legend, which report.html
    # pins below the box that scrolls, fits the page's width at its natural size
    ncol = max(1, min(len(handles), LEGEND_MAX_COLUMNS, int((width - 0.3) / 3.2)))
    legend_rows = -(-len(handles) // ncol)
    height = len(lane_list) * LANE_H + 1.0 + 0.28 * (legend_rows + len(notes))
    fig = new_figure(width, height)
    top = 1 - 0.62 / height
    bottom = (0.28 * (legend_rows + len(notes)) + 0.25) / height
    ax = fig.add_axes((label_w / width, bottom, 1 - (label_w + 0.2) / width, top - bottom))
    ax.set_xlim(-0.6, max(ncols, 5) - 0.4)
    ax.set_ylim(max(len(lane_list), 1) - 0.5, -0.5)  # (an empty trace has no lane)
    ax.axis("off")

    # labels end 0.15 inch left of the lanes, whatever the width (an axes fraction grew with it
    # and pushed wide pictures' labels off the left edge)
    beside = ax.transAxes + ScaledTranslation(-0.15, 0, fig.dpi_scale_trans)
    for a, i in row.items():  # lane bands and labels
        ax.axhspan(i - 0.5, i + 0.5, color="#f7f7f9" if i % 2 else "#ffffff", zorder=0)
        ax.text(0, (len(lane_list) - 0.5 - i) / len(lane_list), agent_label(a),
                transform=beside, ha="right", va="center", fontsize=10,
                fontweight="bold" if a.kind == HOST else "normal",
                gid=f"lane-label-{i}")  # (report.html keeps these in a column of their own)
        ax.axhline(i, color="#dddddd", lw=0.6, zorder=0.5)

    bw, bh = 0.88, 0.76  # box size in data units (columns, lanes)
    for x in g:
        cx, cy = col[x], row[lanes[x]]
        a = lanes[x]
        red = g.nodes[x].get("role", "context") in ("first", "second", "blocked")
        fill = _RED_FILL if red else \
            _FILL["host" if a.kind == HOST else "comm" if a.is_comm else "stream"]
        box = FancyBboxPatch((cx - bw / 2, cy - bh / 2), bw, bh,
                             boxstyle="round,pad=0.0,rounding_size=0.08", fc=fill,
                             ec="#d00000" if red else "#707070", lw=2.2 if red else 0.8, zorder=3)
        if red:  # an SVG id the HTML report scrolls to (first/second/blocked, then the op id)
            box.set_gid(f"focus-{g.nodes[x].get('role')}-{x}")
        ax.add_patch(box)
        if x in tags:  # what the conflicting op does, in red on the box's first line
            ax.text(cx, cy - bh / 2 + 0.04, tags[x], ha="center", va="top", fontsize=NODE_PT,
                    color="#b00000", fontweight="bold", zorder=4)
        ax.text(cx, cy + (0.07 if x in tags else 0.0), _label(trace, x), ha="center",
                va="center", fontsize=NODE_PT, zorder=4, linespacing=1.1)

    brackets = 0  # waits_for edges drawn as brackets so far (each one a little wider)
    for u, v, d in g.edges(data=True):
        kind = d.get("kind", "program")
        color, ls, lw, _ = EDGE_STYLE.get(kind, ("#444444", "-", 1.0, kind))
        same_lane = row[lanes[u]] == row[lanes[v]]
        red = kind in ("missing", "waits_for")
        # Same lane: straight (no box of the lane lies between consecutive ops); across lanes a
        # slight arc, so that edges between the same lanes do not lie on top of each other.
        rad = 0.0 if same_lane or red or kind == "enqueue" else 0.12  # (enqueue: the
        # shortest line, drawn light, rather than an arc sweeping across the lanes between)
        pu, pv = (col[u], row[lanes[u]]), (col[v], row[lanes[v]])
        half = (bw / 2 + 0.01, bh / 2 + 0.02)
        curve = [pu, pv]
        if kind == "missing":  # around the boxes between the two ops, never through one
            others = [(col[n], row[lanes[n]]) for n in g if n not in (u, v)]
            rad, curve = _route(pu, pv, others, (bw / 2 + 0.04, bh / 2 + 0.04))
        toward_u, toward_v = (curve[1], curve[-2]) if rad else (pv, pu)
        a, b = _border(pu, toward_u, half), _border(pv, toward_v, half)
        style = f"arc3,rad={rad}"
        if kind == "waits_for" and col[u] == col[v] and abs(row[lanes[u]] - row[lanes[v]]) > 1:
            # Blocked ops often share a column: a straight edge would run through the boxes
            # between them, so leave from the right side and come back as a bracket, each one
            # wider than the last.
            a, b = (pu[0] + bw / 2, pu[1]), (pv[0] + bw / 2, pv[1])
            arm = 14 + 12 * brackets
            brackets += 1
            style = f"arc,angleA=0,angleB=0,armA={arm},armB={arm},rad=6"
        arrow = FancyArrowPatch(posA=a, posB=b, arrowstyle="-|>",
                                mutation_scale=12 if red else 9,
                                connectionstyle=style, color=color, lw=lw,
                                linestyle=ls, zorder=8 if red else 2, shrinkA=0, shrinkB=0)
        ax.add_patch(arrow)
        if kind == "missing" and missing_label:
            text = f"missing: {missing_label}"
            size = (len(text) * 5.6 / 72 / COL_W, 17 / 72 / LANE_H)  # label box, data units
            centres = [(col[n], row[lanes[n]]) for n in g]
            spot = _label_spot(curve, size, centres, (bw / 2, bh / 2),
                               (-0.5, max(ncols, 5) - 0.5, -0.5, len(lane_list) - 0.5))
            ax.annotate(text, curve[len(curve) // 2], xytext=spot,
                        textcoords="data", ha="center", va="center", fontsize=9,
                        color="#b00000", fontweight="bold", zorder=9,
                        bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="#d00000", lw=1),
                        arrowprops=dict(arrowstyle="-", color="#d00000", lw=0.8, ls=":"))

    # (report.html pins the title, the legend and the notes outside the box that scrolls, in the
    # order of their ids' numbers)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, (0.28 * len(notes) + 0.05) / height)).set_gid("pinned-below-0")
    if title:
        fig.suptitle("\n".join(textwrap.wrap(title, int(width * 7.5))), x=0.01,
                     y=1 - 0.12 / height, ha="left", va="top", fontsize=13, fontweight="bold",
                     gid="pinned-above")
    for i, n in enumerate(notes):
        fig.text(0.01, (0.28 * (len(notes) - 1 - i) + 0.08) / height, n, fontsize=9.5,
                 color="#8a4b00", ha="left", va="bottom", style="italic", gid=f"pinned-below-{i + 1}")
    return fig
