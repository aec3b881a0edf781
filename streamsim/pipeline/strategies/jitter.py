"""The ``random`` strategy: the run's durations jittered from its seed, nothing else."""
from __future__ import annotations

from .base import Strategy


class RandomJitter(Strategy):
    name = "random"
    help = "jitter only"
    default_jitter = 0.2
