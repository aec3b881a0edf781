"""`check --fixed-out`: the lines it inserts carry the step of the line they belong to."""
from __future__ import annotations

import json

import pytest

from streamsim.cli.main import main

WAIT = ('{"op":"launch","rank":0,"name":"forward","writes":["hidden"],"dur":900,"step":0}\n'
        '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400,'
        '"step":0}\n'
        '{"op":"launch","rank":0,"name":"forward","writes":["hidden"],"dur":900,"step":1}\n'
        '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","step":0}\n')
EVENT = ('{"op":"host","name":"fill","writes":["pinned"],"dur":5,"step":0}\n'
         '{"op":"launch","stream":"copy","name":"h2d","reads":["pinned"],"dur":50,"step":0}\n'
         '{"op":"host","name":"fill","writes":["pinned"],"dur":5,"step":1}\n')


@pytest.mark.parametrize("log, expected", [
    (WAIT, [("wait", 1)]),  # the wait before the step-1 forward
    (EVENT, [("record", 0), ("sync_event", 1)]),  # after the step-0 copy, before the step-1 fill
])
def test_inserted_lines_carry_the_step_of_their_line(log, expected, tmp_path, capsys):
    """They carried no step: a reader of the fixed log (or `check` of it) saw the sync outside
    every step, and step metrics of the fixed log left it out."""
    src, fixed = tmp_path / "log.jsonl", tmp_path / "fixed.jsonl"
    src.write_text(log)
    assert main(["check", str(src), "--fixed-out", str(fixed), "--no-fix-cost"]) == 1
    added = [json.loads(x) for x in fixed.read_text().splitlines()
             if x not in log.splitlines() and not x.startswith("#")]
    assert [(d["op"], d.get("step")) for d in added] == expected
    capsys.readouterr()
    assert main(["check", str(fixed), "--no-fix-cost"]) == 0
