"""`sweep --grid` is bounded before it expands anything (issue 19 item 7): `pp=1..1000000000`
was expanded in memory until the process was killed (24 GB)."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from streamsim.cli.main import cli_message
from streamsim.explore.sweep import MAX_GRID_POINTS, parse_grid
from streamsim.sim.errors import ModelError
from streamsim.sim.model import load_model

ROOT = Path(__file__).resolve().parents[2]
VLLM = str(ROOT / "models" / "vllm_pp.py")


def test_a_huge_range_is_refused_without_being_expanded():
    """Through the command line, in a child whose address space is capped at 1 GB (so that an
    expansion fails fast instead of eating the machine): exit 2, one line, the limit named."""
    limit = 1 << 30
    done = subprocess.run(
        [sys.executable, "-m", "streamsim", "sweep", VLLM, "--grid", "pp=1..1000000000"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stderr == ("streamsim: --grid pp=1..1000000000: 1,000,000,000 values, more than "
                           "the 100,000 a sweep may have\n")


@pytest.mark.parametrize("specs, message", [
    (["pp=1..60000", "requests=1..2"],
     "--grid: 60000 x 2 = 120,000 points, more than the 100,000 a sweep may have"),
    (["pp=1..50000,1..50001"],
     "--grid pp=1..50000,1..50001: 100,001 values, more than the 100,000 a sweep may have"),
])
def test_the_grid_as_a_whole_is_bounded(specs, message):
    """The library names the argument (``grid``), the command line its flag (``--grid``)."""
    with pytest.raises(ModelError) as err:
        parse_grid(load_model(VLLM), specs)
    assert str(err.value) == message.removeprefix("--")
    assert cli_message(err.value) == message


def test_a_grid_at_the_limit_is_accepted():
    grid = parse_grid(load_model(VLLM), [f"pp=1..{MAX_GRID_POINTS}"])
    assert len(grid["pp"]) == MAX_GRID_POINTS
