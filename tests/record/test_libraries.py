"""Libraries recorded on 2 gloo ranks. ``torch.distributed.pipelining``: ScheduleGPipe,
Schedule1F1B and ScheduleInterleaved1F1B check clean, and with their waits deferred (an injected
bug) every root cause is a receive read before its wait, the forward's at the program's own line. DDP: clean, because the
waits its reducer does in C++ are inferred from the collectives' completion; without those
inferred lines the same log is not clean."""
from __future__ import annotations

from pathlib import Path

import pytest

from streamsim import check_oplog

from .test_programs import record_all

PROGRAM = "tests/record/programs/libraries.py"
SOURCE = (Path(__file__).resolve().parents[2] / PROGRAM).read_text().splitlines()
STEP_LINES = (SOURCE.index("            schedule.step(x)") + 1,  # (rank 0's, rank 1's)
              SOURCE.index("            schedule.step(target=target, losses=[])") + 1)
FORWARD_LINE = next(i for i, x in enumerate(SOURCE, 1) if "the stage's forward" in x)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The clean program (pipelines, then DDP) and the two deferred-wait pipelines, recorded side
    by side: their logs."""
    d = tmp_path_factory.mktemp("libraries")
    runs = record_all([(d / "pp.jsonl", PROGRAM), (d / "defer.jsonl", PROGRAM, "--defer"),
                       (d / "defer_interleaved.jsonl", PROGRAM, "--defer-interleaved")],
                      timeout=120)
    for p in runs:
        assert p.returncode == 0, p.stderr
    return d / "pp.jsonl", d / "defer.jsonl", d / "defer_interleaved.jsonl"


def test_gpipe_1f1b_interleaved_1f1b_and_ddp_check_clean(logs):
    f = check_oplog(logs[0]).findings
    assert not f.hazards and f.deadlock is None and not f.warnings


def test_deferred_receive_waits_are_caught_at_the_stages_forward(logs):
    """Every root cause is a receive read before its (deferred) wait: the forward's input on
    rank 1, at the stage's own line (its backward's reads of the same input are instances of
    that root cause: the one wait before the forward orders them too), and the backward's
    gradient on rank 0; one missing wait a receive, one root cause each."""
    causes = check_oplog(logs[1]).findings.root_causes
    assert 1 <= len(causes) <= 2
    assert {(rc.kind, rc.first.label) for rc in causes} == {("RAW", "irecv")}
    forward = [rc for rc in causes if rc.second.label == "addmm"]
    assert [(rc.second.location, rc.ranks) for rc in forward] == \
        [(f"{PROGRAM}:{FORWARD_LINE} forward", (1,))]  # (torch.relu(self.layer(x)))
    assert forward[0].first.location.startswith(f"{PROGRAM}:")


def test_interleaved_1f1b_with_its_forward_receives_waited_late_is_caught_at_the_forward(logs):
    """The mutant waits each forward receive after the stage's forward instead of before (2
    stages a rank, so both ranks receive forward inputs): one root cause a rank, a receive
    (issued at the rank's own ``schedule.step`` line) read by the stage's forward."""
    causes = check_oplog(logs[2]).findings.root_causes
    assert 1 <= len(causes) <= 2
    assert {(rc.kind, rc.first.label, rc.second.label, rc.second.location) for rc in causes} \
        == {("RAW", "irecv", "addmm", f"{PROGRAM}:{FORWARD_LINE} forward")}
    steps = {0: f"{PROGRAM}:{STEP_LINES[0]} <module>", 1: f"{PROGRAM}:{STEP_LINES[1]} <module>"}
    for rc in causes:
        [r] = rc.ranks
        assert rc.first.location == steps[r] and rc.buffer == f"tensor made at {steps[r]}"


def test_ddp_is_clean_with_its_cpp_waits_inferred_and_not_without_them(logs, tmp_path):
    """(Clean with them: test_gpipe_1f1b_interleaved_1f1b_and_ddp_check_clean; the pipelines' waits are Python's,
    none inferred.)"""
    from streamsim.record.works import is_inferred
    text = logs[0].read_text()
    inferred = [x for x in text.splitlines() if is_inferred(x)]
    assert inferred  # (the start-up broadcasts' and every bucket all-reduce's)
    without = tmp_path / "ddp_without.jsonl"
    without.write_text("".join(x + "\n" for x in text.splitlines() if not is_inferred(x)))
    f = check_oplog(without).findings
    assert f.hazards and {h.kind for h in f.hazards} == {"RAW"}
