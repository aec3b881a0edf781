"""The modelling API: what a model's host programs call, shaped like torch.cuda and torch.distributed.

A host program is a plain function ``program(host, *args)``. It runs on one host thread of one rank
and calls methods of :class:`Host` (``host.launch``, ``host.group("pp").isend``, ``work.wait()``,
``event.synchronize()``...), which read like the worker code they mirror. :class:`Simulation`
declares ranks, groups and host programs; :mod:`.handles` holds the objects a program holds
(streams, events, ``Work`` handles, process groups) and :mod:`.host` the host thread's calls.
Host programs that replay a file (an op log) use the same API, and say which line of the file
the ops that follow stand for with one label, ``host.origin = Origin(...)`` (:mod:`.origins`).
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Sequence

from ..trace import Trace
from .comm import P2P_STREAMS, GroupConfig
from .engine import Engine
from .errors import ModelError
from .handles import Event, Group, P2POp, Signal, Stream, Work
from .host import Host
from .memory import Buffer
from .origins import Origin

__all__ = ["Simulation", "Host", "Stream", "Event", "Work", "Group", "P2POp", "Signal", "Buffer",
           "Origin"]


class Simulation:
    """A set of ranks, process groups and host programs, run once into a :class:`Trace`."""

    def __init__(self, *, seed: int | None = None, jitter: float = 0.0, launch_overhead: float = 0.0,
                 max_ops: int = 5_000_000, max_time: float = 1e12, perturb=None,
                 replay: bool = False):
        """``replay``: the host programs replay a recorded file (an op log), whose every action
        happened: each runs whatever the timing, so a fix's wait for a handle that another thread
        issues waits for that issue (in a model, an action not yet made may never be)."""
        self.engine = Engine(seed=seed, jitter=jitter, max_ops=max_ops, max_time=max_time,
                             launch_overhead=launch_overhead, perturb=perturb)
        self.engine.replaying_log = replay
        self._ran = False

    def group(self, name: str, ranks: Sequence[int], backend: str = "nccl", *,
              latency: float | None = None, bandwidth: float | None = None,
              eager_bytes: int | None = None, blocking_wait: bool = False,
              p2p_streams: str = "per_group") -> GroupConfig:
        """Declare a process group (``new_group``): NCCL ops run on comm stream ``nccl:<name>``.

        ``p2p_streams`` says where its ``isend``/``irecv`` run. ``per_group`` (the default): on
        ``nccl:<name>`` too, FIFO with the group's collectives and every other p2p op of the rank,
        as ProcessGroupNCCL does for a group with a bound device (``split_group``, or
        ``init_process_group(device_id=)``) and for batched p2p. ``per_pair``: on a stream of each
        pair of ranks, ``nccl:<name>:<low>-<high>`` (global ranks), created on first use, as
        ProcessGroupNCCL does for unbatched p2p on a lazily initialised group (a 2-rank
        communicator per pair); the two directions between a pair still share it. Collectives
        stay on ``nccl:<name>``.
        """
        if backend not in ("nccl", "gloo"):
            raise ModelError(f"group {name!r}: backend must be 'nccl' or 'gloo', not {backend!r}")
        if name in self.engine.groups:
            raise ModelError(f"group {name!r} declared twice")
        if p2p_streams not in P2P_STREAMS:
            raise ModelError(f"group {name!r}: p2p_streams must be one of "
                             f"{', '.join(map(repr, P2P_STREAMS))}, not {p2p_streams!r}")
        if backend == "gloo" and p2p_streams != "per_group":
            raise ModelError(f"group {name!r}: p2p_streams={p2p_streams!r} is for NCCL groups "
                             "(gloo runs no CUDA stream)")
        _check_costs(name, latency=latency, bandwidth=bandwidth, eager_bytes=eager_bytes)
        defaults = GroupConfig(name, tuple(ranks), backend)
        if backend == "gloo":
            defaults.latency, defaults.bandwidth = 30.0, 2_000.0
        cfg = GroupConfig(name, tuple(ranks), backend,
                          defaults.latency if latency is None else latency,
                          defaults.bandwidth if bandwidth is None else bandwidth,
                          defaults.eager_bytes if eager_bytes is None else eager_bytes,
                          blocking_wait, p2p_streams)
        _check_stream_names(cfg, self.engine.groups.values())
        self.engine.groups[name] = cfg
        return cfg

    def spawn(self, rank: int, program: Callable, *args, thread: str = "main") -> None:
        """Run ``program(host, *args)`` on host thread ``thread`` of ``rank``."""
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ModelError(f"spawn: rank must be a non-negative int, got {rank!r}")
        self.engine.add_host(rank, thread, program, args, Host)

    def inject_fixes(self, fixes: Sequence, base: Trace | None = None) -> None:
        """Run with ``fixes`` applied: each fix's syncs are issued where it says (fix costing,
        ``simulate(fixes=, base=)``). Fixes that still name op ids are keyed against ``base``,
        the trace of the run they were found in. Call before :meth:`run`."""
        from .inject import inject_fixes  # (the fixes' machinery: loaded only when fixes run)
        inject_fixes(self.engine, base, fixes)

    def run(self, source: str = "", meta: dict | None = None) -> Trace:
        if self._ran:
            raise ModelError("a Simulation runs once; build a new one for another run")
        self._ran = True
        return self.engine.run(source, meta)


def _check_costs(name: str, *, latency, bandwidth, eager_bytes) -> None:
    """A group's cost model must be numbers a transfer time can be made of: a zero bandwidth
    raised ZeroDivisionError at the first send (blamed on the model's ``isend`` line), a NaN or
    infinite one made NaN or infinite times."""
    def bad(field: str, value, want: str) -> ModelError:
        return ModelError(f"group {name!r}: {field} must be {want}, not {value!r}")

    for field, value, positive in (("latency", latency, False), ("bandwidth", bandwidth, True)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise bad(field, value, "a number")
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise bad(field, value, "a finite number > 0 (bytes per µs)" if positive else
                      "a finite number >= 0 (µs)")
    whole = isinstance(eager_bytes, numbers.Integral) and not isinstance(eager_bytes, bool)
    if eager_bytes is not None and not (whole and eager_bytes >= 0):
        raise bad("eager_bytes", eager_bytes, "an int >= 0 (bytes)")


def _check_stream_names(new: GroupConfig, groups) -> None:
    """Two groups must not share a comm stream: a per-pair stream ``nccl:G:a-b`` of group G is
    another group's ``nccl:<name>`` when that group is named ``G:a-b``."""
    def is_pair_stream_of(g: GroupConfig, name: str) -> bool:
        if g.backend != "nccl" or g.p2p_streams != "per_pair" or not name.startswith(g.name + ":"):
            return False
        lo, _, hi = name[len(g.name) + 1:].partition("-")
        return (lo.isdigit() and hi.isdigit() and int(lo) < int(hi)
                and {int(lo), int(hi)} <= set(g.ranks))

    for old in groups:
        for a, b in ((new, old), (old, new)):
            if a.backend == "nccl" and is_pair_stream_of(b, a.name):
                raise ModelError(f"group {new.name!r}: its comm stream nccl:{a.name} would be "
                                 f"a per-pair stream of group {b.name!r}; rename one of them")
