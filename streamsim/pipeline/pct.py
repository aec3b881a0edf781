"""PCT-style schedule perturbation: the engine delays chosen ops to reorder what is unordered.

:class:`PCTPerturb` adapts PCT (Burckhardt et al., ASPLOS 2010) to a discrete-event simulator;
the ``pct`` strategy (:mod:`streamsim.pipeline.strategies.pct`) applies it to one run for
``--strategy pct --depth d --seed K``, so that a run ``explore`` found replays exactly.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..sim.errors import ModelError
from ..sim.model import Model
from ..sim.runner import DEFAULT_MAX_OPS, DEFAULT_MAX_TIME


@dataclass(frozen=True)
class OpsEstimate:
    """What PCT needs to know about a model before perturbing it: from one unperturbed run."""

    ops: int  # k: ops the unperturbed run issued
    agents: int  # n: host threads and streams of that run
    makespan_us: float  # M: its simulated makespan


def estimate_ops(model: Model | str, variant: str | None,
                 params: Mapping[str, Any] | Iterable[str], *, max_ops: int = DEFAULT_MAX_OPS,
                 max_time: float = DEFAULT_MAX_TIME) -> OpsEstimate:
    """Run the model once with no seed and no jitter (the nominal timing) and measure it."""
    from ..sim.runner import simulate
    trace = simulate(model, variant, params, seed=None, jitter=0.0, max_ops=max_ops,
                     max_time=max_time)
    return OpsEstimate(ops=len(trace.ops), agents=len(trace.agents), makespan_us=trace.end_time)


class PCTPerturb:
    """PCT's priority-change points for a discrete-event simulator (an ``Engine(perturb=...)``).

    PCT (Burckhardt et al. 2010) runs threads by random distinct priorities and, at ``d - 1`` steps
    drawn uniformly among ``k``, lowers the running thread's priority below every other; a bug of
    depth ``d`` (one needing ``d`` ordering constraints) is then hit with probability at least
    ``1 / (n * k^(d-1))``. A discrete-event simulator has no scheduler choice to bias: what runs
    first follows from durations. The adaptation:

    1. ``k``, ``n``, ``M``: ops, agents and makespan of the trace of the model's unperturbed run
       (:func:`estimate_ops`; no seed, no jitter), computed the same way by ``explore`` and by
       ``streamsim run --strategy pct``, so a replay perturbs exactly the same ops.
    2. From ``random.Random(f"pct:{seed}:{depth}:{k}")`` (its own stream: the jitter draws are
       unchanged), draw change points ``c_1 .. c_(d-1)`` independently and uniformly in ``[0, k)``;
       ``c_i`` carries priority ``i`` (1 = lowest).
    3. The op created ``c_i``-th in the run (op ids count ops in the engine's issue order) gets
       ``(d - i) * B`` extra duration, ``B = 2 * M * e^F + 1`` us (``F`` the jitter): longer than
       the whole unperturbed run can last. The op holds its agent (host thread or stream) and
       everything ordered after it, while every op not ordered after it goes ahead: the agent is
       deprioritised from that op on, as at a PCT change point. Priority 1 gets the longest delay,
       so an op deprioritised to priority ``i`` resumes before one at priority ``j < i``, as in
       PCT. When two change points coincide the op takes the longer delay; ops created at index
       ``>= k`` are never delayed. Access windows stay fractions of the (now long) op: an access
       from the op's start on (a send's read, a default whole-op access) overlaps every unordered
       access that goes ahead; one at the op's end (a forward's last-layer write) lands after them.
    4. PCT's random initial priorities pay its ``1/n`` factor; here the simulated timing (nominal
       durations, times the seed's jitter) stands in for them.

    Guarantee: call a hazard *depth d* in a given timing when delaying some ``d - 1`` ops as above
    (for some assignment of the priorities ``1 .. d-1`` to them), each op named by its creation
    index in the run with the delays before it applied (as PCT names steps), makes it manifest
    (depth 1: manifest unperturbed). Each labelled change point lands on its op with
    probability ``1/k``, independently, so a run manifests it with probability
    ``>= 1/k^(d-1) >= 1/(n * k^(d-1))``. Example: a kernel on a side stream that writes a buffer
    another stream reads later with no event between them is depth 2: delaying the writer makes the
    reader overlap it.
    """

    def __init__(self, depth: int, seed: int | None, estimate: OpsEstimate, jitter: float = 0.0):
        if depth < 1:
            raise ModelError(f"depth must be >= 1, got {depth}", arguments=("depth",))
        self.depth, self.seed, self.estimate = depth, seed, estimate
        k = max(1, estimate.ops)
        if depth - 1 > k:  # (drawing them would also take minutes for a depth like 1e8)
            raise ModelError(f"depth {depth}: PCT delays depth - 1 of the run's {k} ops, so the "
                             f"depth can be at most {k + 1}", arguments=("depth",))
        self.unit = 2.0 * estimate.makespan_us * math.exp(jitter) + 1.0
        rng = random.Random(f"pct:{seed}:{depth}:{k}")
        self.delays: dict[int, float] = {}
        for i in range(1, depth):
            c = rng.randrange(k)
            self.delays[c] = max(self.delays.get(c, 0.0), (depth - i) * self.unit)

    @property
    def change_points(self) -> list[int]:
        return sorted(self.delays)

    def __call__(self, rng: random.Random, rec) -> float:
        return self.delays.get(rec.id, 0.0)

    def __repr__(self) -> str:
        return (f"PCTPerturb(depth={self.depth}, seed={self.seed}, "
                f"change_points={self.change_points})")


def pct_bound(estimate: OpsEstimate, depth: int) -> float:
    """PCT's per-run probability bound ``1/(n * k^(d-1))`` for a depth-``depth`` hazard."""
    return 1.0 / (max(1, estimate.agents) * max(1, estimate.ops) ** (depth - 1))
