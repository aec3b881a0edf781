"""Explore schedules: many seeded runs of one model, each hazard pattern counted with its replay.

A latent hazard is a bug waiting for the right timing. :func:`explore` runs a model ``runs`` times,
each with its own seed, under one of two strategies, and reports for every hazard pattern in how
many runs it manifested, the first seed where it did, and the ``streamsim run`` command that replays
that run exactly::

    >>> from streamsim.explore.hunt import explore
    >>> res = explore("models/vllm_pp.py", "ring_no_wait", {"ring_slots": 2}, runs=200, seed=0)
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

import math
import os
import random
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..sim.errors import ModelError
from ..analysis.metrics import Metrics
from ..sim.model import Model, Params, load_model

STRATEGIES = ("random", "pct")
SEED_STRIDE = 1_000_003
DEFAULT_JITTER = {"random": 0.2, "pct": 0.0}  # explore's default jitter per strategy
DEFAULT_MAX_OPS = 5_000_000
DEFAULT_MAX_TIME = 1e12


def run_seeds(seed: int, runs: int) -> list[int]:
    """The per-run seeds of an exploration with base seed ``seed``: ``seed * 1_000_003 + i``."""
    return [seed * SEED_STRIDE + i for i in range(runs)]


# --- hazard patterns ------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Pattern:
    """What makes two hazards "the same bug": kind, buffer, and both ops' names and locations."""

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
    """Each hazard pattern of an analysed run, in first-seen order -> whether any occurrence
    manifested."""
    out: dict[Pattern, bool] = {}
    for h in findings.hazards:
        a, b = trace.op(h.first), trace.op(h.second)
        p = Pattern(h.kind, h.buffer, a.name, a.location, b.name, b.location)
        out[p] = out.get(p, False) or h.manifest
    return out


# --- PCT ------------------------------------------------------------------------------------------

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
            raise ModelError(f"--depth must be >= 1, got {depth}")
        self.depth, self.seed, self.estimate = depth, seed, estimate
        k = max(1, estimate.ops)
        if depth - 1 > k:  # (drawing them would also take minutes for a depth like 1e8)
            raise ModelError(f"--depth {depth}: PCT delays depth - 1 of the run's {k} ops, so the "
                             f"depth can be at most {k + 1}")
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


def make_perturb(strategy: str, depth: int, seed: int | None, estimate: OpsEstimate | None,
                 jitter: float = 0.0) -> Callable | None:
    """The engine perturbation of one run: ``None`` for ``random`` (jitter only), PCT delays for
    ``pct`` (``estimate`` from :func:`estimate_ops`)."""
    if strategy == "random":
        return None
    if strategy == "pct":
        if estimate is None:
            raise ValueError("the pct strategy needs an OpsEstimate")
        return PCTPerturb(depth, seed, estimate, jitter)
    raise ModelError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")


def perturb_for(model: Model | str, variant: str | None, params, *, strategy: str = "random",
                depth: int = 2, seed: int | None = None, jitter: float = 0.0,
                max_ops: int = DEFAULT_MAX_OPS,
                max_time: float = DEFAULT_MAX_TIME) -> Callable | None:
    """The perturbation that ``streamsim run --strategy S --depth d --seed K`` applies (so that
    replays of explored runs are exact)."""
    if strategy not in STRATEGIES:
        raise ModelError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if strategy == "random":
        return None
    if depth < 1:
        raise ModelError(f"--depth must be >= 1, got {depth}")
    est = estimate_ops(model, variant, params, max_ops=max_ops, max_time=max_time)
    return make_perturb(strategy, depth, seed, est, jitter)


# --- one run, anywhere ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs to run a model, except the seed (plain data: it is pickled)."""

    model_path: str  # absolute
    variant: str
    params: dict
    jitter: float = 0.0
    strategy: str = "random"
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


def run_one(spec: RunSpec, seed: int | None) -> RunResult:
    """Simulate and analyse one run of ``spec`` with ``seed``."""
    from ..analysis.checks import analyse
    from ..analysis.metrics import compute_metrics
    from ..sim.runner import simulate
    model = _model(spec.model_path)
    estimate = spec.estimate
    if spec.strategy == "pct" and estimate is None:  # a sweep point: measured once per process
        key = (spec.model_path, spec.variant, tuple(sorted(spec.params.items())), spec.max_ops,
               spec.max_time)
        estimate = _ESTIMATES.get(key)
        if estimate is None:
            estimate = _ESTIMATES[key] = estimate_ops(model, spec.variant, Params(spec.params),
                                                      max_ops=spec.max_ops, max_time=spec.max_time)
    perturb = make_perturb(spec.strategy, spec.depth, seed, estimate, spec.jitter)
    try:
        trace = simulate(model, spec.variant, Params(spec.params), seed=seed, jitter=spec.jitter,
                         max_ops=spec.max_ops, max_time=spec.max_time, perturb=perturb)
    except ModelError as e:  # name the run, so that it can be replayed
        where = f"{spec.label}, seed {seed}" if spec.label else f"seed {seed}"
        shown = os.path.relpath(spec.model_path, spec.cwd) if spec.cwd else spec.model_path
        msg = str(e).replace(spec.model_path, spec.model_path if shown.startswith("..") else shown)
        raise type(e)(f"run with {where}: {msg}") from None
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


