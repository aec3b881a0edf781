"""Libraries recorded on 2 gloo ranks. ``torch.distributed.pipelining``: ScheduleGPipe and
Schedule1F1B check clean, and with their waits deferred (an injected bug) the first root cause is
the receive read by the stage's forward, at the program's own line. DDP: clean, because the
waits its reducer does in C++ are inferred from the collectives' completion; without those
inferred lines the same log is not clean."""
from __future__ import annotations

import pytest

from streamsim import check_oplog

from .test_programs import record_all

PROGRAM = "tests/record/programs/libraries.py"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The clean program (pipelines, then DDP) and the deferred-wait pipeline, recorded side by
    side: their logs."""
    d = tmp_path_factory.mktemp("libraries")
    runs = record_all([(d / "pp.jsonl", PROGRAM), (d / "defer.jsonl", PROGRAM, "--defer")],
                      timeout=120)
    for p in runs:
        assert p.returncode == 0, p.stderr
    return d / "pp.jsonl", d / "defer.jsonl"


def test_gpipe_1f1b_and_ddp_check_clean(logs):
    f = check_oplog(logs[0]).findings
    assert not f.hazards and f.deadlock is None and not f.warnings


def test_deferred_receive_waits_are_caught_at_the_stages_forward(logs):
    causes = check_oplog(logs[1]).findings.root_causes
    first = causes[0]
    assert (first.kind, first.first.label, first.second.label) == ("RAW", "irecv", "addmm")
    assert first.second.location == f"{PROGRAM}:26 forward"  # (torch.relu(self.layer(x)))
    assert first.first.location.startswith(f"{PROGRAM}:") and first.ranks == (1,)
    assert len(causes) <= 3 and {rc.first.label for rc in causes} == {"irecv"}


def test_ddp_is_clean_with_its_cpp_waits_inferred_and_not_without_them(logs, tmp_path):
    """(Clean with them: test_gpipe_1f1b_and_ddp_check_clean; the pipelines' waits are Python's,
    none inferred.)"""
    from streamsim.record.works import INFERRED
    text = logs[0].read_text()
    inferred = [x for x in text.splitlines() if INFERRED in x]
    assert inferred  # (the start-up broadcasts' and every bucket all-reduce's)
    without = tmp_path / "ddp_without.jsonl"
    without.write_text("".join(x + "\n" for x in text.splitlines() if INFERRED not in x))
    f = check_oplog(without).findings
    assert f.hazards and {h.kind for h in f.hazards} == {"RAW"}
