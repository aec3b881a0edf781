"""The optional compiled core: which path runs, and the one entry of each compiled stage.

``setup.py`` builds :mod:`streamsim.native._hb` (Cython) where a C compiler exists; where none
does, or with ``STREAMSIM_NATIVE=0`` in the environment, every stage runs its pure-Python
reference. A compiled stage is held byte-identical to its reference by a differential test
(tests/native), as CPython keeps ``_pickle`` equal to ``pickle.py``; so which path ran is no part
of any report, and :func:`available` is how to ask (docs/native.md).

A compiled stage covers the op kinds of :data:`COVERED_KINDS` only: a trace with any other kind
(one added to :mod:`streamsim.kinds` after the compiled code was written) takes the pure-Python
path, never a guess.

One module because it is the one door between the pipeline and the compiled modules: each
function here is a stage's entry, a few lines that decide whether the compiled path runs (built,
switched on, bound) and hand it the stage's arguments; split by stage, every half would repeat
that decision and the binding it reads.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

# The op kinds the compiled HB pass was written and tested for (streamsim.kinds.OP_KINDS when it
# was): the pass reads only an op's edges and accesses, and whether it is a ``free``; a new kind
# joins this list once the differential test covers it.
COVERED_KINDS = frozenset({
    "launch", "host", "record", "wait_event", "sync_event", "sync_stream", "sync_device",
    "isend", "irecv", "send_object", "recv_object", "isend_object", "all_reduce", "all_gather",
    "reduce_scatter", "broadcast", "all_to_all", "wait", "query", "alloc", "free", "record_stream",
    "reduce", "gather", "scatter", "barrier", "put", "get",
})

class BoundPassed(Exception):
    """The compiled replay passed a bound where the reference's run would: ``bound``
    (``"max_ops"`` or ``"max_time"``), the line whose call passed it (``lineno``; None: a
    thread's wait before its line's call, or the run's next event) and the host thread whose
    clock did (``agent``; None: the run's next event). Its caller words it as the engine's
    error (``oplog.replay``); here, not in the compiled module, so that the caller can name it
    whatever :func:`replayer` hands it."""

    def __init__(self, bound: str, lineno: int | None, agent: Any) -> None:
        super().__init__(bound, lineno, agent)
        self.bound, self.lineno, self.agent = bound, lineno, agent


try:
    from . import _hb as _compiled  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler at install time): pure Python
    _compiled = None
_UNLOADED: Any = object()
_decoder: Any = _UNLOADED  # the compiled reader, imported on first use (:func:`_load_decoder`)
try:  # (its own extension: built, or not, independently of the others)
    from . import _metrics as _compiled_metrics  # type: ignore[attr-defined]
except ImportError:
    _compiled_metrics = None
try:
    from . import _replay as _replayer  # type: ignore[attr-defined]
except ImportError:
    _replayer = None
# The compiled stages only a run with hazards or a JSON report needs, imported (and handed their
# objects) on first use, not with this package: a one-line log's start-up does without them.
_on_use: dict[str, Any] = {}  # module name -> the module, bound (None: not built)
_binding: dict[str, dict[str, Any]] = {}  # module name -> the objects its ``bind`` takes


def _used(name: str) -> Any:
    """The compiled module ``name`` (``_fixes``, ``_jsonv4``, ``_rootcause``), imported and bound
    on first use; None when it was not built."""
    m = _on_use.get(name, _UNLOADED)
    if m is _UNLOADED:
        objects = _binding.get(name)
        if objects is None:  # (the Python module that hands them over is not imported: it is
            return None  # the only caller, so this is a hand-made call; the reference runs)
        m = _built(name)
        if m is not None:
            m.bind(**objects)
        _on_use[name] = m
    return m


def _built(name: str) -> Any:
    """The compiled module ``name``, imported (not bound), or None when it was not built."""
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None


def built() -> bool:
    """True when the compiled module was built and imports (whatever STREAMSIM_NATIVE says)."""
    return _compiled is not None


def _load_decoder() -> Any:
    """The compiled reader (``_decode``), or None when it was not built. Imported on first use,
    not with this package: a small op log never needs it (streamsim.oplog.read, ``SMALL_LOG``).
    It imports msgspec only when a line needs it (``_decode.pyx``, ``_fast_loaded``)."""
    global _decoder
    if _decoder is _UNLOADED:
        try:
            from . import _decode as _decoder  # type: ignore[attr-defined]
        except ImportError:
            _decoder = None
    return _decoder


def modules() -> list[str]:
    """The compiled modules that were built and import (each is optional on its own)."""
    return [name for name, m in (("_hb", _compiled), ("_decode", _load_decoder()),
                                 ("_metrics", _compiled_metrics), ("_replay", _replayer),
                                 *((name, _built(name)) for name in ("_lines", "_fixes", "_jsonv4",
                                                                     "_rootcause", "_heap")))
            if m is not None]


def available() -> bool:
    """True when the compiled stages run: built, and not turned off by ``STREAMSIM_NATIVE=0``
    (read at each call, so a test can switch paths)."""
    return _compiled is not None and os.environ.get("STREAMSIM_NATIVE", "1") != "0"


def path() -> str:
    """``"native"`` or ``"python"``: the path the compiled stages take now (for ``--verbose``)."""
    return "native" if available() else "python"


def keep_freed_memory() -> bool:
    """Keep the memory this process frees for its own reuse instead of handing it back to the
    system (``_heap.pyx`` says why: a default ``check``'s re-runs each fault in hundreds of
    megabytes of fresh pages otherwise). For the command line's own process, which exits when
    its command is done: not for a library caller. True when it was done now or before; False
    where ``_heap`` was not built or ``STREAMSIM_NATIVE=0``."""
    if not available():
        return False
    heap = _built("_heap")
    if heap is None:
        return False
    heap.keep_freed_memory()
    return True


def decoder() -> Any:
    """The compiled reader's per-line hot path (``fast_spec``, ``build``: see
    streamsim/native/_decode.pyx), or None when the reader's own Python runs (not built, or
    ``STREAMSIM_NATIVE=0``): asked once per op log parsed."""
    decoder = _load_decoder()
    return decoder if decoder is not None and available() else None


def bind_decoder(**objects: Any) -> None:
    """Hand the reader's objects to the compiled reader (which imports nothing above it): its
    Line and Ref classes, DEFAULT_SIZE, a loader of the fast path's msgspec objects (its
    decoder, ref object Struct and errors, taken when a line first needs them), the op sets, a
    wait's inferred values and name, and the schema's limits, which the lexer checks
    (streamsim/native/_decode.pyx, ``bind``; _lex.pxi)."""
    decoder = _load_decoder()
    if decoder is not None:
        decoder.bind(**objects)


def replayer() -> Any:
    """The compiled replay of an op log (``replay``, ``KINDS``: see
    streamsim/native/_replay.pyx), or None when the simpy replay runs (not built, or
    ``STREAMSIM_NATIVE=0``): asked once per replay."""
    return _replayer if _replayer is not None and _on() else None


def lean_reruns() -> bool:
    """Whether a fix costing re-run of an op log may be kept as columns (``_replay.Columns``)
    and measured from them (:func:`measure_columns`): the replay, the HB pass and the metrics
    built, and the compiled path on."""
    return (_replayer is not None and _compiled is not None and _compiled_metrics is not None
            and _on())


def measure_columns(columns: Any, names: tuple[str, str, str, str], starts: dict,
                    keyed: Sequence) -> tuple | None:
    """What fix costing measures of a re-run, read from the columns the compiled replay kept of
    it (``_replay.Columns``, streamsim/native/_cols.pxd; no ``Op`` made): ``(hazards, timing,
    memory, shift, critical)``, as :func:`hazard_count`, :func:`metrics`, :func:`memory`,
    :func:`shift` and :func:`critical_rank` give them for its trace (``starts``, ``keyed``: as
    for :func:`shift`). None when one of them declines: the caller then makes the trace
    (``columns.trace_parts``) and measures it, compiled or not."""
    try:
        left = _compiled.hb_columns(columns, names, COVERED_KINDS, True)
    except OverflowError:  # (as hb_rows)
        return None
    if left is None:
        return None
    m = _compiled_metrics
    parts = (m.timing_columns(columns), m.memory_columns(columns),
             m.shift_columns(starts, columns, keyed), m.critical_rank_columns(columns))
    return None if None in parts else (left, *parts)


def bind_replayer(**objects: Any) -> None:
    """Hand the engine's objects to the compiled replay (which imports nothing above it): its
    record class, the trace's classes and ``Ref`` (``_replay.bind``)."""
    if _replayer is not None:
        _replayer.bind(**objects)


