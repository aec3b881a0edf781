"""A process group's configuration: its backend, the streams its ops run on, its cost model.

``Simulation.group`` declares a group of a model through :func:`declare_group`, and an op log's
replay declares each of the log's groups the same way (the compiled replay too, which makes no
engine: this module imports nothing of it); :func:`cost_model` is what a trace's meta says of them.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Iterable

from .errors import ModelError

P2P_STREAMS = ("per_group", "per_pair")  # where a group's NCCL isend/irecv run (GroupConfig)


@dataclass
class GroupConfig:
    """A process group: its backend, cost model (microseconds, bytes per microsecond), and the
    NCCL stream its point-to-point ops run on (``p2p_streams``, see :meth:`p2p_stream`)."""

    name: str
    ranks: tuple[int, ...]
    backend: str = "nccl"  # "nccl" or "gloo"
    latency: float = 10.0
    bandwidth: float = 25_000.0  # bytes/us (25 GB/s)
    eager_bytes: int = 64 * 1024
    blocking_wait: bool = False
    p2p_streams: str = "per_group"

    def transfer_time(self, nbytes: int) -> float:
        return self.latency + nbytes / self.bandwidth

    def p2p_stream(self, rank: int, peer: int, kind: str = "isend") -> str:
        """The comm stream of an isend/irecv (``kind``) between ``rank`` and ``peer``: the group's
        own ``nccl:<name>`` (``per_group``: one communicator, FIFO with the group's collectives and
        every other p2p op), or one stream per unordered pair ``nccl:<name>:<low>-<high>``
        (``per_pair``: ProcessGroupNCCL's lazily created 2-rank communicators, key "low:high").
        A gloo group's tensor sends to ``peer`` run in order on ``gloo:<name>:to<peer>`` and its
        receives from ``peer`` on ``gloo:<name>:from<peer>``: gloo's pair keeps each direction
        FIFO, and a send does not wait for an earlier receive (nor for the group's collectives)."""
        if self.backend == "gloo":
            return f"gloo:{self.name}:{'to' if kind == 'isend' else 'from'}{peer}"
        if self.p2p_streams == "per_pair":
            return f"nccl:{self.name}:{min(rank, peer)}-{max(rank, peer)}"
        return f"nccl:{self.name}"


def cost_model(launch_overhead: float, groups: Iterable[GroupConfig]) -> dict:
    """The trace's ``meta["cost_model"]``: the launch overhead, and each group's settings in the
    order the groups were declared (:meth:`Engine.cost_model`; the compiled replay's too)."""
    return {"launch_overhead": launch_overhead,
            "groups": [dict(name=g.name, backend=g.backend, ranks=list(g.ranks),
                            latency=g.latency, bandwidth=g.bandwidth,
                            eager_bytes=g.eager_bytes, blocking_wait=g.blocking_wait,
                            p2p_streams=g.p2p_streams) for g in groups]}


def declare_group(groups: dict[str, GroupConfig], name: str, ranks, backend: str = "nccl", *,
                  latency: float | None = None, bandwidth: float | None = None,
                  eager_bytes: int | None = None, blocking_wait: bool = False,
                  p2p_streams: str = "per_group") -> GroupConfig:
    """Check a group's declaration and add its :class:`GroupConfig` (the backend's defaults
    for what it leaves out) to ``groups``, name -> config: ``Simulation.group``, and the
    compiled replay's groups, which need no engine."""
    if backend not in ("nccl", "gloo"):
        raise ModelError(f"group {name!r}: backend must be 'nccl' or 'gloo', not {backend!r}")
    if name in groups:
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
    _check_stream_names(cfg, groups.values())
    groups[name] = cfg
    return cfg


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
