"""``torch.distributed.pipelining`` recorded on 2 gloo ranks: ScheduleGPipe and Schedule1F1B
check clean, and with their waits deferred (an injected bug) the first root cause is the
receive read by the stage's forward, at the program's own line."""
from __future__ import annotations

import pytest

from streamsim import check_oplog

from .test_programs import record_all

PROGRAM = "tests/record/programs/pipeline.py"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The clean and the deferred-wait programs, recorded side by side: their logs."""
    d = tmp_path_factory.mktemp("pipelining")
    runs = record_all([(d / "pp.jsonl", PROGRAM), (d / "defer.jsonl", PROGRAM, "--defer")],
                      timeout=120)
    for p in runs:
        assert p.returncode == 0, p.stderr
    return d / "pp.jsonl", d / "defer.jsonl"


def test_gpipe_and_1f1b_check_clean(logs):
    f = check_oplog(logs[0]).findings
    assert not f.hazards and f.deadlock is None and not f.warnings


def test_deferred_receive_waits_are_caught_at_the_stages_forward(logs):
    causes = check_oplog(logs[1]).findings.root_causes
    first = causes[0]
    assert (first.kind, first.first.label, first.second.label) == ("RAW", "irecv", "addmm")
    assert first.second.location == f"{PROGRAM}:22 forward"  # (torch.relu(self.layer(x)))
    assert first.first.location.startswith(f"{PROGRAM}:") and first.ranks == (1,)
    assert len(causes) <= 3 and {rc.first.label for rc in causes} == {"irecv"}
