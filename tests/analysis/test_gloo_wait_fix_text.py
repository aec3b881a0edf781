"""A gloo send's handle waited twice hangs (docs/recording.md): when the fix of a root cause is to
wait a gloo send's handle earlier and the program already waits it later, the fix's text says to
move that wait there, naming it, instead of only "wait the handle" (which a user would add as a
second wait). ``--fixed-out`` moves it the same way (tests/oplog/test_fixed_gloo_wait.py)."""
from __future__ import annotations

import pytest

from streamsim.oplog import parse_oplog
from streamsim.pipeline import check_oplog


def log(backend: str, later_wait: bool) -> str:
    return "\n".join([
        f'{{"op":"group","group":"g","backend":"{backend}","ranks":[0,1]}}',
        '{"op":"host","name":"fill_","writes":["x"],"rank":0}',
        '{"op":"isend","group":"g","tensors":["x"],"peer":1,"handle":"h","rank":0}',
        '{"op":"host","name":"refill","writes":["x"],"rank":0}',
        *(['{"op":"wait","handle":"h","rank":0}'] if later_wait else []),
        '{"op":"irecv","group":"g","tensors":["y"],"peer":0,"handle":"r","rank":1}',
        '{"op":"wait","handle":"r","rank":1}',
    ]) + "\n"


def fix_text(text: str) -> str:
    report = check_oplog(parse_oplog(text, "f.jsonl"), fix_cost=False)
    (rc,) = report.findings.root_causes
    return rc.fix


def test_the_fix_of_a_gloo_send_moves_its_later_wait():
    text = fix_text(log("gloo", later_wait=True))
    assert text == ("before `refill`, wait the handle returned by `isend` (f.jsonl:3); move the "
                    "program's own wait of it there from `wait` (f.jsonl:5) (a gloo send's handle "
                    "waited twice hangs)")


@pytest.mark.parametrize("backend, later_wait", [("gloo", False), ("nccl", True)])
def test_otherwise_the_fix_only_adds_the_wait(backend, later_wait):
    """No later wait to move, or an NCCL send (waited twice, it does not hang)."""
    text = fix_text(log(backend, later_wait))
    assert text.startswith("before `refill`, wait")
    assert "move" not in text, text