def bind_fixes(**objects: Any) -> None:
    """Hand the trace's and the findings' classes and the reference's ``propose_fix`` and
    ``_current_stream`` to the compiled fixes (which import nothing above them: ``_fixes.bind``)."""
    _binding["_fixes"] = objects


def with_fixes(trace: Any, hazards: Sequence, fresh: bool = False) -> list | None:
    """Compiled :func:`streamsim.analysis.fixes.with_fix` of each hazard (``_fixes.pyx``: the
    common kinds of fix made in C, the others by the reference); None when the reference must run
    (``STREAMSIM_NATIVE=0`` or ``_fixes`` not built). ``fresh``: the caller just made these
    hazards and no one else holds them: a ``Hazard`` gets its fix in place (``_fixes``)."""
    m = _used("_fixes") if _on() else None
    return None if m is None else m.with_fixes(trace, hazards, _columns_of(trace), fresh)


def bind_root_causes(**objects: Any) -> None:
    """Hand the trace's ``Op``, rootcause's ``Site`` and its label's regex substitution, and the
    findings' ``Hazard`` and ``Fix``, to the compiled grouping (``_rootcause.bind``)."""
    _binding["_rootcause"] = objects


def root_cause_groups(trace: Any, hazards: Sequence, made_site: Any, covered: dict
                      ) -> dict | None:
    """Compiled :func:`streamsim.analysis.rootcause._grouped` (its dict, key for key, in order);
    None when the reference must group (``STREAMSIM_NATIVE=0`` or ``_rootcause`` not built, or
    an op it does not read: ``_rootcause.pyx``)."""
    m = _used("_rootcause") if _on() else None
    return None if m is None else m.groups(trace, hazards, made_site, covered,
                                           _columns_of(trace))


