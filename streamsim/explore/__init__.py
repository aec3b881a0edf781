"""Explore: above the main path (:mod:`streamsim.pipeline`), runs it many times: compare variants,
hunt seeds, sweep grids, shrink logs.

Public names: :func:`compare_variants`, :func:`render_compare` (``compare``); ``hunt.explore_schedules``
(many seeded runs; executors in ``runs``); ``sweep.sweep`` (a parameter grid); ``shrink.shrink``
(delta-debug an op log).
"""
from .compare import compare_variants, render_compare

__all__ = ["compare_variants", "render_compare"]
