"""Simulate: the modelling API, model files, the engine, memory, fix injection and run bounds.

A model's host programs call :class:`Host` (from :class:`Simulation`); the engine runs them on
simpy with CUDA's and torch.distributed's ordering rules and returns a :class:`~streamsim.trace.Trace`.

Public names, exported by :mod:`streamsim` (which imports them on first use: an op log's compiled
replay and analysis need none of the engine, nor greenlet): :class:`Simulation`, :class:`Host`, :class:`Stream`, :class:`Event`, :class:`Work`,
:class:`Group`, :class:`P2POp` (``api``, ``handles``, ``host``); :class:`Buffer`, :func:`during` (``memory``);
:class:`Param`, :class:`Params`, :class:`Model`, :func:`load_model` (``model``); :func:`simulate`
(``runner``); :class:`InputError` (alias :class:`ModelError`), :class:`BoundExceeded` (``errors``). Internals: ``engine``
(with ``records``, ``comm``, ``finish``, ``locations``), ``groups`` (a process group's
configuration, which the compiled replay uses without an engine), ``inject`` (fixes as extra syncs in a
re-run), ``wallclock`` (the wall-clock bound).
"""
