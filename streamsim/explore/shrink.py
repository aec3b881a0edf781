"""Shrink a failing op log: delta debugging (Zeller's ddmin) over its op lines.

Given an op log in which a hazard appears, :func:`shrink` removes op lines while the same root
cause (kind, buffer, the labels of both sites: op names without a comm op's peer) still appears and
nothing appears that the original did not have (no new deadlock, no new kind of warning, such as an
unmatched send), and writes the smallest log found::

    >>> from streamsim.explore.shrink import shrink
    >>> res = shrink("failing.jsonl", "small.jsonl")
    >>> res.original_ops, res.ops
    (2000, 2)

ddmin works on units, not lines: a send and its matching receive (the k-th send from A to B in a
group and the k-th receive on B from A), and the k-th collective of a group on every rank, go or
stay together, so that a shrunk log never turns a race into an unmatched send or a deadlock.
A candidate keeps the file valid: a ``wait``/``query`` whose handle's op was removed is dropped with
it (a wait on an unknown handle is an error, not a schedule). A candidate that is still invalid, or
whose replay fails, counts as "does not reproduce". The result is 1-minimal for ddmin: removing any
single remaining unit loses the hazard (or the file's validity, or adds a finding). :func:`shrink_model` dumps a model
run as an op log first (``streamsim.oplog.dump_oplog``; it keeps the run's exact durations), so a
hazard found by ``explore`` can be shrunk from its seed.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..sim.errors import ModelError
from ..kinds import COLLECTIVE_KINDS, kinds_where
from ..gcpause import pipeline_entry
from ..pipeline import strategies

HazardKey = tuple  # (kind, buffer, first op name, second op name)


@dataclass(frozen=True)
class ShrinkResult:
    """What :func:`shrink` did."""

    source: str
    output: str
    hazard: HazardKey  # (kind, buffer, first op name, second op name)
    manifest: bool  # the hazard manifests in the shrunk log
    original_ops: int
    ops: int
    kept_lines: tuple[int, ...]  # line numbers in the source (1-based)
    tests: int  # candidate logs simulated


def _key(h: Any) -> HazardKey:
    """A root cause given as a 4-tuple or any object with kind, buffer, first, second labels."""
    if isinstance(h, (tuple, list)) and len(h) == 4:
        return tuple(h)
    try:
        return (h.kind, h.buffer, h.first, h.second)
    except AttributeError:
        raise ModelError(f"root cause {h!r}: expected (kind, buffer, first op name, "
                         "second op name)") from None


def hazard_keys(trace) -> dict[HazardKey, bool]:
    """The trace's root causes as ``(kind, buffer, first site's label, second site's label)`` in
    report order -> whether an instance manifested."""
    return _outcome(trace)[0]


def _outcome(trace) -> tuple[dict[HazardKey, bool], bool, frozenset[str]]:
    """Root-cause keys (see :func:`hazard_keys`), whether it deadlocks, its kinds of warning."""
    from ..analysis.checks import analyse
    f = analyse(trace)
    out: dict[HazardKey, bool] = {}
    for rc in f.root_causes:
        k = (rc.kind, rc.buffer, rc.first.label, rc.second.label)
        out[k] = out.get(k, False) or rc.manifest > 0
    return out, f.deadlock is not None, frozenset(w.kind for w in f.warnings)


class _Candidates:
    """The op lines of a log, and how to test a subset of them."""

    def __init__(self, text: str, path: str, seed, jitter, max_ops, max_time, empty_ok: bool):
        from ..oplog import parse_oplog
        from ..oplog.source import split_lines
        self.path, self.opts = path, dict(seed=seed, jitter=jitter, max_ops=max_ops,
                                          max_time=max_time)
        self.raw = split_lines(text)  # (the reader's lines: its line numbers)
        oplog = parse_oplog(text, path, empty_ok=empty_ok)  # the original must be valid: errors
        # are the user's
        self.oplog = oplog
        self.lines = [ln.lineno for ln in oplog.lines]  # op lines, in file order
        self.needs = {ln.lineno: ln.target for ln in oplog.lines if ln.target is not None}
        self.units = _units(oplog)
        self.tests = 0
        self.cache: dict[tuple[int, ...], bool] = {}

    def repair(self, keep: Iterable[int]) -> tuple[int, ...]:
        """Drop waits/queries whose handle's op is not kept."""
        kept = set(keep)
        return tuple(n for n in sorted(kept) if self.needs.get(n, n) in kept)

    def text(self, keep: Sequence[int], compact: bool = False) -> str:
        """The log with only lines ``keep`` (blanked elsewhere, so line numbers stay put)."""
        kept = set(keep)
        if compact:
            return "\n".join(self.raw[n - 1] for n in sorted(kept)) + "\n"
        return "\n".join(s if i in kept else "" for i, s in enumerate(self.raw, 1))

    @pipeline_entry  # one candidate's run; the collector frees its cycles before the next
    def outcome(self, keep: Sequence[int]):
        """:func:`_outcome` of the log restricted to ``keep``; None when it is invalid or fails."""
        from ..oplog import parse_oplog, simulate_oplog
        try:
            trace = simulate_oplog(parse_oplog(self.text(keep), self.path), **self.opts)
            return _outcome(trace)
        except ModelError:
            return None

    def hazards(self, keep: Sequence[int]) -> dict[HazardKey, bool] | None:
        """Root-cause keys of the log restricted to ``keep``; None when it is invalid or fails."""
        got = self.outcome(keep)
        return None if got is None else got[0]