@dataclass(frozen=True)
class _Failed:
    """A chunk's first failing run, sent back as plain data: an exception object does not always
    survive pickling back from a worker (once Dask is imported, a forked worker failed to pickle
    a ModelError and died, and the caller got a BrokenProcessPool instead of the message)."""

    error: type
    message: str

    def exception(self) -> Exception:
        return self.error(self.message)


def run_tasks(tasks: Sequence[tuple[RunSpec, int | None]]) -> list[RunResult] | _Failed:
    """Run a chunk of ``(spec, seed)`` tasks in order (the unit of work sent to a worker); a run
    that fails ends the chunk with a :class:`_Failed`."""
    try:
        return [run_one(spec, seed) for spec, seed in tasks]
    except ModelError as e:
        return _Failed(type(e), str(e))


# --- executors ------------------------------------------------------------------------------------

def _chunks(tasks: list, workers: int) -> list[list]:
    """Split tasks into contiguous chunks: a few per worker, for balance and a live progress bar."""
    size = max(1, min(32, math.ceil(len(tasks) / max(1, workers * 8))))
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def _progress(total: int, enabled: bool, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, leave=False,
                disable=not (enabled and sys.stderr.isatty()))


def _mp_context():
    import multiprocessing as mp
    return mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")


def _dask_client(scheduler):
    """A Dask ``Client`` for ``scheduler`` (an address, a Client, or a cluster); owned: close it."""
    try:
        from distributed import Client
    except ImportError:
        raise ModelError("--scheduler needs Dask: pip install 'streamsim[dask]'") from None
    if isinstance(scheduler, Client):
        return scheduler, False
    try:
        return Client(scheduler, timeout="10s"), True
    except (OSError, ValueError) as e:  # ValueError: not an address ("missing port number")
        raise ModelError(f"--scheduler {scheduler}: cannot connect: {e}") from None


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
        raise ModelError(f"--jobs must be >= 1, got {jobs}")
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
                   jitter: float, strategy: str = "random", depth: int = 2,
                   max_ops: int = DEFAULT_MAX_OPS, max_time: float = DEFAULT_MAX_TIME) -> str:
    """The ``streamsim run`` command that reproduces one run exactly."""
    argv = ["streamsim", "run", model_path, "--variant", variant]
    for k, v in sets.items():
        argv += ["--set", f"{k}={format_set(v)}"]
    if seed is not None:
        argv += ["--seed", str(seed)]
    argv += ["--jitter", repr(float(jitter)), "--strategy", strategy]
    if strategy == "pct":
        argv += ["--depth", str(depth)]
    if max_ops != DEFAULT_MAX_OPS:
        argv += ["--max-ops", str(max_ops)]
    if max_time != DEFAULT_MAX_TIME:
        argv += ["--max-time", repr(float(max_time))]
    return shlex.join(argv)


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
                "depth": self.depth if self.strategy == "pct" else None,
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


def explore(model: Model | str, variant: str | None = None,
            params: Mapping[str, Any] | Iterable[str] = (), runs: int = 100, seed: int = 0,
            jitter: float | None = None, strategy: str = "random", depth: int = 2,
            jobs: int | None = None, scheduler=None, *, max_ops: int = DEFAULT_MAX_OPS,
            max_time: float = DEFAULT_MAX_TIME, progress: bool = False) -> ExploreResult:
    """Run ``model`` ``runs`` times, seeds :func:`run_seeds` ``(seed, runs)``, and collect hazards.

    ``params``: a mapping of typed values or ``"k=v"`` strings. ``jitter`` defaults to 0.2 for
    ``random`` and 0 for ``pct``. ``depth``: PCT's bug depth (``depth - 1`` change points).
    ``jobs``/``scheduler``: see :func:`execute`. ``progress``: a tqdm bar on stderr (TTY only).
    """
    if strategy not in STRATEGIES:
        raise ModelError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if runs < 1:
        raise ModelError(f"--runs must be >= 1, got {runs}")
    if depth < 1:
        raise ModelError(f"--depth must be >= 1, got {depth}")
    jitter = DEFAULT_JITTER[strategy] if jitter is None else float(jitter)
    if jitter < 0:
        raise ModelError(f"jitter must be >= 0, got {jitter}")
    model, variant, values, sets = _prepare(model, variant, params)
    estimate = None
    if strategy == "pct":
        estimate = estimate_ops(model, variant, values, max_ops=max_ops, max_time=max_time)
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
            f"{'s' * (n != 1)}, strategy {res.strategy}"
            + (f" (depth {res.depth})" if res.strategy == "pct" else "")
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
