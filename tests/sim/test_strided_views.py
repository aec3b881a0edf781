"""``buffer.strided(...)`` in a model (issue 25): a strided view conflicts only where its bytes
do, as an op log's strided ref."""
from __future__ import annotations

import pytest

from streamsim import Simulation, analyse


def run(second):
    sim = Simulation()

    def prog(host):
        x = host.buffer("x", 128)  # a (4, 8) float32 tensor
        host.launch("even", writes=[x.strided(0, [4, 4], [8, 2], 4)], stream="s1")
        host.launch("second", writes=[second(x)], stream="s2")
    sim.spawn(0, prog)
    return analyse(sim.run()).hazards


def test_even_and_odd_columns_do_not_race_and_every_fourth_does():
    assert run(lambda x: x.strided(4, [4, 4], [8, 2], 4)) == ()
    (h,) = run(lambda x: x.strided(0, [4, 2], [8, 4], 4))
    assert h.kind == "WAW"
    (h,) = run(lambda x: x[4:128])  # the odd columns' hull, as a byte range: a false WAW
    assert h.kind == "WAW"


def test_a_dense_strided_view_is_a_plain_view_and_bad_ones_are_errors():
    sim = Simulation()
    views = []

    def prog(host):
        x = host.buffer("x", 128)
        views.append(x.strided(0, [8, 4], [1, 8], 4))  # a transpose: every byte of its range
        with pytest.raises(ValueError, match="outside buffer 'x'"):
            x.strided(8, [4, 4], [8, 2], 4)
        with pytest.raises(ValueError, match="as many"):
            x.strided(0, [4, 4], [8], 4)
    sim.spawn(0, prog)
    sim.run()
    assert (views[0].offset, views[0].nbytes, views[0].pattern) == (0, 128, None)
