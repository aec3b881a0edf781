"""Explore schedules: many seeded runs of one model, each hazard pattern counted with its replay.

A latent hazard is a bug waiting for the right timing. :func:`explore_schedules` runs a model
``runs`` times, each with its own seed, under one of two strategies, and reports for every hazard
pattern in how many runs it manifested, the first seed where it did, and the ``streamsim run``
command that replays that run exactly::

    >>> from streamsim.explore.hunt import explore_schedules
    >>> res = explore_schedules("models/vllm_pp.py", "ring_no_wait", {"ring_slots": 2}, runs=200,
    ...                         seed=0)
    >>> for p in res.patterns:
    ...     print(p.pattern.kind, p.manifest_runs, p.first_seed, p.replay)

Seeds. Run ``i`` (0-based) of an exploration with base seed ``S`` uses seed ``S * 1_000_003 + i``
(:func:`run_seeds`): readable in a replay command, prefix-stable (the first 100 runs of a 1,000-run
exploration are the 100 runs of a 100-run one), and distinct across base seeds for runs < 1,000,003.

Strategies (``--strategy``), both fixed by the run's seed, so that a replay reproduces the run:

* ``random``: the engine's multiplicative jitter; every op's duration is multiplied by
  ``e^(F·u)``, ``u`` uniform in [-1, 1] drawn from ``random.Random(seed)``.
* ``pct``: PCT-style priority-change delays (Burckhardt et al., "A randomized scheduler with
  probabilistic guarantees of finding bugs", ASPLOS 2010), on top of the jitter; see
  :class:`PCTPerturb` for the adaptation and its guarantee.

Runs go to local processes (``jobs``, default the core count) or, with ``scheduler``, to a Dask
distributed cluster through its futures API; results are identical and in the same order whatever
the executor (every run is a pure function of its model file, parameters and seed).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..sim.errors import ModelError
from ..sim.model import Model, Params, load_model
from ..sim.runner import DEFAULT_MAX_OPS, DEFAULT_MAX_TIME
from ..pipeline import strategies
from ..pipeline.pct import OpsEstimate, pct_bound
from .runs import (Pattern, RunResult, RunSpec, execute, format_set, replay_command,
                   run_seeds)


@dataclass(frozen=True)
class PatternStats:
    """One hazard pattern over an exploration."""

    pattern: Pattern
    manifest_runs: int  # runs in which it manifested
    seen_runs: int  # runs in which it appeared (manifest or latent)
    first_seed: int | None  # first seed (in run order) where it manifested
    first_seen_seed: int | None  # first seed where it appeared at all
    replay: str | None  # the command replaying first_seed (or first_seen_seed if never manifest)

    @property
    def latent_runs(self) -> int:
        """Runs in which it appeared but did not manifest."""
        return self.seen_runs - self.manifest_runs

    def to_json_dict(self) -> dict:
        return {"pattern": self.pattern.to_json_dict(), "manifest_runs": self.manifest_runs,
                "latent_runs": self.latent_runs, "seen_runs": self.seen_runs,
                "first_seed": self.first_seed, "first_seen_seed": self.first_seen_seed,
                "replay": self.replay}


@dataclass(frozen=True)
class ExploreResult:
    """What :func:`explore` found: per hazard pattern, how often it manifested, how to replay it."""

    model: str  # model path as given
    variant: str
    params: dict  # every parameter value used
    sets: dict  # the ones that differ from the model's defaults (what a replay must --set)
    runs: int
    seed: int
    jitter: float
    strategy: str
    depth: int
    estimate: OpsEstimate | None
    patterns: tuple[PatternStats, ...]
    deadlock_runs: int
    first_deadlock_seed: int | None
    results: tuple[RunResult, ...] = field(repr=False, default=())
    max_ops: int = DEFAULT_MAX_OPS
    max_time: float = DEFAULT_MAX_TIME

    @property
    def seeds(self) -> list[int]:
        return run_seeds(self.seed, self.runs)

    @property
    def manifest_runs(self) -> int:
        """Runs in which some hazard manifested."""
        return sum(r.manifest > 0 for r in self.results)

    @property
    def found(self) -> bool:
        return bool(self.patterns) or self.deadlock_runs > 0

    @property
    def bound(self) -> float | None:
        """PCT's per-run lower bound for hitting a given depth-d hazard (pct only)."""
        return pct_bound(self.estimate, self.depth) if self.estimate is not None else None

    def replay(self, seed: int | None) -> str:
        """The ``streamsim run`` command that reproduces the run with ``seed``."""
        return replay_command(self.model, self.variant, self.sets, seed, self.jitter,
                              self.strategy, self.depth, self.max_ops, self.max_time)

    def to_json_dict(self) -> dict:
        est = self.estimate
        return {"model": self.model, "variant": self.variant, "params": dict(self.params),
                "runs": self.runs, "seed": self.seed, "seeds": f"{self.seeds[0]}..{self.seeds[-1]}"
                if self.runs else None, "jitter": self.jitter, "strategy": self.strategy,
                "depth": self.depth if strategies.get(self.strategy).uses_depth else None,
                "pct": None if est is None else {"ops": est.ops, "agents": est.agents,
                                                  "makespan_us": round(est.makespan_us, 3),
                                                  "bound_per_run": self.bound},
                "manifest_runs": self.manifest_runs,
                "patterns": [p.to_json_dict() for p in self.patterns],
                "deadlock_runs": self.deadlock_runs,
                "first_deadlock_seed": self.first_deadlock_seed,
                "deadlock_replay": None if self.first_deadlock_seed is None
                else self.replay(self.first_deadlock_seed)}