def root_cause_summaries(trace: Any, hazards: Sequence, groups: list) -> list | None:
    """Compiled :func:`streamsim.analysis.rootcause._summary` of each group of hazard indices
    (the same tuples, in order); None when the reference must say them (``STREAMSIM_NATIVE=0``
    or ``_rootcause`` not built, or what ``_rootcause.summaries`` does not read)."""
    m = _used("_rootcause") if _on() else None
    return None if m is None else m.summaries(trace, hazards, groups, _columns_of(trace))


def bind_json(**objects: Any) -> None:
    """Hand the trace's and the findings' classes to the compiled JSON tables (``_jsonv4.bind``)."""
    _binding["_jsonv4"] = objects


def op_rows(ops: Any, ids: list[int], columns: Any = None) -> str | None:
    """The compiled text of a block of the JSON report's ``ops.rows`` (streamsim/report/jsonv4.py
    writes the same; ``columns``: a run's columns, read instead of ``ops``); None when the
    reference must write it (``STREAMSIM_NATIVE=0`` or ``_jsonv4`` not built, or a value it
    does not write: ``_jsonv4.pyx``)."""
    m = _used("_jsonv4") if _on() else None
    return None if m is None else m.op_rows(ops, ids, columns)


def op_rows_of(trace: Any, ids: list[int]) -> str | None:
    """:func:`op_rows` of ``trace``'s ops ``ids``: where its ops are not made, written from its
    columns, no op made (``_jsonv4.op_rows``' ``columns``), else from its ops."""
    m = _used("_jsonv4") if _on() else None
    if m is None:
        return None
    columns = _columns_of(trace)
    got = None if columns is None else m.op_rows(None, ids, columns)
    return got if got is not None else m.op_rows(trace.ops_by_id(ids), ids)


