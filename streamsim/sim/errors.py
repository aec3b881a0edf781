"""The errors of a simulation: a mistake in a model or op log, and a run past its bounds.

Both are reported as one line and exit code 2 by the command line.
"""
from __future__ import annotations


class ModelError(Exception):
    """A mistake in a model or op log: reported as one line, exit code 2."""


class BoundExceeded(ModelError):
    """The simulation passed its op-count or simulated-time bound (a runaway model)."""
