"""One seeded run of a model, anywhere: run specs, results, hazard patterns, local and Dask
executors, and the replay command that reproduces a run.

Every run is a pure function of its model file, parameters and seed, so results are identical and
in the same order whatever the executor.
"""
from __future__ import annotations

import math
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..analysis.metrics import Metrics
from ..sim.errors import ModelError
from ..sim.model import Model, Params, load_model
from ..sim.runner import DEFAULT_MAX_OPS, DEFAULT_MAX_TIME
from ..gcpause import pipeline_entry
from ..pipeline import strategies
from ..pipeline.pct import OpsEstimate
from ..pipeline.workers import Failed, mp_context

SEED_STRIDE = 1_000_003


def run_seeds(seed: int, runs: int) -> list[int]:
    """The per-run seeds of an exploration with base seed ``seed``: ``seed * 1_000_003 + i``."""
    return [seed * SEED_STRIDE + i for i in range(runs)]


# --- root causes as plain data ------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Pattern:
    """A root cause (``analysis.rootcause``) as plain data that runs can send back and compare:
    kind, buffer, and both sites (label and location)."""

    kind: str
    buffer: str
    first: str
    first_location: str
    second: str
    second_location: str

    def describe(self) -> str:
        return (f"{self.kind} on {self.buffer!r}: {self.first} ({self.first_location or '?'}) vs "
                f"{self.second} ({self.second_location or '?'})")

    def to_json_dict(self) -> dict:
        return {"kind": self.kind, "buffer": self.buffer, "first": self.first,
                "first_location": self.first_location, "second": self.second,
                "second_location": self.second_location}


def patterns_of(trace, findings) -> dict[Pattern, bool]:
    """Each root cause of an analysed run, in first-seen order -> whether any instance manifested."""
    out: dict[Pattern, bool] = {}
    for rc in findings.root_causes:
        p = Pattern(rc.kind, rc.buffer, rc.first.label, rc.first.location, rc.second.label,
                    rc.second.location)
        out[p] = out.get(p, False) or rc.manifest > 0
    return out


# --- one run, anywhere ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs to run a model, except the seed (plain data: it is pickled)."""

    model_path: str  # absolute
    variant: str
    params: dict
    jitter: float = 0.0
    strategy: str = strategies.DEFAULT  # a registered name (a spec is pickled)
    depth: int = 2
    estimate: OpsEstimate | None = None
    max_ops: int = DEFAULT_MAX_OPS
    max_time: float = DEFAULT_MAX_TIME
    cwd: str = ""  # the caller's working folder: op locations are reported relative to it
    label: str = ""  # names the run in an error message (a sweep point's grid values)


@dataclass(frozen=True)
class RunResult:
    """One run's outcome, small enough to send back from a worker."""

    seed: int | None
    patterns: tuple[tuple[Pattern, bool], ...]  # (pattern, manifest in this run), first-seen order
    hazards: int  # hazard occurrences
    manifest: int  # of which manifest
    deadlock: bool
    ops: int
    metrics: Metrics
    params: dict = field(default_factory=dict)

    @property
    def latent(self) -> int:
        return self.hazards - self.manifest


_MODELS: dict[tuple[str, float], Model] = {}
_ESTIMATES: dict[tuple, OpsEstimate] = {}


def _model(path: str) -> Model:
    """Load a model file once per process (re-loaded if the file changed)."""
    key = (path, os.path.getmtime(path))
    m = _MODELS.get(key)
    if m is None:
        m = _MODELS[key] = load_model(path)
    return m


def _relocate(loc: str, here: str, there: str) -> str:
    """Rewrite ``path:line``, made relative to ``here``, as the engine would have in ``there``."""
    if not loc or here == there or not there:
        return loc
    path, sep, line = loc.rpartition(":")
    if not sep or not line.isdigit():
        return loc
    full = path if os.path.isabs(path) else os.path.join(here, path)
    rel = os.path.relpath(full, there)
    return f"{rel if not rel.startswith('..') else full}:{line}"


