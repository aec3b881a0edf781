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

from typing import Callable, Sequence

from ..trace import Trace
from .groups import GroupConfig, declare_group
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
        return declare_group(self.engine.groups, name, ranks, backend, latency=latency,
                             bandwidth=bandwidth, eager_bytes=eager_bytes,
                             blocking_wait=blocking_wait, p2p_streams=p2p_streams)

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
