"""streamsim: a deterministic simulator of GPU stream and communication ordering.

The pipeline, one subpackage a stage: `sim` (modelling API, engine) -> `trace` (the hinge)
-> `analysis` (happens-before, hazards, fixes, deadlock, metrics) -> `report` (text, JSON,
Markdown, HTML, pictures); `pipeline` is the main path of every command (simulate -> analyse ->
cost the fixes -> report), `explore` runs it many times (compare, explore, sweep, shrink) ->
`cli`;
`oplog` reads, replays and writes recorded schedules; `kinds` is the vocabulary every stage's
tables come from (op, edge and fix kinds, stream roles, strategies); `streamsim.testing` holds
assertions for a model's own tests (and the pytest fixture `streamsim_check`). This module is the
stable public API: models and notebooks import from here only.

**Write a model**

- `Simulation`, `Host`, `Stream`, `Event`, `Work`, `Group`: ranks, groups, host programs and
  their handles
- `P2POp`: one op of `Group.batch_isend_irecv`
- `Buffer`, `during`: memory and access windows
- `Param`, `Params`, `Model`, `load_model`: model files (parameters, variants, `build()`)
- `InputError` (also named `ModelError`), `BoundExceeded`: one-line errors of bad input (exit
  code 2)

**Run and check**

- `simulate(model, variant, params, seed=, jitter=)` -> `Trace`
- `run_model(model, variant, params, ...)` -> `Report` (analysed, fixes costed; `apply_fixes=True`:
  the fixed run's)
- `check_oplog(path, seed=, jitter=)` -> `Report` of a recorded op log
- `load_oplog`, `parse_oplog`, `simulate_oplog`, `dump_oplog`, `oplog_text`: the op log

**Read a report** (the records a test reads; docs/testing.md)

- `Report`: one analysed run (`.findings`, `.metrics`, `.fix_cost`, `.cost_of(i)`, `.trace`)
- `Findings`: its `Hazard`s (each with its `Fix`), `RootCause`s (two `Site`s each), `Deadlock`
  (its `Blocked` agents) and `Warning`s
- `Metrics`, `FixCost`: timing, and what the proposed fixes cost (`FixShift`: what they moved)
- `Trace`, `Op`, `Agent`, `View`, `Access`, `Stall`, `Note`: the trace records

**Analyse a trace**

- `analyse(trace)` -> `Findings`
- `happens_before(trace)` -> `HappensBefore`: every op's vector clocks (`.ordered(a, b)`)
- `compute_metrics(trace)` -> `Metrics`

**Report and draw**

- `render_text`, `dumps_json`, `render_markdown`, `write_outputs`: the report's forms
- `draw_hb`, `short_fix`, `draw_timeline`: matplotlib figures
- `hb_graph`, `hazard_graph`, `deadlock_graph`, `hazard_ops` (once named `issue_order`),
  `access_window`: networkx graphs, slices, a hazard's two ops

**Record a real PyTorch program** (docs/recording.md; needs torch, the `record` extra)

- `record(path)`: `with streamsim.record("run.jsonl"):` records this process's aten and c10d ops
  as an op log (`streamsim record -- CMD` records every rank of a program left as it is)

**Explore**

- `cost_fixes`: re-simulate with fixes
- `compare_variants` -> `CompareRow` list, `render_compare`
- `sweep` -> `SweepRow` list (each holds its `RunResult`s), `render_sweep`, `plot_sweep`
- `explore_schedules` (`explore.hunt`: many seeded runs) -> `ExploreResult` (its
  `PatternStats`, each of a `Pattern`)
- `shrink` -> `ShrinkResult`

Names from `sim` (the modelling API), `analysis`, `report` and `explore` are imported on first
use, so that `import streamsim` (and the command line) does not pay for the engine, greenlet,
networkx and matplotlib where it does not use them (`check` of an op log: docs/native.md).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from .gcpause import gc_paused

with gc_paused():  # (what an import makes lives as long as the process: no collection scans it)
    from .sim.errors import BoundExceeded, InputError, ModelError
    from .trace import Access, Agent, Blocked, Note, Op, Stall, Trace, View

__version__ = "0.1.0"

_LAZY = {  # public name -> the module that defines it (imported on first use)
    "Simulation": "sim.api", "Host": "sim.api", "Stream": "sim.api", "Event": "sim.api",
    "Work": "sim.api", "Group": "sim.api", "P2POp": "sim.api", "Buffer": "sim.memory",
    "during": "sim.memory", "Model": "sim.model", "Param": "sim.model", "Params": "sim.model",
    "load_model": "sim.model", "simulate": "sim.runner",
    "run_model": "pipeline", "check_oplog": "pipeline",
    "load_oplog": "oplog", "parse_oplog": "oplog", "simulate_oplog": "oplog", "dump_oplog": "oplog",
    "oplog_text": "oplog",
    "analyse": "analysis.checks", "FixCost": "analysis.checks", "FixShift": "analysis.checks",
    "Findings": "analysis.findings", "Hazard": "analysis.findings", "Fix": "analysis.findings",
    "Deadlock": "analysis.findings", "Warning": "analysis.findings",
    "RootCause": "analysis.rootcause", "Site": "analysis.rootcause",
    "HappensBefore": "analysis.hb", "compute_metrics": "analysis.metrics",
    "Metrics": "analysis.metrics",
    "Report": "report.report", "render_text": "report.report", "dumps_json": "report.jsonout",
    "render_markdown": "report.markdown", "write_outputs": "report.outputs",
    "draw_hb": "report.draw_hb", "short_fix": "report.draw_hb", "draw_timeline": "report.timeline",
    "hb_graph": "analysis.slices", "hazard_graph": "analysis.slices",
    "deadlock_graph": "analysis.slices", "issue_order": "analysis.slices",
    "hazard_ops": "analysis.slices",
    "access_window": "analysis.why",
    "cost_fixes": "pipeline.fixcost", "compare_variants": "explore.compare",
    "render_compare": "explore.compare", "CompareRow": "explore.compare",
    "explore_schedules": "explore.hunt", "ExploreResult": "explore.hunt",
    "PatternStats": "explore.hunt", "Pattern": "explore.runs", "RunResult": "explore.runs",
    "sweep": "explore.sweep", "SweepRow": "explore.sweep",
    "render_sweep": "explore.sweep", "plot_sweep": "explore.sweep", "shrink": "explore.shrink",
    "ShrinkResult": "explore.shrink",
}

def happens_before(trace: Trace):
    """Every op's start and end vector clocks (a :class:`HappensBefore`): ``hb.ordered(a, b)``
    says whether op ``a`` happens before op ``b`` in every legal timing."""
    from .analysis.hb import hb_pass
    return hb_pass(trace, keep_clocks=True).hb


def __getattr__(name: str) -> Any:
    if name == "record":  # the recorder package, callable: `with streamsim.record(path):`
        return import_module(".record", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'streamsim' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # (the next lookup is a plain attribute)
    return value


__all__ = ["Simulation", "Host", "Stream", "Event", "Work", "Group", "P2POp", "Buffer", "during",
           "Param", "Params", "Model", "load_model", "InputError", "ModelError", "BoundExceeded", "simulate",
           "Trace", "Op", "Agent", "View", "Access", "Blocked", "Stall", "Note", "happens_before",
           "record", *_LAZY]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