def hazard_entries(hazards: list) -> str | None:
    """The compiled text of a block of the JSON report's ``hazards`` (as :func:`op_rows`)."""
    m = _used("_jsonv4") if _on() else None
    return None if m is None else m.hazard_entries(hazards)


def hb_rows(trace: Any, keys: list[int] | None, names: tuple[str, str, str, str],
            rows_only: bool = False) -> tuple[list[tuple], list[int], list[int]] | None:
    """The compiled HB pass (:func:`streamsim.analysis.hb.hb_pass` without kept clocks): its
    sorted hazard rows, ``position`` and ``agent_of``; None when the pure-Python pass must run
    instead (compiled core off or absent, an op kind not covered, an op it cannot read from its
    slots, an op of an agent not in ``trace.agents``, a byte position past 64 bits, or an
    ordering error, which the reference words). ``keys``: the trace's
    issue keys (:func:`streamsim.trace.issue_keys`), or None: the compiled pass computes the same
    keys from the fields it reads of each op anyway (a scan of the Python ops less);
    ``names``: the hazard kinds RAW, WAR, WAW, use-after-free; ``rows_only``: the rows alone (a
    list; no list of every op's position and agent made). A trace whose ops are not made yet
    is read from its columns (:func:`_columns_of`)."""
    if not available():
        return None
    columns = _columns_of(trace)
    try:
        if columns is not None:
            return _compiled.hb_columns(columns, names, COVERED_KINDS, False, rows_only)
        return _compiled.hb_rows(trace, keys, names, COVERED_KINDS, False, rows_only)
    except OverflowError:  # a byte position or key past 64 bits (a hand-built trace's): the
        return None  # reference's Python ints hold it


@contextlib.contextmanager
def large_blocks_mapped(wanted: bool = True) -> Iterator[None]:
    """The body's large blocks mapped on their own and handed back when freed
    (``_heap.map_large_blocks``), where the command line's heap policy is installed and
    ``wanted``; elsewhere nothing changes. For a stage that runs once a check (the first
    replay, the first HB pass), not for fix costing's re-runs, which would fault those pages
    in again each time."""
    heap = sys.modules.get(f"{__name__}._heap")  # (imported where the heap policy was asked)
    mapped = wanted and heap is not None and heap.map_large_blocks(True)
    try:
        yield
    finally:
        if mapped:
            heap.map_large_blocks(False)


def hb_hazards(trace: Any, names: tuple[str, str, str, str], hazard: type) -> list | None:
    """The hazards of :func:`hb_rows`' rows, in their order, each a ``hazard`` (the findings'
    ``Hazard``) with no fix, made by the compiled pass itself once its walk's state is freed:
    no row made (at 1,000,000 lines of the random program, 301,502 rows of 12 items were
    about 70 MB beside the hazards). None as :func:`hb_rows`. The walk's arrays are handed
    back as it ends (:func:`large_blocks_mapped`)."""
    if not available():
        return None
    columns = _columns_of(trace)
    with large_blocks_mapped():
        try:
            if columns is not None:
                return _compiled.hb_columns(columns, names, COVERED_KINDS, False, True, hazard)
            return _compiled.hb_rows(trace, None, names, COVERED_KINDS, False, True, hazard)
        except OverflowError:  # (as hb_rows)
            return None


def hazard_count(trace: Any, names: tuple[str, str, str, str]) -> int | None:
    """How many rows :func:`hb_rows` would return, none of them made (a fix costing re-run
    counts what its fixes left); None when the pure-Python pass must run instead (as
    :func:`hb_rows`)."""
    if not available():
        return None
    columns = _columns_of(trace)
    try:
        if columns is not None:
            return _compiled.hb_columns(columns, names, COVERED_KINDS, True)
        return _compiled.hb_rows(trace, None, names, COVERED_KINDS, True)
    except OverflowError:  # (as hb_rows)
        return None