@pipeline_entry  # one run among many: the collector frees each run's cycles between them
def run_one(spec: RunSpec, seed: int | None) -> RunResult:
    """Simulate and analyse one run of ``spec`` with ``seed``."""
    from ..analysis.checks import analyse
    from ..analysis.metrics import compute_metrics
    from ..sim.runner import simulate
    model = _model(spec.model_path)
    estimate, strategy = spec.estimate, strategies.get(spec.strategy)
    if strategy.needs_estimate and estimate is None:  # a sweep point: measured once per process
        key = (spec.model_path, spec.variant, tuple(sorted(spec.params.items())), spec.max_ops,
               spec.max_time)
        estimate = _ESTIMATES.get(key)
        if estimate is None:
            estimate = _ESTIMATES[key] = strategy.estimate(
                model, spec.variant, Params(spec.params), max_ops=spec.max_ops,
                max_time=spec.max_time)
    perturb = strategy.perturb(spec.depth, seed, estimate, spec.jitter)
    try:
        trace = simulate(model, spec.variant, Params(spec.params), seed=seed, jitter=spec.jitter,
                         max_ops=spec.max_ops, max_time=spec.max_time, perturb=perturb)
    except ModelError as e:  # name the run, so that it can be replayed
        where = f"{spec.label}, seed {seed}" if spec.label else f"seed {seed}"
        shown = os.path.relpath(spec.model_path, spec.cwd) if spec.cwd else spec.model_path
        msg = str(e).replace(spec.model_path, spec.model_path if shown.startswith("..") else shown)
        raise e.reworded(f"run with {where}: ", msg) from None
    findings = analyse(trace)
    here = os.getcwd()
    pats = []
    for p, manifest in patterns_of(trace, findings).items():
        if spec.cwd and spec.cwd != here:
            p = Pattern(p.kind, p.buffer, p.first, _relocate(p.first_location, here, spec.cwd),
                        p.second, _relocate(p.second_location, here, spec.cwd))
        pats.append((p, manifest))
    manifest = sum(h.manifest for h in findings.hazards)
    return RunResult(seed=seed, patterns=tuple(pats), hazards=len(findings.hazards),
                     manifest=manifest, deadlock=findings.deadlock is not None,
                     ops=len(trace.ops), metrics=compute_metrics(trace), params=dict(spec.params))


_Failed = Failed  # a chunk's first failing run, sent back as plain data (pipeline.workers)


def run_tasks(tasks: Sequence[tuple[RunSpec, int | None]]) -> list[RunResult] | _Failed:
    """Run a chunk of ``(spec, seed)`` tasks in order (the unit of work sent to a worker); a run
    that fails ends the chunk with a :class:`_Failed`."""
    try:
        return [run_one(spec, seed) for spec, seed in tasks]
    except ModelError as e:
        return _Failed.of(e)


# --- executors ------------------------------------------------------------------------------------

def _chunks(tasks: list, workers: int) -> list[list]:
    """Split tasks into contiguous chunks: a few per worker, for balance and a live progress bar."""
    size = max(1, min(32, math.ceil(len(tasks) / max(1, workers * 8))))
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def _progress(total: int, enabled: bool, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=False,
                disable=not (enabled and sys.stderr.isatty()))


_mp_context = mp_context  # one context helper for every local worker (pipeline.workers)


def _dask_client(scheduler):
    """A Dask ``Client`` for ``scheduler`` (an address, a Client, or a cluster); owned: close it."""
    try:
        from distributed import Client
    except ImportError:
        raise ModelError("scheduler needs Dask: pip install 'streamsim[dask]'",
                         arguments=("scheduler",)) from None
    if isinstance(scheduler, Client):
        return scheduler, False
    try:
        return Client(scheduler, timeout="10s"), True
    except (OSError, ValueError) as e:  # ValueError: not an address ("missing port number")
        raise ModelError(f"scheduler {scheduler}: cannot connect: {e}",
                         arguments=("scheduler",)) from None


