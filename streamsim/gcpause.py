"""Pause Python's cyclic garbage collector while a stage builds millions of long-lived objects.

Parsing, simulating and analysing create millions of small objects that live as long as the trace
and form (almost) no cycles. With the collector on, each young collection rescans them and each
full collection rescans all of them: most of the run time at a million ops. With it merely paused,
the first young collection after the pause still walks every object made during it (seconds at a
million ops, charged to whatever runs next). So on leaving the outermost pause, the objects made
during it are moved straight to the oldest generation (``gc.freeze()`` + ``gc.unfreeze()``, two
constant-time list splices), where only the rare full collections see them, as they would anyway.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


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
