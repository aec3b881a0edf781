"""Buffer names for the storages a recording sees, and where each was allocated.

Each untyped storage gets a name of its own the first time an op touches it:
``t<k>@<file>:<line>``, the allocation site of a storage an op made (its output), or ``t<k>``
for one made before recording began or outside the dispatcher. The name is the storage's for
its whole life; when it dies (a weak finalizer on the storage) its key is let go, so a new
storage at the same address gets a new name. The op log's ``alloc`` line of a storage carries
its allocation site, by which root causes group (issue 25: a fresh name per step otherwise makes
one missing wait one root cause per step).
"""
from __future__ import annotations

import os
import weakref
from typing import Any, Callable


class Buffers:
    """Storage -> buffer name. ``announce(name, nbytes, site)`` is called once per new name, to
    write its ``alloc`` line (``site`` None: made before recording or outside the dispatcher)."""

    def __init__(self, announce: Callable[[str, int, str | None], None]):
        self.names: dict[int, tuple[str, int]] = {}  # StorageImpl address -> name, size
        self.count = 0
        self.announce = announce

    def name_of(self, storage: Any, site: str | None) -> str:
        """The name of ``storage`` (an ``UntypedStorage``), made now if it has none, or if it
        grew (``resize_`` moves it to new memory: a new life); ``site``: where it was made, if
        the current op made it."""
        key = storage._cdata
        known = self.names.get(key)
        size = storage.nbytes()
        if known is not None and size <= known[1]:
            return known[0]
        self.count += 1
        where = os.path.basename(site.split(" ", 1)[0]) if site else ""
        name = f"t{self.count}@{where}" if where else f"t{self.count}"
        if known is None:
            try:
                weakref.finalize(storage, self.names.pop, key, None)
            except TypeError:  # (a storage that takes no weak reference keeps its name)
                pass
        self.names[key] = (name, size)
        self.announce(name, size, site)
        return name
