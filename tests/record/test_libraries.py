"""Libraries recorded on 2 gloo ranks. ``torch.distributed.pipelining``: ScheduleGPipe and
Schedule1F1B check clean, and with their waits deferred (an injected bug) every root cause is a
receive read before its wait, the forward's at the program's own line. DDP: clean, because the
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
    """Every root cause is a receive read before its (deferred) wait: the forward's input on
    rank 1, at the stage's own line, and the backward's on either rank (which of them comes
    first follows the recorded times)."""
    causes = check_oplog(logs[1]).findings.root_causes
    assert 1 <= len(causes) <= 3
    assert {(rc.kind, rc.first.label) for rc in causes} == {("RAW", "irecv")}
    forward = [rc for rc in causes if rc.second.label == "addmm"]
    assert [(rc.second.location, rc.ranks) for rc in forward] == \
        [(f"{PROGRAM}:26 forward", (1,))]  # (torch.relu(self.layer(x)))
    assert forward[0].first.location.startswith(f"{PROGRAM}:")


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
