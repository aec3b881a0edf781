"""The ``streamsim`` command line: argument parsing (``main``) and the command bodies
(``commands``: run, check, compare, variants, graph, timeline; ``explore_commands``: explore,
sweep, shrink). Public name: :func:`main`.
"""
from ..gcpause import gc_paused

with gc_paused():  # (as streamsim's own import: every stage's modules, no collection scanning them)
    from .main import main

__all__ = ["main"]
