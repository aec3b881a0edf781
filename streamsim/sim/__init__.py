"""Simulate: the modelling API, model files, the engine, memory, fix injection and run bounds.

A model's host programs call :class:`Host` (from :class:`Simulation`); the engine runs them on
simpy with CUDA's and torch.distributed's ordering rules and returns a :class:`~streamsim.trace.Trace`.

Public names: :class:`Simulation`, :class:`Host`, :class:`Stream`, :class:`Event`, :class:`Work`,
:class:`Group`, :class:`P2POp` (``api``, ``handles``, ``host``); :class:`Buffer`, :func:`during` (``memory``);
:class:`Param`, :class:`Params`, :class:`Model`, :func:`load_model` (``model``); :func:`simulate`
(``runner``); :class:`InputError` (alias :class:`ModelError`), :class:`BoundExceeded` (``errors``). Internals: ``engine``
(with ``records``, ``comm``, ``finish``, ``locations``), ``groups`` (a process group's
configuration, which the compiled replay uses without an engine), ``inject`` (fixes as extra syncs in a
re-run), ``wallclock`` (the wall-clock bound).
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_PUBLIC = {  # public name -> the module that defines it (imported on first use: an op log's
    # compiled replay and analysis need none of the engine, nor greenlet)
    "Simulation": "api", "Host": "host", "Stream": "handles", "Event": "handles", "Work": "handles",
    "Group": "handles", "P2POp": "handles", "Buffer": "memory", "during": "memory",
    "Param": "model", "Params": "model", "Model": "model", "load_model": "model",
    "simulate": "runner", "InputError": "errors", "ModelError": "errors", "BoundExceeded": "errors",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # (the next lookup is a plain attribute)
    return value
