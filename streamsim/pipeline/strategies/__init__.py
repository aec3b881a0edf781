"""Exploration strategies: one interface (:class:`Strategy`), a module each, one registry.

The registry is the one place a strategy is named: the CLI's ``--strategy`` choices and help, the
explore/sweep/shrink/check stages and the replay commands all read it. Adding a strategy is a module
with a :class:`Strategy` subclass and a :func:`register` call below.
"""
from __future__ import annotations

from ...sim.errors import InputError
from ...sim.runner import DEFAULT_MAX_OPS, DEFAULT_MAX_TIME
from .base import Perturb, Strategy
from .jitter import RandomJitter
from .pct import PCT

DEFAULT = "random"  # the strategy of a run that names none

_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Make ``strategy`` selectable by its name everywhere (``--strategy``, the API)."""
    if not strategy.name or strategy.name in _REGISTRY:
        raise ValueError(f"strategy name {strategy.name!r} empty or taken")
    _REGISTRY[strategy.name] = strategy
    return strategy


def unregister(name: str) -> None:
    """Remove a registered strategy (tests that register one of their own)."""
    del _REGISTRY[name]


def names() -> tuple[str, ...]:
    """The registered strategies' names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> Strategy:
    """The strategy called ``name``; an InputError naming the choices for any other name."""
    s = _REGISTRY.get(name)
    if s is None:
        raise InputError(f"strategy must be one of {', '.join(_REGISTRY)}, not {name!r}",
                         arguments=("strategy",))
    return s


def check_depth(strategy: Strategy, depth: int) -> None:
    if strategy.uses_depth and depth < 1:
        raise InputError(f"depth must be >= 1, got {depth}", arguments=("depth",))


def perturb_for(model, variant: str | None, params, *, strategy: str = DEFAULT, depth: int = 2,
                seed: int | None = None, jitter: float = 0.0, max_ops: int = DEFAULT_MAX_OPS,
                max_time: float = DEFAULT_MAX_TIME) -> Perturb | None:
    """The perturbation that ``streamsim run --strategy S --depth d --seed K`` applies (so that
    replays of explored runs are exact)."""
    s = get(strategy)
    check_depth(s, depth)
    est = s.estimate(model, variant, params, max_ops=max_ops, max_time=max_time) \
        if s.needs_estimate else None
    return s.perturb(depth, seed, est, jitter)


register(RandomJitter())
register(PCT())

__all__ = ["Strategy", "Perturb", "DEFAULT", "register", "unregister", "names", "get",
           "check_depth", "perturb_for"]