def _prepare(model: Model | str, variant: str | None, params) -> tuple[Model, str, Params, dict]:
    model = load_model(model) if isinstance(model, str) else model
    variant = model.check_variant(variant)
    values = params if isinstance(params, Params) else model.resolve(params)
    sets = {k: v for k, v in values.items() if v != model.params[k].default}
    return model, variant, values, sets


def explore_schedules(model: Model | str, variant: str | None = None,
            params: Mapping[str, Any] | Iterable[str] = (), runs: int = 100, seed: int = 0,
            jitter: float | None = None, strategy: str = strategies.DEFAULT, depth: int = 2,
            jobs: int | None = None, scheduler=None, *, max_ops: int = DEFAULT_MAX_OPS,
            max_time: float = DEFAULT_MAX_TIME, progress: bool = False) -> ExploreResult:
    """Run ``model`` ``runs`` times, seeds :func:`run_seeds` ``(seed, runs)``, and collect hazards.

    ``params``: a mapping of typed values or ``"k=v"`` strings. ``jitter`` defaults to 0.2 for
    ``random`` and 0 for ``pct`` (the strategy's ``default_jitter``). ``depth``: PCT's bug depth (``depth - 1`` change points).
    ``jobs``/``scheduler``: see :func:`execute`. ``progress``: a tqdm bar on stderr (TTY only).
    """
    strat = strategies.get(strategy)
    if runs < 1:
        raise ModelError(f"runs must be >= 1, got {runs}", arguments=("runs",))
    if depth < 1:
        raise ModelError(f"depth must be >= 1, got {depth}", arguments=("depth",))
    jitter = strat.default_jitter if jitter is None else float(jitter)
    if jitter < 0:
        raise ModelError(f"jitter must be >= 0, got {jitter}")
    model, variant, values, sets = _prepare(model, variant, params)
    estimate = strat.estimate(model, variant, values, max_ops=max_ops, max_time=max_time) \
        if strat.needs_estimate else None
    spec = RunSpec(model_path=os.path.abspath(model.path), variant=variant, params=dict(values),
                   jitter=jitter, strategy=strategy, depth=depth, estimate=estimate,
                   max_ops=max_ops, max_time=max_time, cwd=os.getcwd())
    seeds = run_seeds(seed, runs)
    results = execute([(spec, s) for s in seeds], jobs=jobs, scheduler=scheduler,
                      progress=progress, desc=f"explore {variant}")
    return summarise(model.path, variant, values, sets, seed, jitter, strategy, depth, estimate,
                     results, max_ops=max_ops, max_time=max_time)


