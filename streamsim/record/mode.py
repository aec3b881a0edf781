"""The recorder: one ``TorchDispatchMode`` that sees every aten and c10d op of a rank.

Each op the mode sees becomes an op-log line (docs/oplog.md), written as it happens to the rank's
file: an aten op on CPU tensors is ``host`` work of the thread (it runs on it), on CUDA tensors a
``launch`` on the current stream, with what it reads and writes (:mod:`.access`); a c10d op the
comm op of :mod:`.c10d`, with a handle the waits of :mod:`.works` name; CUDA's events, syncs and
allocations come from :mod:`.cuda`. Every line carries its user site (:mod:`.sites`) and its issue
time ``t`` (µs of a clock shared by the machine's processes, so rank files merge by it,
:mod:`.merge`); an op's measured duration is its ``dur``. Each process group is declared (its
backend and ranks) before its first op.

``record(path)`` is the context manager a program uses itself; ``streamsim record -- CMD``
starts a :class:`Recorder` in every rank from ``init_process_group`` on (:mod:`.launch`).

One module because every line takes one path to the rank's file, under one lock and in one order:
an op's line, the ``alloc`` lines its refs cause, its handle's waits, and the lines held behind a
receive from any source or inside a coalesced group (:mod:`.coalesce`).
"""
from __future__ import annotations

import contextlib
import os
from collections import deque
import sys
import threading
import time
from typing import Any, Iterator

import orjson

from .access import byte_range, op_name, split_access, strided_fields, tensors_in
from .buffers import Buffers
from .coalesce import Coalescing
from .c10d import GROUP_ARG, OPS, UNSUPPORTED, sides
from .cuda import CudaHooks
from .sites import user_site
from .version import RecordError, require_torch
from .works import Handle, Works

_active: "Recorder | None" = None  # the process's recorder while one records
_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _us(ns: int) -> float:
    return round(ns / 1000.0, 1)


