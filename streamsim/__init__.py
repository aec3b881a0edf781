"""streamsim: a deterministic simulator of GPU stream and communication ordering.

The public API for models: :class:`Simulation` (ranks, groups, host programs), :class:`Param`, and
the access helper :func:`during`. See docs in the README and docs/SEMANTICS.md.
"""
from .sim.api import Event, Group, Host, Simulation, Stream, Work
from .sim.errors import BoundExceeded, ModelError
from .sim.memory import Buffer, during
from .sim.model import Model, Param, Params, load_model
from .sim.runner import simulate
from .trace import Access, Agent, Op, Trace, View

__all__ = ["Simulation", "Host", "Stream", "Event", "Work", "Group", "Buffer", "during", "Param",
           "Params", "Model", "load_model", "simulate", "ModelError", "BoundExceeded", "Trace",
           "Op", "Agent", "View", "Access"]
__version__ = "0.1.0"
