"""``streamsim record``: check real PyTorch programs by recording what each rank issues.

One concept a module: :mod:`.access` (what an aten op reads and writes), :mod:`.c10d` (what a
c10d op does), :mod:`.works` (waits on Work handles), :mod:`.buffers` (storage names and
allocation sites), :mod:`.sites` (the user's line of an op), :mod:`.cuda` (CUDA's events and
syncs), :mod:`.mode` (the dispatch mode and :func:`record`), :mod:`.merge` (rank files into one
op log), :mod:`.launch` (``streamsim record -- CMD``, with :mod:`.hook`), :mod:`.version` (the
torch range tested). Only :mod:`.mode` and what it calls import torch, and only when recording
starts: the package itself imports without it.

``streamsim.record("run.jsonl")`` is also callable, as the context manager
:func:`.mode.record`: the package's module object is made callable (a module subclass with
``__call__``), since ``streamsim.record`` cannot be a function and a package at once.
"""
from __future__ import annotations

import sys
import types
from typing import Any


def record(path: Any):
    """``with streamsim.record("run.jsonl"):`` record this process's ops (see
    :func:`streamsim.record.mode.record`)."""
    from .mode import record as _record
    return _record(path)


def step(k: int | None) -> None:
    """Label the lines recorded from now on with step ``k`` (a no-op when nothing records)."""
    from .mode import set_step
    set_step(k)


def label(text: str):
    """``with streamsim.record.label("send hidden"):`` name the ops recorded inside the block
    ``send hidden: OP`` (see :func:`streamsim.record.mode.label`); a no-op when nothing records."""
    from .mode import label as _label
    return _label(text)


class _CallableModule(types.ModuleType):
    def __call__(self, path: Any):
        return record(path)


sys.modules[__name__].__class__ = _CallableModule