class Recorder:
    """Records one rank into the op-log file ``path`` (see the module docstring)."""

    def __init__(self, path: str, rank: int | None = None):
        torch = require_torch()
        self.torch = torch
        self.path = path
        self.file = open(path, "wb")
        self.rank = rank
        self.step: int | None = None
        self.labels: list[str] = []  # the user's open label() regions, outermost first
        self.lines = 0
        self.ops = 0  # ops the mode saw (aten and c10d), recorded or not
        self.handles = 0
        self.groups: dict[Any, tuple[str, int, dict]] = {}  # ProcessGroup -> (name, my rank, ...)
        self.backends: dict[str, str] = {}  # a declared group's name -> its backend
        self.unsupported: set[str] = set()
        self.buffers = Buffers(self._alloc_line)
        self.works = Works(self._handle_line)
        self.coalescing = Coalescing(self._write, self.works.issued)
        self.cuda = CudaHooks(self._emit)
        self.mode = _make_mode(torch, self)
        self.lock = threading.Lock()
        self.site: str | None = None  # the current op's, for the alloc lines it causes
        self.t_ns = 0  # the current op's issue time, for the alloc lines it causes
        self.closed = False
        self.held: deque[dict] = deque()  # lines held behind a receive from any source
        self.held_open: dict[int, dict] = {}  # id -> a held receive whose source is not known
        self.dropped_handles: set[str] = set()  # of receives whose source was never known
        self.file.write(b"# streamsim op log (version 2), recorded by streamsim record\n")

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Enter the mode on this thread and replace the Work methods."""
        global _active
        if _active is not None:
            raise RecordError("streamsim record: a recording is already running in this process")
        _active = self
        torch = self.torch
        import torch.distributed as dist
        if self.rank is None:
            self.rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        if dist.is_available():
            self.works.install(dist.Work, torch._C.Future)
            from torch._C._distributed_c10d import ProcessGroup
            self.coalescing.install(ProcessGroup)
        if torch.cuda.is_available():
            torch._C._activate_gpu_trace()
            import torch.cuda._gpu_trace as gpu_trace
            self.cuda.register(gpu_trace)
        self.mode.__enter__()

    def stop(self) -> None:
        """Leave the mode, put the Work methods back, close the file (once)."""
        global _active
        if self.closed:
            return
        self.closed = True
        try:
            self.mode.__exit__(None, None, None)
        finally:
            self.coalescing.uninstall()
            self.works.uninstall()
            for d in list(self.held_open.values()):  # (receives never seen completed)
                self._resolve(d, None)
            _active = None
            self.file.close()

    # -- lines --------------------------------------------------------------------------------------
    def _emit(self, fields: dict, t_ns: int | None = None, site: str | None = None,
              with_site: bool = True, hold: bool = False) -> dict | None:
        """Write one op line (returned, or None when nothing records). ``hold``: the line of a
        receive from any source, written once its source is known (the peer the program
        observed, :meth:`_resolve`); the lines after it are held behind it, in order."""
        if self.closed or _active is not self:
            return None
        fields["rank"] = self.rank
        thread = threading.current_thread()
        if thread is not threading.main_thread():
            fields["host"] = thread.name
        if self.step is not None:
            fields["step"] = self.step
        if self.labels and "name" in fields:
            fields["name"] = f"{'/'.join(self.labels)}: {fields['name']}"
        fields["t"] = _us(time.monotonic_ns() if t_ns is None else t_ns)
        if with_site:
            fields["site"] = site or user_site(2)
        group = None if hold else self.coalescing.group()
        with self.lock:
            self.lines += 1
            if group is not None:  # (written when the coalesced group ends)
                group.lines.append(fields)
                return fields
            if hold:
                self.held_open[id(fields)] = fields
            self._write_locked(fields, hold)
        return fields

    def _write(self, fields: dict) -> None:
        """Write a line a coalesced group held (:mod:`.coalesce`)."""
        with self.lock:
            self._write_locked(fields, False)

    def _write_locked(self, fields: dict, hold: bool) -> None:
        """Write a line now, or hold it behind a receive whose source is not known yet."""
        if self.held or hold:
            self.held.append(fields)
        else:
            self.file.write(orjson.dumps(fields) + b"\n")

    def _resolve(self, fields: dict, source: int | None) -> None:
        """The held receive ``fields`` completed from ``source`` (a global rank; None: never
        known): write the held lines up to the next receive still open. A receive whose source
        is never known is left out, with the waits and queries on its handle, and a comment
        says so."""
        with self.lock:
            self.held_open.pop(id(fields), None)
            if source is None:
                fields["_unknown"] = True
            else:
                fields["peer"] = source
            held = self.held
            while held and id(held[0]) not in self.held_open:
                d = held.popleft()
                if d.pop("_unknown", False):
                    self.dropped_handles.add(d["handle"])
                    self.file.write(f"# streamsim record: irecv from any source at "
                                    f"{d['site']} never completed: its source is unknown, so "
                                    "its line and the waits on its handle are left out\n"
                                    .encode())
                    continue
                if d["op"] in ("wait", "query") and d.get("handle") in self.dropped_handles:
                    continue
                self.file.write(orjson.dumps(d) + b"\n")

    def _declare(self, fields: dict) -> None:
        """A declaration line (no rank, site or time: it describes the run, it is no op)."""
        with self.lock:
            self.file.write(orjson.dumps(fields) + b"\n")

    def _alloc_line(self, name: str, nbytes: int, site: str | None) -> None:
        """The ``alloc`` line of a storage new to the recording, at the current op: with the
        allocation site when the op made it; without one for a storage made before recording
        or outside the dispatcher (root causes then group it by name)."""
        self._emit({"op": "alloc", "buffer": name, "nbytes": nbytes}, self.t_ns, site,
                   with_site=site is not None)

    def _handle_line(self, op: str, h: Handle, t_ns: int, **extra: Any) -> None:
        site = user_site(3)
        for name in (h.name, *h.also) if op == "wait" else (h.name,):
            fields = {"op": op, "handle": name, **extra}
            if op == "wait" and self.torch.cuda.is_available():
                fields["stream"] = self.cuda.stream(self.torch.cuda.current_stream().cuda_stream)
            self._emit(fields, t_ns, site)
        if op == "wait":  # (a wait may never return: a rank killed there keeps its log)
            with self.lock:
                self.file.flush()

    def refs(self, tensors: list, made_here: set[int] | None = None) -> list:
        """Op-log buffer refs of ``tensors``: the name when a tensor covers its whole storage,
        a strided ref when it touches only some bytes of its range, else ``{"buffer", "offset",
        "nbytes"}``; a storage new to the recording is named with
        its allocation site when this op made it (``made_here``: ids of its outputs)."""
        out = []
        for t in tensors:
            span = byte_range(t)
            if span is None:
                continue
            storage = t.untyped_storage()
            new = made_here is not None and id(t) in made_here
            name = self.buffers.name_of(storage, self.site if new else None)
            offset, nbytes = span
            pattern = strided_fields(t)
            if pattern is not None:  # only some bytes of its range: a strided ref
                out.append({"buffer": name, "offset": offset, **pattern})
            elif offset == 0 and nbytes == storage.nbytes():
                out.append(name)
            else:
                out.append({"buffer": name, "offset": offset, "nbytes": nbytes})
        return out

    # -- ops ----------------------------------------------------------------------------------------
    def aten(self, func: Any, args: tuple, kwargs: dict) -> Any:
        t0 = time.monotonic_ns()
        out = func(*args, **kwargs)
        t1 = time.monotonic_ns()
        self.ops += 1
        reads, writes, made = split_access(func, args, kwargs, out)
        if not reads and not writes:
            return out
        self.site = site = user_site(3)
        self.t_ns = t0
        outs = {id(t) for t in made}
        fields: dict = {"op": "host", "name": op_name(func)}
        cuda = any(t.is_cuda for t in reads + writes)
        if cuda:
            fields["op"] = "launch"
            fields["stream"] = self.cuda.stream(self.torch.cuda.current_stream().cuda_stream)
        r, w = self.refs(reads), self.refs(writes, outs)
        if r:
            fields["reads"] = r
        if w:
            fields["writes"] = w
        if not r and not w:
            return out
        fields["dur"] = _us(t1 - t0)
        self._emit(fields, t0, site)
        return out

    def c10d(self, func: Any, args: tuple, kwargs: dict) -> Any:
        name = op_name(func)
        spec = OPS.get(name)
        self.ops += 1
        if spec is None:
            if name not in self.unsupported and name in UNSUPPORTED:
                self.unsupported.add(name)
                print(f"streamsim record: warning: not recorded: {name} "
                      f"({UNSUPPORTED[name]})", file=sys.stderr)
            return func(*args, **kwargs)
        self.site = site = user_site(3)
        t0 = self.t_ns = time.monotonic_ns()
        group, my, peers = self.group_of(args[GROUP_ARG[name]], args)
        read_vals, write_vals = sides(spec, args, my)
        reads = [t for v in read_vals for t in tensors_in(v)]
        writes = [t for v in write_vals for t in tensors_in(v)]
        self.cuda.in_c10d = True
        try:
            out = func(*args, **kwargs)
        finally:
            self.cuda.in_c10d = False
        self.handles += 1
        handle = f"h{self.handles}"
        fields: dict = {"op": spec.kind, "name": spec.label, "group": group}
        if spec.peer is not None or spec.any_source:
            fields["tensors"] = self.refs(reads or writes)
            if spec.peer is not None:
                fields["peer"] = peers(args[spec.peer])
            fields["nbytes"] = sum(t.numel() * t.element_size() for t in reads or writes)
        elif spec.kind == "reduce":  # (the root's writes: the reader derives them from root)
            fields["tensors"] = self.refs(reads)
        elif spec.kind in ("gather", "scatter"):  # the root's list on the root's line alone
            is_root = args[spec.root] == my
            if spec.kind == "gather" or is_root:
                fields["inputs"] = self.refs(reads)
            if spec.kind == "scatter" or is_root:
                fields["outputs"] = self.refs(writes)
        elif spec.kind == "barrier":
            pass
        elif spec.reads == spec.writes and spec.root_only is None:
            fields["tensors"] = self.refs(reads)
        else:
            fields["inputs"], fields["outputs"] = self.refs(reads), self.refs(writes)
        if spec.root is not None and spec.kind != "broadcast":
            fields["root"] = peers(args[spec.root])
        fields["handle"] = handle
        if spec.any_source:
            fields["any_source"] = True
        line = self._emit(fields, t0, site, hold=spec.any_source)
        work = out[-1] if isinstance(out, tuple) else out
        h = Handle(handle, spec.label, site)
        coalesced = self.coalescing.group()
        if coalesced is not None and line is not None and not (spec.blocking or
                                                                  spec.any_source):
            # (its Work, None on NCCL, is not the program's: the group's is, at its end)
            self.coalescing.member(coalesced, line, h, self.backends.get(group) == "nccl")
            return out
        if spec.any_source and line is not None:
            h.on_done = lambda w, line=line, peers=peers: self._resolve(
                line, peers(w._source_rank()))
        if spec.blocking or work is None:
            h.waited = True
            self._emit({"op": "wait", "handle": handle}, t0, site)
        else:
            import torch.distributed as dist
            if _issued_by_python():
                self.works.issued(dist.Work.unbox(work), h)
            else:
                self.works.issued_by_cpp(dist.Work.unbox(work), h)
        return out

    @staticmethod
    def backend_of(args: tuple) -> str:
        """The backend a group is declared with, from its first op's tensors: ``nccl`` for CUDA
        tensors, else ``gloo``."""
        cuda = any(t.is_cuda for v in args if isinstance(v, (list, tuple)) or
                   hasattr(v, "is_cuda") for t in tensors_in(v))
        return "nccl" if cuda else "gloo"

    def group_of(self, pg_boxed: Any, args: tuple) -> tuple[str, int, Any]:
        """The op-log name of a c10d op's process group, this rank's rank in it and a function
        from its group ranks to global ranks; its ``group`` line is written on first sight."""
        import torch.distributed as dist
        from torch._C._distributed_c10d import ProcessGroup
        pg = ProcessGroup.unbox(pg_boxed)
        known = self.groups.get(pg)
        if known is None:
            ranks = dist.get_process_group_ranks(pg)
            is_world = pg is dist.group.WORLD or (
                dist.distributed_c10d._world.default_pg is pg)
            name = "world" if is_world else \
                f"pg{dist.distributed_c10d._world.pg_names.get(pg, len(self.groups))}"
            backend = self.backends[name] = self.backend_of(args)
            self._declare({"op": "group", "group": name, "backend": backend,
                           "ranks": sorted(ranks)})
            known = self.groups[pg] = (name, dist.get_rank(pg),
                                       lambda r, pg=pg: dist.get_global_rank(pg, r))
        return known


_C10D_API = os.sep + os.path.join("torch", "distributed", "distributed_c10d.py")
_TORCH_DIR = os.sep + "torch" + os.sep


def _issued_by_python() -> bool:
    """Whether the c10d op being recorded was called by torch.distributed's Python API (its
    caller's Work reaches Python code, which waits it), not by C++ (DDP's reducer and start-up
    syncs, whose Works C++ waits): going out from the op through torch's own frames (dispatch
    wrappers, compile guards, nn, autograd), ``distributed_c10d.py`` met before any user frame."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.endswith(_C10D_API):
            return True
        if not (name.startswith(_OWN) or _TORCH_DIR in name):
            return False
        f = f.f_back
    return False


