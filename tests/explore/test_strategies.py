"""Strategies are one interface with a module each (issue 24): a strategy registered in one place
is a --strategy choice of every command and runs, its replay command naming it."""
from __future__ import annotations

import json

import pytest

from streamsim.cli.main import build_parser, main
from streamsim.pipeline import strategies
from streamsim.explore.hunt import explore_schedules
from streamsim.pipeline.strategies import Strategy
from streamsim.sim.errors import InputError

from .test_explore import margin_model  # noqa: F401 (a fixture)


class StallProducer(Strategy):
    """Holds every op called ``produce`` for ``depth`` ms: the racy consumer then overlaps it."""

    name = "stall"
    help = "hold the producer for depth ms"
    uses_depth = True
    seeded = True
    applies_to_oplog = False
    no_fix_cost = "a test's strategy"

    def __init__(self):
        self.calls = 0

    def perturb(self, depth, seed, estimate, jitter):
        def stall(rng, rec):
            self.calls += 1
            return 1000.0 * depth if rec.name == "produce" else 0.0
        return stall


@pytest.fixture
def stall():
    s = strategies.register(StallProducer())
    yield s
    strategies.unregister(s.name)


def _choices(argv: list[str]) -> tuple:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    act = next(a for a in sub.choices[argv[0]]._actions if a.dest == "strategy")
    return tuple(act.choices), act.help


def test_the_registry_is_the_clis_choices(stall):
    for command in ("run", "explore", "sweep", "shrink", "compare"):
        choices, help_text = _choices([command])
        assert choices == strategies.names() == ("random", "pct", "stall"), command
        assert "stall = hold the producer for depth ms" in help_text


def test_a_registered_strategy_runs_and_replays(stall, margin_model, capsys):  # noqa: F811
    code = main(["run", margin_model, "--variant", "racy", "--strategy", "stall", "--format",
                 "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and stall.calls > 0
    assert [h["manifest"] for h in out["hazards"]] == [True]  # the stall made the RAW manifest
    assert out["seed"] == 0  # a seeded strategy: the seed used is shown

    res = explore_schedules(margin_model, "racy", runs=3, strategy="stall", depth=2, jobs=1)
    assert res.jitter == 0.0 and res.patterns[0].manifest_runs == 3
    assert res.replay(7).endswith("--strategy stall --depth 2")
    assert res.to_json_dict()["depth"] == 2

    assert main(["run", margin_model, "--variant", "racy", "--strategy", "stall",
                 "--apply-fixes"]) == 2
    assert "not under --strategy stall (a test's strategy)" in capsys.readouterr().err


def test_an_unknown_strategy_names_the_registered_ones():
    with pytest.raises(InputError, match=r"one of random, pct, not 'stall'"):
        strategies.get("stall")
