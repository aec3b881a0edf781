"""The ``streamsim`` command line: argument parsing (``main``) and the command bodies
(``commands``: run, check, compare, variants, graph, timeline; ``explore_commands``: explore,
sweep, shrink). Public name: :func:`main`.
"""
from .main import main

__all__ = ["main"]