def summarise(model_path: str, variant: str, values: Mapping, sets: Mapping, seed: int,
              jitter: float, strategy: str, depth: int, estimate: OpsEstimate | None,
              results: Sequence[RunResult], *, max_ops: int = DEFAULT_MAX_OPS,
              max_time: float = DEFAULT_MAX_TIME) -> ExploreResult:
    """Fold run results (in run order) into per-pattern statistics."""
    stats: dict[Pattern, list] = {}  # pattern -> [manifest_runs, seen_runs, first_seed, first_seen]
    deadlocks, first_deadlock = 0, None
    for r in results:
        for p, manifest in r.patterns:
            s = stats.get(p)
            if s is None:
                s = stats[p] = [0, 0, None, r.seed]
            s[1] += 1
            if manifest:
                s[0] += 1
                if s[2] is None:
                    s[2] = r.seed
        if r.deadlock:
            deadlocks += 1
            if first_deadlock is None:
                first_deadlock = r.seed
    def replay(seed):
        return replay_command(model_path, variant, sets, seed, jitter, strategy, depth, max_ops,
                              max_time)

    # most often manifest first, then most often seen; ties in first-seen order
    order = sorted(stats.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
    pats = tuple(PatternStats(p, m, n, first, seen, replay(first if first is not None else seen))
                 for p, (m, n, first, seen) in order)
    return ExploreResult(model=model_path, variant=variant, params=dict(values), sets=dict(sets),
                         runs=len(results), seed=seed, jitter=jitter, strategy=strategy,
                         depth=depth, estimate=estimate, patterns=pats, deadlock_runs=deadlocks,
                         first_deadlock_seed=first_deadlock, results=tuple(results),
                         max_ops=max_ops, max_time=max_time)


def render_explore(res: ExploreResult) -> str:
    """Plain-text summary: one block per hazard pattern with its manifest count and replay."""
    n = res.runs
    seeds = res.seeds
    head = (f"{os.path.splitext(os.path.basename(res.model))[0]} [{res.variant}]: {n} run"
            f"{'s' * (n != 1)}, strategy {strategies.get(res.strategy).describe(res.depth)}"
            + f", jitter {res.jitter:g}, seeds {seeds[0]}..{seeds[-1]}")
    lines = [head]
    if res.sets:
        lines.append("params: " + " ".join(f"{k}={format_set(v)}" for k, v in res.sets.items()))
    est = res.estimate
    if est is not None:
        lines.append(f"pct: k={est.ops} ops, n={est.agents} agents, {res.depth - 1} change "
                     f"point{'s' * (res.depth != 2)} a run; a depth-{res.depth} hazard manifests "
                     f"with probability >= 1/(n*k^{res.depth - 1}) = {res.bound:.3g} a run")
    if not res.patterns:
        lines.append("no data hazard in any run")
    else:
        lines.append(f"{len(res.patterns)} hazard pattern{'s' * (len(res.patterns) != 1)}; some "
                     f"hazard manifested in {res.manifest_runs}/{n} runs")
    for i, p in enumerate(res.patterns, 1):
        pat = p.pattern
        lines.append("")
        lines.append(f"[{i}] {pat.kind} on {pat.buffer!r}: manifest in {p.manifest_runs}/{n} runs"
                     f" ({p.manifest_runs / n:.1%}), latent in {p.latent_runs}")
        lines.append(f"    first : {pat.first} at {pat.first_location or '?'}")
        lines.append(f"    second: {pat.second} at {pat.second_location or '?'}")
        if p.first_seed is not None:
            lines.append(f"    first manifest seed: {p.first_seed}")
        else:
            lines.append(f"    never manifest; first seen with seed {p.first_seen_seed}")
        lines.append(f"    replay: {p.replay}")
    lines.append("")
    if res.deadlock_runs:
        lines.append(f"DEADLOCK in {res.deadlock_runs}/{n} runs; first seed "
                     f"{res.first_deadlock_seed}: {res.replay(res.first_deadlock_seed)}")
    else:
        lines.append(f"no deadlock in {n} runs")
    return "\n".join(lines) + "\n"