def _columns_of(trace: Any) -> Any:
    """The compiled replay's columns of a trace whose ops are not made yet
    (``oplog.leanrun.LeanTrace``), which the compiled passes read instead of its ops; else
    None (any other trace, or one made: its ``Op`` objects are read)."""
    return getattr(trace, "columns", None)


def unwaited_handles(trace: Any) -> list[int] | None:
    """:func:`streamsim.analysis.liveness.unwaited_handles` of a trace whose ops are not made
    yet, read from its columns (``Columns.unwaited_handles``); None for any other trace (the
    reference scans its ops)."""
    columns = _columns_of(trace) if _on() else None
    return None if columns is None else columns.unwaited_handles()


def _on() -> bool:
    """STREAMSIM_NATIVE is not 0 (read at each call, so a test can switch paths)."""
    return os.environ.get("STREAMSIM_NATIVE", "1") != "0"


def metrics(trace: Any) -> tuple[list[float], list[float], float, float, dict[str, float]] | None:
    """The compiled per-op part of :func:`streamsim.analysis.metrics.compute_metrics` (its
    reference: ``metrics._timing``): ``(latencies, idle, overlap_num, overlap_den, busy_us)``,
    floats bit for bit the reference's; None when the pure-Python reference must run instead
    (``STREAMSIM_NATIVE=0`` or ``_metrics`` not built, a time that is not a float or is a NaN, an
    op of another type than ``Op``)."""
    if _compiled_metrics is None or not _on():
        return None
    columns = _columns_of(trace)
    if columns is not None:
        return _compiled_metrics.timing_columns(columns)
    return _compiled_metrics.timing(trace)


def memory(trace: Any) -> tuple[dict, dict, dict, set, int] | None:
    """The compiled scan and walk of :func:`streamsim.analysis.metrics.memory_use` (its
    reference: ``metrics._memory_walk(metrics._memory_events(trace))``): ``(series, peak, peak_at,
    freeing, unknown)``; None when the reference must run instead (``STREAMSIM_NATIVE=0`` or
    ``_metrics`` not built, a time that is not a float or is a NaN, op ids that are not positions,
    an op of another type than ``Op``)."""
    if _compiled_metrics is None or not _on():
        return None
    columns = _columns_of(trace)
    if columns is not None:
        return _compiled_metrics.memory_columns(columns)
    return _compiled_metrics.memory(trace)


def keyed_host_ops(trace: Any, wanted: set) -> dict | None:
    """Compiled :func:`streamsim.pipeline.fixcost._keyed_host_ops`: host op id -> its injection
    key, for the keys in ``wanted``; None when the reference must run instead
    (``STREAMSIM_NATIVE=0`` or ``_metrics`` not built, a key not a 4-tuple, an op not an ``Op``)."""
    if _compiled_metrics is None or not _on():
        return None
    return _compiled_metrics.keyed_host_ops(trace, wanted)


def critical_rank(trace: Any) -> tuple[int | None] | None:
    """Compiled :func:`streamsim.pipeline.fixcost.critical_rank`, wrapped: ``(rank,)`` (``(None,)``
    for a trace with no ops); None when the reference must scan instead (``STREAMSIM_NATIVE=0``
    or ``_metrics`` not built, an op not an ``Op``, an end not a float)."""
    if _compiled_metrics is None or not _on():
        return None
    return _compiled_metrics.critical_rank(trace)


def delayed_ops(trace: Any, host: dict) -> dict | None:
    """Compiled second scan of :func:`streamsim.pipeline.fixcost._delayed_ops` (``host``: host
    op id -> injection key): key -> the op a sync before that host action delays; None when the
    reference must scan instead (as :func:`keyed_host_ops`, or a host op id not an int)."""
    if _compiled_metrics is None or not _on():
        return None
    return _compiled_metrics.delayed_ops(trace, host)


