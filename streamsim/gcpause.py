"""The garbage-collector policy: paused for one run of the pipeline, declared where that run is
entered and nowhere inside a stage.

Why pause: parsing, simulating and analysing create millions of small objects that live as long as
the trace and form (almost) no cycles. With the collector on, each young collection rescans them
and each full collection rescans all of them: most of the run time at a million ops. With it merely
paused, the first young collection after the pause still walks every object made during it
(seconds at a million ops, charged to whatever runs next). So on leaving the pause, the objects
made during it are moved straight to the oldest generation (``gc.freeze()`` + ``gc.unfreeze()``,
two constant-time list splices), where only the rare full collections see them, as they would
anyway.

Why one run and not one process: a run's engine ends inside reference cycles (simpy processes,
greenlets), so many runs in a row (``explore``, ``sweep``, ``shrink``'s candidates) must let the
collector free each run's cycles before the next; and why at the entry, not in the stages: a stage
inside a paused run pausing again does nothing, so per-stage pauses were ten places saying one
thing. The entries, each decorated with :func:`pipeline_entry`: ``run_model`` and ``check_oplog``
(the main path: simulate, analyse, cost fixes), ``explore.runs.run_one`` (one run of ``explore`` or
``sweep``, in a worker or not), a ``shrink`` candidate's replay, and the CLI's report rendering.
The package's own import (``streamsim/__init__``, and the command line's modules in
``streamsim/cli/__init__``) runs paused too: module objects live as long as the process, and a
one-line log's start-up spent ~5 ms in 34 collections scanning them (2, 0.1 ms, paused).
A caller that runs the stages itself on a large trace (``simulate``, ``analyse``, ``load_oplog``,
``dump_oplog``, as the benchmarks do) wraps them in :func:`gc_paused` for the same speed.
"""
from __future__ import annotations

import functools
import gc
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic GC off; on leaving, promote what it made to the oldest
    generation (skipped when the process froze objects of its own, which unfreeze would release)."""
    if not gc.isenabled():  # nested, or the caller turned it off: leave its policy alone
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def pipeline_entry(fn: F) -> F:
    """Declare ``fn`` an entry of one pipeline run: it runs under :func:`gc_paused`."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        with gc_paused():
            return fn(*args, **kwargs)
    return paused  # type: ignore[return-value]
