"""The supervised child keeps what its command made until it exits (``supervise.keep``): the
process ends without freeing a large report object by object; anywhere else nothing is kept."""
from __future__ import annotations

import gc
import weakref

import pytest

from streamsim.cli import supervise


class Freed:
    """Writes ``freed`` to its file when it is freed."""

    def __init__(self, path):
        self.path = path

    def __del__(self):
        self.path.write_text("freed")


@pytest.mark.skipif(not supervise.enabled(), reason="no fork here: nothing is supervised")
def test_the_child_exits_without_freeing_what_it_kept(tmp_path):
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"

    def work() -> int:
        supervise.keep(Freed(kept))
        Freed(dropped)  # (not kept: freed at once)
        return 3
    assert supervise.supervised(work) == 3
    assert dropped.read_text() == "freed" and not kept.exists()


def test_outside_the_child_nothing_is_kept(tmp_path):
    obj = Freed(tmp_path / "x")
    ref = weakref.ref(obj)
    supervise.keep(obj)
    del obj
    gc.collect()
    assert ref() is None and (tmp_path / "x").read_text() == "freed"
