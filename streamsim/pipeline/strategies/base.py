"""What an exploration strategy provides: the one interface every strategy module implements.

Modelled on awslabs/shuttle's ``Scheduler`` trait (one interface, a file per scheduler): a stage
asks the strategy, never compares its name. A strategy perturbs one run's schedule, drawn from the
run's seed; it says whether it needs ``--depth``, whether it can apply to an op log, whether fix
costing is meaningful under it, and how reports and replay commands describe it.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

Perturb = Callable[[Any, Any], float]  # an Engine(perturb=...): (rng, op record) -> extra us


class Strategy:
    """One exploration strategy (subclass it, set the attributes, register an instance in
    :mod:`streamsim.pipeline.strategies`)."""

    name: str = ""  # the --strategy value
    help: str = ""  # what it does, for --strategy's help: "random = <help>"
    default_jitter: float = 0.0  # explore's jitter when none is given
    uses_depth: bool = False  # reads --depth (reports and replay commands then show it)
    needs_estimate: bool = False  # needs estimate() of the model before perturbing it
    seeded: bool = False  # draws from the seed even with no jitter (so a run is a seeded one)
    applies_to_oplog: bool = True  # an op log can be run under it (op logs take jitter only)
    no_fix_cost: str | None = None  # why fixes are not costed under it (None: they are)

    def estimate(self, model, variant: str, values: Mapping[str, Any], *, max_ops: int,
                 max_time: float):
        """What the strategy measures of a model once, before its runs (None: nothing)."""
        return None

    def perturb(self, depth: int, seed: int | None, estimate, jitter: float) -> Perturb | None:
        """The engine perturbation of one run (None: the jitter alone)."""
        return None

    def describe(self, depth: int) -> str:
        """The strategy as a report's header names it."""
        return f"{self.name} (depth {depth})" if self.uses_depth else self.name

    def timing(self, depth: int) -> str:
        """How the strategy perturbs a run's timing, for a sweep's label ("" : not at all)."""
        return ""

    def replay_args(self, depth: int) -> list[str]:
        """The ``streamsim run`` arguments that select it."""
        return ["--strategy", self.name] + (["--depth", str(depth)] if self.uses_depth else [])

    def __repr__(self) -> str:
        return f"<strategy {self.name}>"
