"""Bad input named twice: the library's error states the fact in the API's words (an argument,
a bound), and the command line says the flag instead. A library caller never reads about
``--set`` or ``--max-ops``; a command-line user reads the flag to change."""
from __future__ import annotations

import json
import pathlib
import re

import pytest

from streamsim import BoundExceeded, InputError, Simulation, check_oplog, parse_oplog, run_model
from streamsim.cli.main import cli_message, main
from streamsim.pipeline import strategies

MODEL = '''\
from streamsim import Param
PARAMS = [Param("steps", int, 2, "steps")]
VARIANTS = {"racy": "no wait"}
def build(sim, p, variant):
    def prog(host):
        x = host.buffer("x", 1 << 20)
        for t in range(p.steps):
            host.step = t
            host.launch("k", writes=[x], dur=10)
    sim.spawn(0, prog)
'''


@pytest.fixture
def model(tmp_path) -> str:
    path = tmp_path / "m.py"
    path.write_text(MODEL)
    return str(path)


def raised(call) -> InputError:
    with pytest.raises(InputError) as err:
        call()
    return err.value


def test_an_argument_is_named_as_the_api_names_it_and_the_cli_says_its_flag(model):
    e = raised(lambda: strategies.get("bogus"))
    assert str(e) == "strategy must be one of random, pct, not 'bogus'"
    assert cli_message(e) == "--strategy must be one of random, pct, not 'bogus'"
    e = raised(lambda: run_model(model, "racy", ["steps=x"]))
    assert (str(e), cli_message(e)) == ("steps=x: expected int", "--set steps=x: expected int")
    e = raised(lambda: run_model(model, "racy", strategy="pct", apply_fixes=True))
    assert str(e).startswith("apply_fixes: not under strategy pct (")
    assert cli_message(e).startswith("--apply-fixes: not under --strategy pct (")


def test_a_bound_passed_says_how_to_raise_it_on_the_command_line_only(model, capsys):
    def runaway(host):
        while True:
            host.launch("k", dur=1)
    sim = Simulation(max_ops=100)
    sim.spawn(0, runaway)
    e = raised(sim.run)
    assert isinstance(e, BoundExceeded) and "--" not in str(e)
    assert str(e).endswith("(max_ops); a runaway loop?")
    assert cli_message(e) == f"{e} raise the bound with --max-ops"
    assert main(["run", model, "--max-time", "15"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"streamsim: {model}: simulated time passed max_time=15 us")
    assert err.endswith("? raise the bound with --max-time\n")


def test_a_bound_passed_in_an_op_log_replay_keeps_its_flag(tmp_path, capsys):
    """The replay says where (``FILE: ...``) without losing which bound was passed."""
    log = tmp_path / "l.jsonl"
    log.write_text("".join(json.dumps({"op": "launch", "name": "k", "writes": ["x"], "dur": 10})
                           + "\n" for _ in range(5)))
    e = raised(lambda: check_oplog(parse_oplog(log.read_text(), str(log)), max_ops=2))
    assert cli_message(e).endswith("raise the bound with --max-ops")
    assert main(["check", str(log), "--max-ops", "2"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("raise the bound with --max-ops")


def test_an_error_reworded_with_where_it_happened_names_the_flag_after_that():
    """A run's label may hold an argument's word (``depth=2``): only the message's own text is
    rewritten."""
    e = InputError("depth 9: too deep", arguments=("depth",)).reworded("run with depth=2: ")
    assert cli_message(e) == "run with depth=2: --depth 9: too deep"


def test_no_library_message_names_a_flag():
    """Only the command line (streamsim/cli) says flags in its errors; the recorder's own CLI
    errors (streamsim/record) are its own command's."""
    root = pathlib.Path(__file__).resolve().parents[2] / "streamsim"
    said = re.compile(r"""Error\(f?["'][^"']*--[a-z]|with --[a-z]|--[a-z-]+ allows""")
    bad = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py"))
           if p.parts[len(root.parts)] not in ("cli", "record")
           for n, line in enumerate(p.read_text().splitlines(), 1) if said.search(line)]
    assert not bad, bad
