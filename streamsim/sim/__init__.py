"""Simulate: the modelling API, model files, the engine, memory, fix injection and run bounds.

A model's host programs call :class:`Host` (from :class:`Simulation`); the engine runs them on
simpy with CUDA's and torch.distributed's ordering rules and returns a :class:`~streamsim.trace.Trace`.

Public names: :class:`Simulation`, :class:`Host`, :class:`Stream`, :class:`Event`, :class:`Work`,
:class:`Group`, :class:`P2POp` (``api``, ``handles``, ``host``); :class:`Buffer`, :func:`during` (``memory``);
:class:`Param`, :class:`Params`, :class:`Model`, :func:`load_model` (``model``); :func:`simulate`
(``runner``); :class:`InputError` (alias :class:`ModelError`), :class:`BoundExceeded` (``errors``). Internals: ``engine``
(with ``records``, ``comm``, ``finish``, ``locations``), ``inject`` (fixes as extra syncs in a
re-run), ``wallclock`` (the wall-clock bound).
"""
from .api import Event, Group, Host, P2POp, Simulation, Stream, Work
from .errors import BoundExceeded, InputError, ModelError
from .memory import Buffer, during
from .model import Model, Param, Params, load_model
from .runner import simulate

__all__ = ["Simulation", "Host", "Stream", "Event", "Work", "Group", "P2POp", "Buffer", "during", "Param",
           "Params", "Model", "load_model", "simulate", "InputError", "ModelError",
           "BoundExceeded"]
