"""Analyse a trace: happens-before, data hazards and their fixes, deadlock, warnings, metrics.

Everything here reads a :class:`~streamsim.trace.Trace` and nothing else, so it can be used on a
trace built by hand.

Public names: :func:`analyse` (``checks``: every finding in one call) with :class:`FixCost`;
:class:`Findings`, :class:`Hazard`, :class:`Fix`, :class:`Deadlock`, :class:`Warning`
(``findings``); :func:`propose_fix` (``fixes``); :func:`analyse_hazards` and
:class:`HappensBefore` (``hb``: the vector-clock pass); :func:`compute_metrics`, :class:`Metrics`
(``metrics``); :func:`deadlock_from_stall`, :func:`warnings` (``liveness``). With networkx, imported
on use: ``hbgraph`` (the HB graph), ``slices`` (a hazard's or deadlock's slice of it), ``why`` (the
sync chain each side of a hazard has, and the edge missing).
"""
from .checks import FixCost, analyse, distinct_fixes
from .findings import Deadlock, Findings, Fix, Hazard, Warning
from .fixes import propose_fix
from .hb import HappensBefore, analyse_hazards
from .liveness import deadlock_from_stall, warnings
from .metrics import Metrics, compute_metrics

__all__ = ["analyse", "FixCost", "distinct_fixes", "Findings", "Hazard", "Fix", "Deadlock",
           "Warning", "propose_fix", "analyse_hazards", "HappensBefore", "compute_metrics",
           "Metrics", "deadlock_from_stall", "warnings"]
