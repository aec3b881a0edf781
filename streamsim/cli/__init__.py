"""The ``streamsim`` command line: argument parsing (``main``) and the command bodies
(``commands``: run, check, compare, variants, graph, timeline; ``explore_commands``: explore,
sweep, shrink). Public names: :func:`main`, and :func:`program`, the program itself (the
console script and ``python -m streamsim``).
"""
from ..gcpause import gc_paused

with gc_paused():  # (as streamsim's own import: every stage's modules, no collection scanning them)
    from .main import main, program

__all__ = ["main", "program"]