def delayed_starts(trace: Any, host: dict) -> dict | None:
    """:func:`delayed_ops` with each op as its start (``fixcost._delayed_starts``: what a shift
    reads of it), read from the columns of a trace whose ops are not made yet, no op made; None
    for any other trace, or where the columns decline (the caller then takes
    :func:`delayed_ops`' ops' starts)."""
    if _compiled_metrics is None or not _on():
        return None
    columns = _columns_of(trace)
    return None if columns is None else _compiled_metrics.delayed_starts_columns(columns, host)


def keying(trace: Any, hazards: Sequence, fix_class: type, hazard_class: type) -> tuple | None:
    """Compiled core of :class:`streamsim.pipeline.fixcost.Keying`: ``(fixes, keyed, sync_of,
    sync, host)`` (see ``_metrics.keying``; ``fix_class``, ``hazard_class``: the findings'
    ``Fix`` and ``Hazard``, which this package does not import); None when the reference must
    run instead (``STREAMSIM_NATIVE=0`` or ``_metrics`` not built, a hazard or fix of another
    class, a fix keyed already or one the reference refuses, an op not an ``Op``). A trace
    whose ops are not made yet is read from its columns (:func:`_columns_of`), and where they
    decline, from its ops."""
    if _compiled_metrics is None or not _on():
        return None
    from ..kinds import FIX_KINDS
    columns = _columns_of(trace)
    if columns is not None:  # (a run not made yet: read from its columns, no op made)
        got = _compiled_metrics.keying_columns(columns, hazards, fix_class, hazard_class,
                                               FIX_KINDS)
        if got is not None:
            return got
    return _compiled_metrics.keying(trace, hazards, fix_class, hazard_class, FIX_KINDS)


def shift(starts: dict, fixed: Any, keyed: Sequence) -> tuple[int, list] | None:
    """Compiled scans and walk of :func:`streamsim.pipeline.fixcost.fix_shift` (``starts``: the
    start of the run's delayed op of each key, ``Keying.delayed_start``): ``(n, moved)``, the
    keys with an op delayed in both runs and the shifts above 1e-6 in the keys' order; None
    when the reference must run (``STREAMSIM_NATIVE=0`` or ``_metrics`` not built, a key not a
    4-tuple, an op not an ``Op``)."""
    if _compiled_metrics is None or not _on():
        return None
    return _compiled_metrics.shift(starts, fixed, keyed)


def hazards(rows: list, hazard: type) -> list | None:
    """Compiled ``streamsim.analysis.hb._hazards``: a ``hazard`` (the findings' ``Hazard``) of
    each row of the HB pass, made by its slots (``_hb.hazards``); None when the reference must
    make them (``STREAMSIM_NATIVE=0``, or the pass not built)."""
    if not available():
        return None
    return _compiled.hazards(rows, hazard)


def hazard_op_ids(hazards: Sequence, nops: int) -> list[int] | None:
    """Compiled loop of :func:`streamsim.report.jsonv4.named_ops` over the hazards: the op ids
    they and their fixes name, ascending (``_jsonv4.hazard_op_ids``); None when the reference
    must collect them (``STREAMSIM_NATIVE=0`` or ``_jsonv4`` not built, a record of another
    class, an id that is not an op's position)."""
    m = _used("_jsonv4") if _on() else None
    return None if m is None else m.hazard_op_ids(hazards, nops)


def hazard_op_id_blocks(hazards: Sequence, nops: int, others: Sequence[int], block: int
                        ) -> Iterator[list[int]] | None:
    """:func:`hazard_op_ids` and ``others`` (ops a warning or the deadlock names) together,
    ascending, in lists of at most ``block`` ids, made a block at a time from a flag an op
    (``_jsonv4.hazard_op_flags``); None as :func:`hazard_op_ids`, or where one of ``others`` is
    not an int in ``[0, nops)``."""
    m = _used("_jsonv4") if _on() else None
    if m is None or any(type(o) is not int or not 0 <= o < nops for o in others):
        return None
    flags = m.hazard_op_flags(hazards, nops)
    if flags is None:
        return None
    for o in others:
        flags[o] = 1

    def blocks() -> Iterator[list[int]]:
        start = 0
        while start < nops:
            ids, start = m.flagged_ids(flags, start, block)
            if ids:
                yield ids
    return blocks()
