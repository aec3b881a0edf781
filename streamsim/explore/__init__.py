"""Explore: check one input end to end, compare variants, hunt seeds, sweep grids, shrink logs.

Everything here runs the simulator and the analysis, often many times.

Public names: :func:`run_model`, :func:`check_oplog` (``check``: one input, fixes costed, as a
Report); :func:`cost_fixes` (``fixcost``); :func:`compare_variants`, :func:`render_compare`
(``compare``); ``hunt.explore`` (many seeded runs; the strategies in ``strategies``, PCT's
algorithm in ``pct``, executors in ``runs``);
``sweep.sweep`` (a parameter grid); ``shrink.shrink`` (delta-debug an op log).
"""
from .check import check_oplog, run_model
from .compare import compare_variants, render_compare
from .fixcost import cost_fixes

__all__ = ["run_model", "check_oplog", "cost_fixes", "compare_variants", "render_compare"]