def _make_mode(torch: Any, rec: Recorder) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordMode(TorchDispatchMode):
        """Hands every op to the recorder (c10d ops to ``Recorder.c10d``)."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if rec.works.fresh:
                rec.works.handed_over()
            if rec.works.inferred:
                rec.works.poll()
            if func.namespace == "c10d":
                return rec.c10d(func, args, kwargs)
            return rec.aten(func, args, kwargs)

    return RecordMode()


def set_step(step: int | None) -> None:
    """Label the lines recorded from now on with ``step`` (None: no step): a program's own
    iteration number, for step metrics and ``streamsim record --steps``; a no-op when nothing
    records."""
    if _active is not None:
        _active.step = step


@contextlib.contextmanager
def label(text: str) -> Iterator[None]:
    """Name the ops recorded inside the block ``TEXT: op`` (nested: ``OUTER/INNER: op``): for
    code whose sites alone do not tell its callers apart (every send made by one helper function
    has the helper's line as its site). A no-op when nothing records."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"streamsim.record.label: text must be a non-empty string, got {text!r}")
    rec = _active
    if rec is None:
        yield
        return
    rec.labels.append(text)
    try:
        yield
    finally:
        rec.labels.pop()


@contextlib.contextmanager
def record(path: str | os.PathLike) -> Iterator[Recorder]:
    """Record this process's ops into the op log ``path`` while the block runs.

    Inside a multi-rank program every rank runs the block: each writes ``PATH.rank<R>``, and at
    the end, after a barrier the recording does not see, rank 0 merges them into ``path``."""
    path = os.fspath(path)
    require_torch()
    import torch.distributed as dist
    multi = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    part = f"{path}.rank{dist.get_rank() if multi else 0}"
    rec = Recorder(part)
    rec.start()
    try:
        yield rec
    finally:
        rec.stop()
        if multi:
            dist.barrier()
        if not multi or dist.get_rank() == 0:
            from .merge import merge_files
            parts = [f"{path}.rank{r}" for r in range(dist.get_world_size() if multi else 1)]
            merge_files(parts, path)
            for p in parts:
                os.remove(p)
