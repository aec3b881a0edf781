"""The ``pct`` strategy: PCT-style delays at ``depth - 1`` seeded change points (the algorithm,
its adaptation and its guarantee are in :mod:`streamsim.pipeline.pct`)."""
from __future__ import annotations

from .base import Strategy


class PCT(Strategy):
    name = "pct"
    help = "PCT delays at depth-1 seeded change points"
    default_jitter = 0.0
    uses_depth = True
    needs_estimate = True  # k, n, M of the unperturbed run
    seeded = True  # the change points are drawn from the seed
    applies_to_oplog = False  # it perturbs a model's ops by their ids
    no_fix_cost = "a fix's extra ops would move PCT's change points onto other ops"

    def estimate(self, model, variant, values, *, max_ops, max_time):
        from ..pct import estimate_ops  # (imported when PCT runs: not in every start-up)
        return estimate_ops(model, variant, values, max_ops=max_ops, max_time=max_time)

    def perturb(self, depth, seed, estimate, jitter):
        if estimate is None:
            raise ValueError("the pct strategy needs an OpsEstimate")
        from ..pct import PCTPerturb
        return PCTPerturb(depth, seed, estimate, jitter)

    def timing(self, depth):
        return f"PCT depth {depth}"
