"""The garbage-collector policy (issue 24): paused once for one pipeline run, at its entry, never by
a stage, and on again between the runs of an exploration (each run's cycles freed before the next).
"""
from __future__ import annotations

import gc

import pytest

from streamsim.pipeline import run_model
from streamsim.explore.hunt import explore_schedules
from streamsim.sim.runner import simulate

MODEL = '''\
def build(sim, p, variant):
    def main(host):
        x = host.buffer("x", 64)
        host.launch("produce", writes=[x], dur=5.0, stream=host.stream("side"))
        host.launch("consume", reads=[x], dur=1.0)
    sim.spawn(0, main)
'''


@pytest.fixture
def pauses(monkeypatch):
    calls = []
    real = gc.disable

    def disable():
        calls.append(gc.isenabled())
        real()
    monkeypatch.setattr(gc, "disable", disable)
    return calls


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "two.py"
    path.write_text(MODEL)
    return str(path)


def test_one_run_pauses_once_at_its_entry(pauses, model):
    run_model(model)  # simulate, analyse, cost the fix (a re-simulation): one pause for all
    assert pauses == [True] and gc.isenabled()


def test_a_stage_alone_leaves_the_collector_to_its_caller(pauses, model):
    simulate(model)
    assert pauses == [] and gc.isenabled()


def test_each_run_of_an_exploration_pauses_on_its_own(pauses, model):
    explore_schedules(model, runs=3, jobs=1)
    assert pauses == [True, True, True] and gc.isenabled()


def test_importing_streamsim_leaves_the_collector_as_it_found_it():
    """The package's import runs paused (streamsim/__init__, streamsim/cli/__init__): afterwards
    the collector is on again, or still off if the importer had turned it off."""
    import subprocess
    import sys
    code = ("import gc, sys\n{off}frozen = gc.get_freeze_count()\nimport streamsim.cli\n"
            "print(gc.isenabled(), gc.get_freeze_count() - frozen)")  # (Python 3.12.1 starts
    # with 375 objects frozen of its own)
    for off, want in (("", "True 0"), ("gc.disable()\n", "False 0")):
        out = subprocess.run([sys.executable, "-c", code.format(off=off)], capture_output=True,
                             text=True, timeout=120)
        assert out.stdout.split() == want.split(), out.stderr
