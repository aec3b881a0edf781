"""``torch.distributed.pipelining`` recorded on 2 gloo ranks: ScheduleGPipe and Schedule1F1B
check clean, and with their waits deferred (an injected bug) the first root cause is the
receive read by the stage's forward, at the program's own line."""
from __future__ import annotations

from streamsim import check_oplog

from .test_programs import record

PROGRAM = "tests/record/programs/pipeline.py"


def test_gpipe_and_1f1b_check_clean(tmp_path):
    p = record(tmp_path / "pp.jsonl", PROGRAM, timeout=120)
    assert p.returncode == 0, p.stderr
    f = check_oplog(tmp_path / "pp.jsonl").findings
    assert not f.hazards and f.deadlock is None and not f.warnings


def test_deferred_receive_waits_are_caught_at_the_stages_forward(tmp_path):
    p = record(tmp_path / "defer.jsonl", PROGRAM, "--defer", timeout=120)
    assert p.returncode == 0, p.stderr
    causes = check_oplog(tmp_path / "defer.jsonl").findings.root_causes
    first = causes[0]
    assert (first.kind, first.first.label, first.second.label) == ("RAW", "irecv", "addmm")
    assert first.second.location == f"{PROGRAM}:22 forward"  # (torch.relu(self.layer(x)))
    assert first.first.location.startswith(f"{PROGRAM}:") and first.ranks == (1,)
    assert len(causes) <= 3 and {rc.first.label for rc in causes} == {"irecv"}
