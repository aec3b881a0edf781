"""Run a model (one variant, one parameter set, one seed) into a trace, optionally with fixes."""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .errors import ModelError
from .model import Model, Params, load_model
from ..trace import Trace

DEFAULT_MAX_OPS = 5_000_000  # ops a run may issue (--max-ops): stops a runaway model
DEFAULT_MAX_TIME = 1e12  # simulated microseconds a run may last (--max-time)


def simulate(model: Model | str, variant: str | None = None,
             params: Mapping[str, Any] | Iterable[str] = (), *, seed: int | None = None,
             jitter: float = 0.0, fixes: Sequence = (), base: Trace | None = None,
             max_ops: int = DEFAULT_MAX_OPS, max_time: float = DEFAULT_MAX_TIME, perturb=None,
             max_wall: float | None = None) -> Trace:
    """Build and run one variant of a model; errors in the model become one-line ModelErrors.

    ``fixes`` are injected as extra syncs at the places they name, to measure what they cost: fixes
    keyed for injection (:func:`streamsim.sim.inject.key_fixes`), or fixes found in ``base``
    (:func:`streamsim.analysis.fixes.propose_fix`), keyed against it first.
    ``max_wall``: seconds of wall-clock time the run may take (default: ``default_wall_bound``).
    """
    from .api import Simulation  # (the engine, and what guards a model's code: loaded when a
    from .guard import model_failure, model_output  # model runs, not by an op log's check)
    from .wallclock import wall_bound
    if isinstance(model, str):
        model = load_model(model)
    variant = model.check_variant(variant)
    values = params if isinstance(params, Params) else model.resolve(params)
    sim = Simulation(seed=seed, jitter=jitter, max_ops=max_ops, max_time=max_time,
                     perturb=perturb)
    meta = {"model": model.name, "variant": variant, "params": dict(values), "seed": seed,
            "jitter": jitter}
    before = _globals_fingerprint(model)
    try:
        with wall_bound(max_wall, max_ops=max_ops, label=model.path), model_output():
            model.build(sim, values, variant)
            if fixes:
                sim.inject_fixes(fixes, base)
            trace = sim.run(source=model.path, meta=meta)
    except BaseException as e:  # any failure of the model's code: one line naming its line
        raise model_failure(e, model.path) from None
    changed = _changed_global(before, _globals_fingerprint(model))
    if changed is not None:
        raise ModelError(f"{model.path}: the run changed the model's global {changed!r}: runs of "
                         "one model must not share state (explore and compare reuse the loaded "
                         "model; keep the state inside build())")
    return trace


def _globals_fingerprint(model: Model) -> dict[str, tuple]:
    """What a run could change in the model's module: each global's identity, and the contents of
    a global list, dict or set (its repr when small, else its size): a shallow check, cheap enough
    for every run, that catches the usual counter or cache kept between runs."""
    if model.module is None:
        return {}
    return {k: (id(v), (repr(v) if len(v) <= 256 else len(v))
                if isinstance(v, (list, dict, set)) else None)
            for k, v in vars(model.module).items() if not k.startswith("__")}


def _changed_global(before: dict[str, tuple], after: dict[str, tuple]) -> str | None:
    if before == after:
        return None
    return next((k for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)))