def _units(oplog) -> list[tuple[int, ...]]:
    """The op lines in units that go or stay together: a send with its matching receive, the k-th
    collective of a group on every rank; every other line alone. In file order of first lines."""
    sends, recvs = kinds_where(direction="send"), kinds_where(direction="recv")
    unit_of: dict[tuple, list[int]] = {}
    count: dict[tuple, int] = {}
    units: list[list[int]] = []
    for ln in oplog.lines:
        if ln.op in sends or ln.op in recvs:
            is_send = ln.op in sends
            src, dst = (ln.rank, ln.peer) if is_send else (ln.peer, ln.rank)
            side = (ln.group, src, dst, is_send)
            k = count.get(side, 0)
            count[side] = k + 1
            key: tuple = ("p2p", ln.group, src, dst, k)
        elif ln.op in COLLECTIVE_KINDS:
            side = (ln.group, ln.rank)
            k = count.get(side, 0)
            count[side] = k + 1
            key = ("collective", ln.group, k)
        else:
            units.append([ln.lineno])
            continue
        unit = unit_of.get(key)
        if unit is None:
            unit = unit_of[key] = []
            units.append(unit)
        unit.append(ln.lineno)
    return [tuple(u) for u in units]


def ddmin(items: Sequence, test: Callable[[Sequence], bool],
          on_progress: Callable[[int], None] | None = None) -> list:
    """Zeller and Hildebrandt's ddmin: a 1-minimal subsequence of ``items`` for which ``test`` holds
    (``test(items)`` must hold). Tries each of n chunks, then each complement, then doubles n."""
    items = list(items)
    n = 2
    while len(items) >= 2:
        size = len(items) / n
        chunks = [items[round(i * size):round((i + 1) * size)] for i in range(n)]
        chunks = [c for c in chunks if c]
        for c in chunks:
            if test(c):
                items, n = c, 2
                break
        else:
            for i in range(len(chunks)):
                rest = [x for j, c in enumerate(chunks) if j != i for x in c]
                if test(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), 2 * n)
                continue
        if on_progress is not None:
            on_progress(len(items))
    return items


def _choose(found: dict[HazardKey, bool], hazard_pattern, hazard_index: int | None, where: str,
            require_manifest: bool) -> HazardKey:
    if not found:
        raise ModelError(f"{where}: no data hazard to shrink")
    if hazard_pattern is not None:
        key = _key(hazard_pattern)
        if key not in found:
            raise ModelError(f"{where}: no hazard {key[0]} on {key[1]!r} between {key[2]!r} and "
                             f"{key[3]!r}")
    elif hazard_index is None:  # the first one (that manifests, when that is required)
        key = next((k for k, m in found.items() if m or not require_manifest), None)
        if key is None:
            raise ModelError(f"{where}: no hazard manifests (every one is latent)")
    else:
        keys = list(found)
        if not 1 <= hazard_index <= len(keys):
            raise ModelError(f"hazard {hazard_index}: {where} has {len(keys)} root cause"
                             f"{'s' * (len(keys) != 1)}", arguments=("hazard",))
        key = keys[hazard_index - 1]
    if require_manifest and not found[key]:
        raise ModelError(f"{where}: hazard {key[0]} on {key[1]!r} is latent, not manifest")
    return key