def execute(tasks: Sequence[tuple[RunSpec, int | None]], *, jobs: int | None = None,
            scheduler=None, progress: bool = False, desc: str = "runs") -> list[RunResult]:
    """Run ``(spec, seed)`` tasks; results in task order, identical under every executor.

    ``scheduler`` (a Dask scheduler address, ``Client`` or cluster) sends them to a Dask cluster;
    otherwise ``jobs`` local processes (default ``os.cpu_count()``; 1 runs in this process).
    """
    tasks = list(tasks)
    if not tasks:
        return []
    if scheduler is not None:
        return _execute_dask(tasks, scheduler, progress, desc)
    jobs = jobs or os.cpu_count() or 1
    if jobs < 1:
        raise ModelError(f"jobs must be >= 1, got {jobs}", arguments=("jobs",))
    jobs = min(jobs, len(tasks))
    chunks = _chunks(tasks, jobs)
    out: list[list[RunResult] | None] = [None] * len(chunks)
    with _progress(len(tasks), progress, desc) as bar:
        if jobs == 1:
            for i, chunk in enumerate(chunks):
                got = run_tasks(chunk)
                if isinstance(got, _Failed):
                    raise got.exception()
                out[i] = got
                bar.update(len(chunk))
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed
            with ProcessPoolExecutor(max_workers=jobs, mp_context=_mp_context()) as pool:
                futures = {pool.submit(run_tasks, chunk): i for i, chunk in enumerate(chunks)}
                failed: dict[int, BaseException] = {}
                for fut in as_completed(futures):
                    i = futures[fut]
                    got = fut.result()
                    if isinstance(got, _Failed):  # raised below, once known to be the first
                        failed[i] = got.exception()
                    else:
                        out[i] = got
                    bar.update(len(chunks[i]))
                    if failed:  # report the first failing run in seed order, whatever finished
                        first = min(failed)  # first: as with jobs=1 (chunks are contiguous)
                        if all(out[j] is not None or j in failed for j in range(first)):
                            for f in futures:
                                f.cancel()
                            raise failed[first]
    return [r for chunk in out for r in chunk]


def _execute_dask(tasks: list, scheduler, progress: bool, desc: str) -> list[RunResult]:
    client, owned = _dask_client(scheduler)
    try:
        from distributed import as_completed
        workers = max(1, sum(client.nthreads().values()))
        chunks = _chunks(tasks, workers)
        futures = client.map(run_tasks, chunks, pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        with _progress(len(tasks), progress, desc) as bar:
            for fut in as_completed(futures):
                bar.update(len(chunks[index[fut.key]]))
        results = client.gather(futures)
    finally:
        if owned:
            client.close()
    failed = next((r for r in results if isinstance(r, _Failed)), None)  # the first, in seed order
    if failed is not None:
        raise failed.exception()
    return [r for chunk in results for r in chunk]


# --- explore --------------------------------------------------------------------------------------

def format_set(value: Any) -> str:
    """A parameter value as ``--set`` text that parses back to the same value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def replay_command(model_path: str, variant: str, sets: Mapping[str, Any], seed: int | None,
                   jitter: float, strategy: str = strategies.DEFAULT, depth: int = 2,
                   max_ops: int = DEFAULT_MAX_OPS, max_time: float = DEFAULT_MAX_TIME) -> str:
    """The ``streamsim run`` command that reproduces one run exactly."""
    argv = ["streamsim", "run", model_path, "--variant", variant]
    for k, v in sets.items():
        argv += ["--set", f"{k}={format_set(v)}"]
    if seed is not None:
        argv += ["--seed", str(seed)]
    argv += ["--jitter", repr(float(jitter)), *strategies.get(strategy).replay_args(depth)]
    if max_ops != DEFAULT_MAX_OPS:
        argv += ["--max-ops", str(max_ops)]
    if max_time != DEFAULT_MAX_TIME:
        argv += ["--max-time", repr(float(max_time))]
    return shlex.join(argv)
