"""Read and validate an op log (docs/oplog.md) into an :class:`OpLog`.

An op log is JSON Lines: what each host thread issued, in order. :func:`load_oplog` checks every
line statically (JSON, op, fields, types, handles, views, groups) and stops at the first mistake
with one :class:`~streamsim.sim.engine.ModelError` ``FILE:LINE: what is wrong``, so that nothing is
reported as analysed that was not. Everything the replay needs is resolved here, once: each buffer
ref becomes a concrete view, each ``wait``/``query`` names the line whose handle it waits, each
group gets its backend and ranks, so that the replay (``oplog_replay``) only has to issue ops.
Declarations (op log v2: ``group``, ``config``) are taken in here too and produce no line.

One module because it is one two-pass reader whose checks share its state (buffer lives, groups,
handles, declarations): split, each half would reach into the other's tables.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from ..sim.errors import ModelError
from ..sim.memory import Ref
from ..kinds import COLLECTIVE_KINDS, ROOTED_KINDS
from ..sim.groups import P2P_STREAMS, declare_group
from ..strided import Strided, extent
from ..trace import View
from .batches import BatchRule
from .schema import (ANY_SOURCE_NAME, BUFFER_OPS, COLLECTIVE_OPS, COMMON, DECLARATIONS,
                     DEFAULT_GROUP, DEFAULT_SIZE, EVENT_OPS, FIELDS, GLOO_OPS, HANDLE_OPS,
                     INFERRED_BY, INFERRED_NAME, LIMITS, MAX_BYTES, MAX_DIMS, MAX_DUR, MAX_RANK,
                     NCCL_OPS, REQUIRED, ROOTED_OPS, GroupSpec, Line, OpLog, shown_number,
                     shown_window)
from .. import native
from .source import hides_ops, read_oplog_bytes, split_lines
from .strictjson import DECODER as _DECODER, SURROGATE as _SURROGATE, type_name as _type_name


def load_oplog(path: str | os.PathLike) -> OpLog:
    """Read and validate the op log at ``path``; any mistake is a ``ModelError`` ``FILE:LINE: ...``."""
    path = os.fspath(path)
    return parse_oplog(read_oplog_bytes(path), path, empty_ok=False)


def parse_oplog(data: str | bytes, path: str = "<oplog>", *, empty_ok: bool = True) -> OpLog:
    """Validate op-log text (``path`` only names it in messages and locations). Without
    ``empty_ok`` (as for every file read to be analysed), text without a single op is an error
    ``FILE: no ops: nothing analysed``, never a clean verdict on nothing."""
    log = _Parser(path).parse(data)
    if not log.lines and not empty_ok:
        raise ModelError(f"{path}: no ops: nothing analysed (the file "
                         f"{'holds only blank lines and comments' if data else 'is empty'})")
    return log


# --- parsing --------------------------------------------------------------------------------------

_NAME_FIELDS = ("host", "stream", "name", "event", "group", "handle", "buffer")
# A buffer ref object's fields; sizes, strides (elements) and itemsize (bytes) make it strided.
_REF_FIELDS = ("buffer", "offset", "nbytes", "window", "sizes", "strides", "itemsize")
_ALLOWED = {op: frozenset(COMMON + fields) for op, fields in FIELDS.items()}
# A log shorter than this (bytes, or characters of a str) is read by the checker alone, every
# line: the fast paths (msgspec's decoder in :mod:`.fastpath`, the compiled reader that
# streamsim.native imports with it) take a process ~12 ms to import, what the checker's extra
# ~15 us a line (against the compiled reader) comes to over ~800 lines. Which path read a log is
# no part of it: the three give the same log, or the same first error (tests/oplog/test_fastpath.py,
# tests/native/test_decode.py).
SMALL_LOG = 16 * 1024
_BOUND: list[bool] = []  # (the compiled reader bound: once a process)


def _fast_paths() -> tuple[Any, Any]:
    """``(fast_spec, compiled)`` for a log of :data:`SMALL_LOG` or more: the compiled reader
    where it runs (bound on first use; fast_spec None), else the Python fast path (compiled
    None). The compiled reader imports msgspec and the Python fast path only when a line needs
    them (a line its lexer hands over, a ref object): ``_fast_objects``."""
    compiled = native.decoder()
    if compiled is None:
        from .fastpath import fast_spec
        return fast_spec, None
    if not _BOUND:  # what the compiled reader (streamsim/native/_decode.pyx) takes of this reader's
        native.bind_decoder(line=Line, ref=Ref, default_size=DEFAULT_SIZE,
                            load_fast=_fast_objects, event_ops=EVENT_OPS, buffer_ops=BUFFER_OPS,
                            inferred_by=INFERRED_BY, inferred_name=INFERRED_NAME,
                            any_source_name=ANY_SOURCE_NAME, default_group=DEFAULT_GROUP,
                            collective_ops=COLLECTIVE_OPS, rooted_ops=ROOTED_OPS, extent=extent,
                            name_fields=_NAME_FIELDS, limits=LIMITS, max_dur=MAX_DUR,
                            max_dims=MAX_DIMS)
        _BOUND.append(True)
    return None, compiled


def _fast_objects() -> dict[str, Any]:
    """What the compiled reader takes of msgspec and the Python fast path, on its first need."""
    import msgspec

    from .fastpath import FAST_DECODER, RefObj, ref_object, strided_hull
    return dict(unset=msgspec.UNSET, decode_error=msgspec.DecodeError,
                validation_error=msgspec.ValidationError, decoder=FAST_DECODER,
                ref_struct=RefObj, ref_object=ref_object, strided_hull=strided_hull)


def _checker_only(parser: Any, s: str) -> None:
    """The fast path of a small log: none (every line is the checker's)."""
    return None


def _shown(v: Any) -> str:
    return repr(v) if isinstance(v, str) else _type_name(v)


class _Bad(Exception):
    """A mistake on the line being parsed (the parser adds ``FILE:LINE:``)."""


@dataclass(slots=True)
class _RawRef:
    rank: int
    buffer: str
    offset: int
    nbytes: int | None
    window: tuple[float, float]
    life: int | None  # explicit size of the buffer's current life, None if implicit
    pattern: Strided | None = None  # a strided ref's bytes within [offset, offset + nbytes)


class _Parser:
    """Two passes: check each line and record refs (pass 1), then resolve sizes and build Lines."""

    def __init__(self, path: str):
        self.path = path
        self.lineno = 0
        self.lead = 0
        self.handles: dict[tuple[int, str], int] = {}  # (rank, handle) -> issuing line
        # (rank, buffer) -> its current life in file order: (size or None if implicit, alloc line,
        # allocation stream); a buffer with no entry is alive from the start, on compute.
        self.lives: dict[tuple[int, str], tuple[int | None, int, str]] = {}
        self.implicit: dict[tuple[int, str], int] = {}  # largest extent named in implicit lives
        self.groups: dict[str, dict[str, Any]] = {}
        self.threads: dict[tuple[int, str], None] = {}
        self.interned: dict[tuple, Ref] = {}  # equal refs resolve to one Ref object
        self.strings: dict[str, str] = {}
        self.rares: dict[tuple, tuple] = {}  # equal Line.rare tuples: one object
        self.batches = BatchRule()
        self.launch_overhead: float | None = None  # a `config` declaration's
        self.ops_seen = False
        self.last_t: dict[tuple[int, str], tuple[float, int]] = {}  # thread -> its last t, line
        # the per-line hot path (set by parse): compiled (streamsim.native._decode: its passes,
        # which make most Lines in pass 1) where it runs, else fastpath.fast_spec and this
        # module's build; a small log's: the checker and build. The same Lines every way
        self.compiled = None
        self.fast_spec = _checker_only

    def fail(self, msg: str) -> ModelError:
        return ModelError(f"{self.path}:{self.lineno}: {msg}")

    def parse(self, data: str | bytes) -> OpLog:
        if len(data) >= SMALL_LOG:
            fast, compiled = _fast_paths()
            self.compiled = compiled
            self.fast_spec = fast if compiled is None else compiled.fast_spec
        raw: list[tuple[int, dict[str, Any]] | None] = []
        if self.compiled is not None and isinstance(data, bytes) and b"\r" not in data:
            chunks = data  # (the compiled loop finds the lines in the bytes: no list of them)
        else:
            chunks = split_lines(data)
        if self.compiled is not None:  # (the same loop, which hands this method what it does not
            self.compiled.first_pass(self, chunks, raw)  # take itself: streamsim.native)
        else:
            for i, chunk in enumerate(chunks, 1):
                self.take(i, chunk, raw)
        del chunks  # (the memory peak is pass 1's specs beside pass 2's Lines: let each go early)
        if self.compiled is not None:  # (the same loop, over specs and the Lines pass 1 made)
            try:
                lines = self.compiled.second_pass(self, raw)
            except _Bad as e:
                raise self.fail(str(e)) from None
        else:
            lines = []
            for k, (i, spec) in enumerate(raw):
                raw[k] = None
                self.lineno = i
                try:
                    lines.append(self.build(i, spec))
                except _Bad as e:
                    raise self.fail(str(e)) from None
        groups, configs = {}, {}
        for name, g in self.groups.items():
            ranks = tuple(sorted(g["ranks"]))
            for lineno, given in g["lists"]:
                if tuple(sorted(given)) != ranks:
                    self.lineno = lineno
                    raise self.fail(f"ranks {sorted(given)} differ from the ranks {list(ranks)} of "
                                    f"group {name!r} (every rank that uses it or is a peer in it)")
            cost = g.get("cost", {})
            if "declared_ranks" in g:
                outside = sorted(set(ranks) - g["declared_ranks"])
                if outside:
                    self.lineno = g["line"]
                    raise self.fail(f"group {name!r} declares ranks "
                                    f"{sorted(g['declared_ranks'])}, but rank {outside[0]} uses it")
                ranks = tuple(sorted(g["declared_ranks"]))
            spec = groups[name] = GroupSpec(name, g["backend"], ranks,
                                            g.get("p2p", ("per_group",))[0], cost.get("latency"),
                                            cost.get("bandwidth"), cost.get("eager_bytes"),
                                            cost.get("blocking_wait", False),
                                            declared="cost" in g)
            try:  # (what the engine refuses of the groups together: two sharing a comm stream)
                declare_group(configs, name, ranks, spec.backend, p2p_streams=spec.p2p_streams)
            except ModelError as e:
                self.lineno = g["line"]
                raise self.fail(str(e)) from None
        if type(lines) is list:  # (the compiled pass 2's: rows already, made Lines when read)
            lines = tuple(lines)
        return OpLog(self.path, lines, tuple(self.threads), groups,
                     self.launch_overhead or 0.0)

    # -- pass 1 ------------------------------------------------------------------------------------
    def take(self, i: int, chunk: str | bytes, raw: list, fast: bool = True) -> None:
        """Pass 1 of line ``i`` (``chunk``, as split from the file): checked, its spec appended to
        ``raw`` (blank lines, comments and declarations append nothing). ``fast``: try the fast
        path first (False: the caller's fast path has just refused the line)."""
        self.lineno = i
        if isinstance(chunk, bytes):
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as e:
                raise self.fail(f"not valid UTF-8 (byte {e.start + 1})") from None
        else:
            text = chunk
        if i == 1 and text.startswith("\ufeff"):
            text = text[1:]
        s = text.strip()
        if not s:
            return
        if s.startswith("#"):
            if hides_ops(s):
                raise self.fail(hides_ops(s))
            return
        self.lead = len(text) - len(text.lstrip())  # for JSON error columns
        try:
            spec = self.check(s, fast)
            if spec is not None:  # (None: a declaration, taken in by self.declare)
                raw.append((i, spec))
        except _Bad as e:
            raise self.fail(str(e)) from None

    def check(self, s: str, fast: bool = True) -> dict[str, Any]:
        spec = self.fast_spec(self, s) if fast else None  # the common lines; None: read on below
        if spec is not None:
            self.batches.check(spec, self.lineno, _Bad)  # (such a line ends a thread's batch)
            return spec
        try:
            obj = _DECODER.decode(s)
        except ValueError as e:
            msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
            col = f" (column {e.colno + self.lead})" if isinstance(e, json.JSONDecodeError) else ""
            raise _Bad(f"malformed JSON: {msg}{col}") from None
        except RecursionError:
            raise _Bad("malformed JSON: nested too deeply") from None
        if "\\u" in s and _SURROGATE.search(s):  # only an escape can make one: check then
            try:
                json.dumps(obj, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError as e:
                raise _Bad(f"a string holds an unpaired surrogate escape "
                           f"(\\u{ord(e.object[e.start]):04x}): not text") from None
        if not isinstance(obj, dict):
            raise _Bad(f"expected a JSON object, got {_type_name(obj)}")
        if "op" not in obj:
            raise _Bad("missing required field 'op'")
        op = obj["op"]
        if not isinstance(op, str):
            raise _Bad(f"field 'op' must be a string, got {_type_name(op)}")
        if op in DECLARATIONS:
            self.declare(obj, op)
            return None
        if op not in FIELDS:
            raise _Bad(f"unknown op {op!r} (expected one of: {', '.join(FIELDS)}; or a "
                       f"declaration: {', '.join(DECLARATIONS)})")
        self.ops_seen = True
        allowed = _ALLOWED[op]
        if not obj.keys() <= allowed:
            extra = next(k for k in obj if k not in allowed)
            raise _Bad(f"unknown field {extra!r} for op {op!r}")
        for k in REQUIRED.get(op, ()):
            if k not in obj:
                raise _Bad(f"missing required field {k!r} for op {op!r}")
        spec: dict[str, Any] = {"op": op}
        spec["rank"] = rank = self.nat(obj, "rank", 0)
        spec["host"] = self.text(obj, "host", "main")
        spec["stream"] = self.text(obj, "stream", "compute")
        name = obj.get("name", op)
        if not isinstance(name, str):
            raise _Bad(f"field 'name' must be a string, got {_type_name(name)}")
        spec["name"] = name
        dur = obj.get("dur", 1.0)
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or (
                isinstance(dur, float) and not math.isfinite(dur)):
            raise _Bad(f"field 'dur' must be a finite number, got {_type_name(dur)}")
        if dur < 0:
            raise _Bad(f"negative dur {shown_number(dur)}")
        if dur > MAX_DUR:  # (compared before float(): a huge integer does not convert)
            raise _Bad(f"field 'dur' must be at most {MAX_DUR:g} (microseconds), got "
                       f"{shown_number(dur)}")
        spec["dur"] = float(dur)
        spec["step"] = self.nat(obj, "step", None)
        if "site" in obj:
            spec["site"] = self.text(obj, "site")
        if "t" in obj:
            spec["t"] = t = self.number(obj, "t", None, strict=False)
            last = self.last_t.get((rank, spec["host"]))
            if last is not None and t < last[0]:
                raise _Bad(f"field 't' {shown_number(obj['t'])} is before the t {last[0]:g} of "
                           f"line {last[1]}, of the same host thread (a thread issues its lines "
                           "in time order)")
            self.last_t[(rank, spec["host"])] = (t, self.lineno)
        self.threads.setdefault((rank, spec["host"]), None)
        self.check_fields(obj, spec)
        self.batches.check(spec, self.lineno, _Bad)
        return spec

    def check_fields(self, obj: dict, spec: dict) -> None:
        """The op-specific fields of one line (``spec`` holds the common ones already). A kind
        no rule below reads has names for fields (``event``, ``channel``): each is read as text."""
        op = spec["op"]
        if op in ("launch", "host"):
            spec["reads"] = self.refs(obj, "reads", spec["rank"])
            spec["writes"] = self.refs(obj, "writes", spec["rank"])
        elif op in NCCL_OPS or op in GLOO_OPS:
            self.check_comm(obj, spec)
        elif op in ("wait", "query"):
            handle = self.text(obj, "handle")
            target = self.handles.get((spec["rank"], handle))
            if target is None:
                raise _Bad(f"{op} on unknown handle {handle!r} (no earlier line of rank "
                           f"{spec['rank']} issues it)")
            spec["handle"], spec["target"] = handle, target
            if op == "query" and "result" in obj:
                if not isinstance(obj["result"], bool):
                    raise _Bad(f"field 'result' must be a boolean, got {_type_name(obj['result'])}")
                spec["result"] = obj["result"]
            if op == "wait":
                blocking = obj.get("blocking", False)
                if not isinstance(blocking, bool):
                    raise _Bad(f"field 'blocking' must be a boolean, got {_type_name(blocking)}")
                spec["blocking"] = blocking
                if "inferred" in obj:
                    if obj["inferred"] not in INFERRED_BY:
                        raise _Bad(f"field 'inferred' must be one of "
                                   f"{', '.join(map(repr, INFERRED_BY))} (how the wait was "
                                   f"inferred), got {_shown(obj['inferred'])}")
                    spec["inferred"] = obj["inferred"]
                    if "name" not in obj:
                        spec["name"] = INFERRED_NAME
        elif op == "alloc":
            key = (spec["rank"], self.text(obj, "buffer"))
            size = self.nat(obj, "nbytes", None)
            spec["buffer"], spec["nbytes"] = key[1], size
            if "label" in obj:
                spec["label"] = self.text(obj, "label")
            self.lives[key] = (size, self.lineno, spec["stream"])
            if size is None:
                self.implicit.setdefault(key, 0)
        elif op in ("free", "record_stream"):
            # Both act on the buffer's life at this point of the file (not of the replay, where
            # another thread's alloc may run earlier or later): resolve it now.
            key = (spec["rank"], self.text(obj, "buffer"))
            spec["buffer"] = key[1]
            size, _, stream = self.lives.get(key, (None, 0, "compute"))
            if key not in self.lives:  # alive from the start
                self.implicit.setdefault(key, 0)
            spec["nbytes"] = size  # None: the implicit size, known after pass 1
            if op == "free":
                spec["stream"] = stream  # a free goes to the allocation stream
        else:  # a kind whose fields are names (an event, a channel, ...): each as text
            for f in FIELDS[op]:
                if f in obj:
                    spec[f] = self.text(obj, f)

    def declare(self, obj: dict, kind: str) -> None:
        """A declaration line (op log v2): a group's backend, ranks and cost settings, or the
        launch overhead; each before the ops it concerns."""
        extra = next((k for k in obj if k not in DECLARATIONS[kind]), None)
        if extra is not None:
            raise _Bad(f"unknown field {extra!r} for declaration {kind!r}")
        if kind == "config":
            if self.launch_overhead is not None or self.ops_seen:
                raise _Bad("a 'config' declaration comes once, before the first op")
            self.launch_overhead = self.number(obj, "launch_overhead", 0.0, strict=False)
            return
        name = self.text(obj, "group")
        if name in self.groups:
            g = self.groups[name]
            what = "declared" if "cost" in g else "used"
            raise _Bad(f"group {name!r} is declared here but {what} at line {g['line']} already "
                       "(a declaration comes before the group's ops, once)")
        backend = self.text(obj, "backend", "nccl")
        if backend not in ("nccl", "gloo"):
            raise _Bad(f"field 'backend' must be 'nccl' or 'gloo', got {backend!r}")
        g = self.groups[name] = {"backend": backend, "line": self.lineno, "ranks": set(),
                                 "lists": [], "cost": {}}
        if "ranks" in obj:
            ranks = obj["ranks"]
            if not isinstance(ranks, list) or not ranks or not all(
                    isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= MAX_RANK
                    for r in ranks) or len(set(ranks)) != len(ranks):
                raise _Bad("field 'ranks' must be a non-empty array of distinct ranks")
            g["declared_ranks"] = set(ranks)
            g["ranks"].update(ranks)
        cost = g["cost"]
        if "latency" in obj:
            cost["latency"] = self.number(obj, "latency", None, strict=False)
        if "bandwidth" in obj:
            cost["bandwidth"] = self.number(obj, "bandwidth", None, strict=True)
        if "eager_bytes" in obj:
            cost["eager_bytes"] = self.nat(obj, "eager_bytes")
        if "blocking_wait" in obj:
            if not isinstance(obj["blocking_wait"], bool):
                raise _Bad(f"field 'blocking_wait' must be a boolean, got "
                           f"{_type_name(obj['blocking_wait'])}")
            cost["blocking_wait"] = obj["blocking_wait"]
        if "p2p_streams" in obj:
            if backend == "gloo":
                raise _Bad("field 'p2p_streams' is for NCCL groups (gloo runs no CUDA stream)")
            self.check_p2p_streams(obj, name, g)

    def number(self, obj: dict, key: str, default: Any, strict: bool) -> float:
        """A finite number >= 0 (> 0 when ``strict``), at most MAX_DUR."""
        v = obj.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (
                isinstance(v, float) and not math.isfinite(v)):
            raise _Bad(f"field {key!r} must be a finite number, got {_type_name(v)}")
        if v < 0 or (strict and v == 0) or v > MAX_DUR:
            raise _Bad(f"field {key!r} must be {'>' if strict else '>='} 0 and at most "
                       f"{MAX_DUR:g}, got {shown_number(v)}")
        return float(v)

    def check_comm(self, obj: dict, spec: dict) -> None:
        op, rank = spec["op"], spec["rank"]
        backend = "nccl" if op in NCCL_OPS else "gloo"
        group = self.text(obj, "group", DEFAULT_GROUP[op])
        g = self.groups.setdefault(group, {"backend": backend, "line": self.lineno,
                                           "ranks": set(), "lists": []})
        if op in NCCL_OPS and "cost" in g and g["backend"] == "gloo":
            backend = "gloo"  # tensor ops of a group declared gloo: gloo's semantics
            for key in ("batch", "p2p_streams"):
                if key in obj:
                    raise _Bad(f"field {key!r} is for NCCL groups; group {group!r} is declared "
                               f"gloo at line {g['line']}")
        if g["backend"] != backend:
            raise _Bad(f"group {group!r} is used by {backend} op {op!r} here but by "
                       f"{g['backend']} ops at line {g['line']}")
        g["ranks"].add(rank)
        spec["group"] = group
        spec["nbytes"] = self.nat(obj, "nbytes", None)
        if "cost" in g and "dur" not in obj:  # a declared group: its cost model times the op
            spec["dur"] = None
        if "peer" in FIELDS[op]:
            spec["peer"] = self.nat(obj, "peer")
            g["ranks"].add(spec["peer"])
        if op in ("isend", "irecv"):
            refs = self.refs(obj, "tensors", rank)
            spec["reads" if op == "isend" else "writes"] = refs
            if "p2p_streams" in obj:
                self.check_p2p_streams(obj, group, g)
            spec["batch"] = self.nat(obj, "batch", None)
            if "any_source" in obj:
                if not isinstance(obj["any_source"], bool):
                    raise _Bad(f"field 'any_source' must be a boolean, got "
                               f"{_type_name(obj['any_source'])}")
                if obj["any_source"] and spec["batch"] is not None:
                    raise _Bad("an irecv of a batch names its peer: 'any_source' and 'batch' "
                               "do not go together")
                spec["any_source"] = obj["any_source"]
                if obj["any_source"] and "name" not in obj:
                    spec["name"] = ANY_SOURCE_NAME
        elif op in COLLECTIVE_KINDS:
            has_t, has_io = "tensors" in obj, ("inputs" in obj, "outputs" in obj)
            if op in ROOTED_KINDS or op == "barrier":
                self.check_rooted(obj, spec, g)
            elif has_t and any(has_io):
                raise _Bad(f"{op} takes 'tensors' (in place) or 'inputs' and 'outputs', not both")
            elif has_t:
                spec["reads"] = spec["writes"] = self.refs(obj, "tensors", rank)
            elif all(has_io):
                spec["reads"] = self.refs(obj, "inputs", rank)
                spec["writes"] = self.refs(obj, "outputs", rank)
            else:
                raise _Bad(f"missing required field 'tensors' (or 'inputs' and 'outputs') "
                           f"for op {op!r}")
            if "ranks" in obj:
                ranks = obj["ranks"]
                if not isinstance(ranks, list) or not ranks or not all(
                        isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
                    raise _Bad("field 'ranks' must be a non-empty array of non-negative integers")
                if max(ranks) > MAX_RANK:
                    raise _Bad(f"field 'ranks' must hold ranks of at most {MAX_RANK}, got "
                               f"{shown_number(max(ranks))}")
                if len(set(ranks)) != len(ranks):
                    raise _Bad(f"field 'ranks' names a rank twice: {ranks}")
                if rank not in ranks:
                    raise _Bad(f"ranks {ranks} of this {op} do not include its own rank {rank}")
                if spec.get("root", rank) not in ranks:
                    raise _Bad(f"ranks {ranks} of this {op} do not include its root "
                               f"{spec['root']}")
                spec["ranks"] = tuple(ranks)
                g["ranks"].update(ranks)
                g["lists"].append((self.lineno, ranks))
        if op in HANDLE_OPS:
            handle = self.text(obj, "handle", None)
            spec["handle"] = handle
            if handle is not None:
                self.handles[(rank, handle)] = self.lineno

    def check_rooted(self, obj: dict, spec: dict, g: dict) -> None:
        """A ``barrier`` (no tensor) or a rooted collective's tensors, by its ``root`` (a global
        rank): ``reduce`` reads its ``tensors`` on every rank and writes them on the root;
        ``gather`` reads its ``inputs`` and writes ``outputs``, the gather list, which only the
        root gives (and must); ``scatter`` writes its ``outputs`` and reads ``inputs``, the
        scatter list, which only the root gives (and must)."""
        op, rank = spec["op"], spec["rank"]
        if op == "barrier":
            return
        spec["root"] = root = self.nat(obj, "root")
        g["ranks"].add(root)
        if op == "reduce":
            refs = self.refs(obj, "tensors", rank)
            spec["reads"], spec["writes"] = refs, refs if rank == root else []
            return
        listed = "outputs" if op == "gather" else "inputs"  # the root's list
        what = "gather list" if op == "gather" else "scatter list"
        if rank == root and listed not in obj:
            raise _Bad(f"missing required field {listed!r} for op {op!r} on its root rank "
                       f"{root} (the {what})")
        if rank != root and listed in obj:
            raise _Bad(f"field {listed!r} (the {what}) is the root's: rank {rank} is not the "
                       f"root {root} of this {op}")
        spec["reads"] = self.refs(obj, "inputs", rank)
        spec["writes"] = self.refs(obj, "outputs", rank)

    def check_p2p_streams(self, obj: dict, group: str, g: dict) -> None:
        """A group's ``p2p_streams``: every line that gives it gives the same value."""
        value = self.text(obj, "p2p_streams")
        if value not in P2P_STREAMS:
            raise _Bad(f"field 'p2p_streams' must be one of {', '.join(map(repr, P2P_STREAMS))}, "
                       f"got {value!r}")
        given = g.setdefault("p2p", (value, self.lineno))
        if given[0] != value:
            raise _Bad(f"p2p_streams {value!r} for group {group!r} here, but {given[0]!r} at "
                       f"line {given[1]} (a group runs all its p2p ops one way)")

    # -- field checks ---------------------------------------------------------------------------------
    _MISSING = object()

    def nat(self, obj: dict, key: str, default: Any = _MISSING) -> Any:
        if key not in obj and default is not self._MISSING:
            return default
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            shown = shown_number(v) if isinstance(v, int) and not isinstance(v, bool) else _type_name(v)
            raise _Bad(f"field {key!r} must be a non-negative integer, got {shown}")
        if v > LIMITS[key]:
            raise _Bad(f"field {key!r} must be at most {LIMITS[key]}, got {shown_number(v)}")
        return v

    def text(self, obj: dict, key: str, default: Any = _MISSING) -> Any:
        if key not in obj and default is not self._MISSING:
            return default
        v = obj[key]
        if not isinstance(v, str) or not v:
            raise _Bad(f"field {key!r} must be a non-empty string, got "
                       f"{'an empty string' if v == '' else _type_name(v)}")
        return v

    def refs(self, obj: dict, key: str, rank: int) -> list[_RawRef]:
        items = obj.get(key, [])
        if not isinstance(items, list):
            raise _Bad(f"field {key!r} must be an array of buffer refs, got {_type_name(items)}")
        return [self.ref(item, key, rank) for item in items]

    def ref(self, item: Any, key: str, rank: int) -> _RawRef:
        window = (0.0, 1.0)
        pattern = None
        if isinstance(item, str) and item:
            buf, offset, nbytes = item, 0, None
        elif isinstance(item, dict):
            for k in item:
                if k not in _REF_FIELDS:
                    raise _Bad(f"unknown field {k!r} in a buffer ref of {key!r}")
            if "buffer" not in item:
                raise _Bad(f"a buffer ref of {key!r} is missing its 'buffer'")
            buf = self.text(item, "buffer")
            offset = self.nat(item, "offset", 0)
            nbytes = self.nat(item, "nbytes", None)
            if "sizes" in item or "strides" in item or "itemsize" in item:
                offset, nbytes, pattern = self.strided(item, key, offset)
            if "window" in item:
                w = item["window"]
                if not (isinstance(w, list) and len(w) == 2 and all(
                        isinstance(x, int) and not isinstance(x, bool) or
                        isinstance(x, float) and math.isfinite(x) for x in w)):
                    raise _Bad(f"bad window {shown_window(w)} in {key!r}: expected [start, end], "
                               "fractions of the op's duration")
                if not 0.0 <= w[0] <= w[1] <= 1.0:  # (exact for integers of any size)
                    raise _Bad(f"bad window {shown_window(w)} in {key!r}: must satisfy "
                               "0 <= start <= end <= 1")
                window = (float(w[0]), float(w[1]))
        else:
            raise _Bad(f"a buffer ref in {key!r} must be a buffer name or an object "
                       f"{{\"buffer\", \"offset\", \"nbytes\"}}, got "
                       f"{'an empty string' if item == '' else _type_name(item)}")
        k = (rank, buf)
        life = self.lives.get(k)
        size = life[0] if life else None
        if size is not None:
            if (offset + nbytes > size) if nbytes is not None else (offset > size or offset == size > 0):
                end = "" if nbytes is None else offset + nbytes
                raise _Bad(f"view [{offset}:{end}] of buffer {buf!r} is outside its {size} bytes "
                           f"(allocated at line {life[1]})")
        else:
            extent = offset + nbytes if nbytes is not None else offset + 1
            if extent > self.implicit.get(k, 0):
                self.implicit[k] = extent
        return _RawRef(rank, buf, offset, nbytes, window, size, pattern)

    def strided(self, item: dict, key: str, offset: int) -> tuple[int, int, Strided | None]:
        """A strided ref's ``sizes``, ``strides`` (elements) and ``itemsize`` (bytes, default 1),
        checked: its hull's offset and length, and its pattern (None when its bytes are the whole
        hull: then it is a plain range)."""
        if "nbytes" in item:
            raise _Bad(f"a buffer ref of {key!r} gives both 'nbytes' and 'sizes'/'strides': a "
                       "strided ref's size is what its sizes and strides reach")
        for k in ("sizes", "strides"):
            if k not in item:
                raise _Bad(f"a strided buffer ref of {key!r} is missing its {k!r}")
            v = item[k]
            if not (isinstance(v, list) and len(v) <= MAX_DIMS and all(
                    isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_BYTES
                    for x in v)):
                raise _Bad(f"field {k!r} of a buffer ref in {key!r} must be an array of at most "
                           f"{MAX_DIMS} non-negative integers below 2^63, got "
                           f"{_type_name(v) if not isinstance(v, list) else json.dumps(v)[:80]}")
        sizes, strides = item["sizes"], item["strides"]
        if len(sizes) != len(strides):
            raise _Bad(f"a strided buffer ref of {key!r} has {len(sizes)} sizes and "
                       f"{len(strides)} strides: one stride a size")
        itemsize = item.get("itemsize", 1)
        if isinstance(itemsize, bool) or not isinstance(itemsize, int) or \
                not 1 <= itemsize <= MAX_BYTES:
            raise _Bad(f"field 'itemsize' of a buffer ref in {key!r} must be a positive integer, "
                       f"got {shown_number(itemsize) if isinstance(itemsize, int) else _type_name(itemsize)}")
        reach = itemsize + sum((n - 1) * s * itemsize for n, s in zip(sizes, strides) if n)
        if offset + reach > MAX_BYTES:
            raise _Bad(f"a strided buffer ref of {key!r} reaches byte {shown_number(offset + reach)}"
                       f", beyond 2^63")
        return (offset, *extent(tuple(sizes), tuple(strides), itemsize))

    # -- pass 2 -----------------------------------------------------------------------------------
    def resolve(self, refs: list[_RawRef]) -> tuple[Ref, ...]:
        out = []
        interned = self.interned
        for r in refs:
            size = r.life if r.life is not None else max(self.implicit.get((r.rank, r.buffer), 0),
                                                          DEFAULT_SIZE)
            n = max(size - r.offset if r.nbytes is None else r.nbytes, 0)
            key = (r.rank, r.buffer, r.offset, n, r.window, r.pattern)
            ref = interned.get(key)
            if ref is None:
                ref = interned[key] = Ref(View(r.rank, r.buffer, r.offset, n, r.pattern),
                                          r.window)
            out.append(ref)
        return tuple(out)

    def build(self, lineno: int, spec: dict) -> Line:
        strings = self.strings  # one str object per distinct name, not one per line
        for k in _NAME_FIELDS:
            v = spec.get(k)
            if v.__class__ is str:
                spec[k] = strings.setdefault(v, v)
        for k in ("reads", "writes"):
            if k in spec:
                spec[k] = self.resolve(spec[k])
        if spec["op"] in BUFFER_OPS and spec["nbytes"] is None:
            spec["nbytes"] = max(self.implicit.get((spec["rank"], spec["buffer"]), 0), DEFAULT_SIZE)
        line = Line(lineno=lineno, path=self.path, **spec)
        if line.rare is not None:  # (equal ones: one tuple)
            line.rare = self.rares.setdefault(line.rare, line.rare)
        return line