def shrink_text(text: str, path: str, out_path: str, hazard_pattern=None, *,
                hazard_index: int | None = None, require_manifest: bool = False,
                seed: int | None = None, jitter: float = 0.0, max_ops: int = 5_000_000,
                max_time: float = 1e12, progress: bool = False,
                source: str | None = None) -> ShrinkResult:
    """:func:`shrink` on op-log text (``path`` names its lines; ``source``, when the text was
    dumped from a model's run, names that run in messages instead)."""
    from ..report.atomic import write_atomic
    cands = _Candidates(text, path, seed, jitter, max_ops, max_time, empty_ok=source is not None)
    everything = tuple(cands.lines)
    original = cands.outcome(everything)
    if original is None:  # replay the original once more to raise its own error
        from ..oplog import simulate_oplog
        simulate_oplog(cands.oplog, **cands.opts)
        raise ModelError(f"{source or path}: the op log cannot be replayed")
    found, deadlocks, warning_kinds = original
    key = _choose(found, hazard_pattern, hazard_index, source or path, require_manifest)

    def test(units: Sequence[tuple[int, ...]]) -> bool:
        keep = cands.repair(n for u in units for n in u)
        hit = cands.cache.get(keep)
        if hit is None:
            cands.tests += 1
            got = cands.outcome(keep)
            hit = cands.cache[keep] = (
                got is not None and key in got[0] and (got[0][key] or not require_manifest)
                and (deadlocks or not got[1]) and got[2] <= warning_kinds)
        return hit

    bar = None
    if progress and sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=len(cands.units), desc="shrink", unit="unit", file=sys.stderr,
                   leave=False)
    last = [len(cands.units)]

    def on_progress(n: int) -> None:
        if bar is not None:
            bar.update(last[0] - n)
            bar.set_postfix(units=n, tests=cands.tests)
        last[0] = n

    try:
        kept = cands.repair(n for u in ddmin(cands.units, test, on_progress) for n in u)
    finally:
        if bar is not None:
            bar.close()
    final = cands.hazards(kept)
    manifest = bool(final and final.get(key))
    origin = source or os.path.basename(path)  # a model's run is no file: name the run
    lines = "lines of its op-log dump" if source else "source lines"
    header = (f"# shrunk by streamsim from {origin} ({len(everything)} ops) to "
              f"{len(kept)} ops: {key[0]} on {key[1]!r} between {json.dumps(key[2])} and "
              f"{json.dumps(key[3])}; {lines} {', '.join(map(str, kept))}\n")
    write_atomic(out_path, header + cands.text(kept, compact=True))
    return ShrinkResult(source=source or path, output=out_path, hazard=key, manifest=manifest,
                        original_ops=len(everything), ops=len(kept), kept_lines=kept,
                        tests=cands.tests)


def shrink(oplog_path: str, out_path: str, hazard_pattern=None, *,
           hazard_index: int | None = None, require_manifest: bool = False,
           seed: int | None = None, jitter: float = 0.0, max_ops: int = 5_000_000,
           max_time: float = 1e12, progress: bool = False) -> ShrinkResult:
    """Delta-debug the op log at ``oplog_path`` down to the lines that keep one hazard; write it.

    ``hazard_pattern``: ``(kind, buffer, first op name, second op name)`` (or an
    :class:`streamsim.explore.hunt.Pattern`); default: the ``hazard_index``-th pattern of the log
    (1-based, first-seen order), else the first one (the first manifest one with
    ``require_manifest``). ``require_manifest``: the hazard must also stay manifest.
    ``seed``/``jitter``: the timing every candidate is replayed with.
    """
    from ..oplog.source import read_oplog_bytes
    data = read_oplog_bytes(oplog_path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelError(f"{oplog_path}: not valid UTF-8 (byte {e.start + 1})") from None
    return shrink_text(text, oplog_path, out_path, hazard_pattern, hazard_index=hazard_index,
                       require_manifest=require_manifest, seed=seed, jitter=jitter,
                       max_ops=max_ops, max_time=max_time, progress=progress)


def shrink_model(model, out_path: str, variant: str | None = None,
                 params: Mapping[str, Any] | Iterable[str] = (), hazard_pattern=None, *,
                 hazard_index: int | None = None, require_manifest: bool = False,
                 seed: int | None = None, jitter: float = 0.0, strategy: str = strategies.DEFAULT,
                 depth: int = 2, max_ops: int = 5_000_000, max_time: float = 1e12,
                 progress: bool = False) -> ShrinkResult:
    """Run a model (as ``streamsim run`` would, strategy included), dump it as an op log, and
    :func:`shrink` that. The dump keeps the run's exact durations, so candidates replay without
    jitter."""
    from ..pipeline.strategies import perturb_for
    from ..sim.model import load_model
    from ..oplog import oplog_text
    from ..sim.runner import simulate
    model = load_model(model) if isinstance(model, str) else model
    variant = model.check_variant(variant)
    values = model.resolve(params)
    perturb = perturb_for(model, variant, values, strategy=strategy, depth=depth, seed=seed,
                          jitter=jitter, max_ops=max_ops, max_time=max_time)
    trace = simulate(model, variant, values, seed=seed, jitter=jitter, max_ops=max_ops,
                     max_time=max_time, perturb=perturb)
    label = f"{os.path.splitext(model.path)[0]}.{variant}.jsonl"
    return shrink_text(oplog_text(trace), label, out_path, hazard_pattern,
                       hazard_index=hazard_index, require_manifest=require_manifest,
                       max_ops=max_ops, max_time=max_time, progress=progress,
                       source=f"{model.path} [{variant}]")


def render_shrink(res: ShrinkResult) -> str:
    kind, buffer, first, second = res.hazard
    return (f"shrunk {res.source}: {res.original_ops} ops -> {res.ops} ops in {res.tests} tests; "
            f"{kind} on {buffer!r} between {first!r} and {second!r} "
            f"({'manifest' if res.manifest else 'latent'}) still appears\nwrote {res.output}\n")
