"""The examples in docs/oplog.md say what `check` finds, and docs/testing.md's model and tests
run as the page says: each is checked as written."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from streamsim import analyse, parse_oplog, simulate_oplog
from streamsim.trace import HOST

DOC = Path(__file__).resolve().parents[1] / "docs" / "oplog.md"


def blocks(section: str = "Examples") -> list[str]:
    """The op logs of one section of the page (``## Examples`` unless told)."""
    text = DOC.read_text().split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(\{.*?)```", text, flags=re.S)


def check(text: str):
    trace = simulate_oplog(parse_oplog(text, "doc.jsonl"))
    return trace, analyse(trace)


def test_the_declarations_example_times_the_send_from_its_group_and_the_launch_overhead():
    """The page's sums: the first forward runs 5-905 us (5 us to issue it), line 4's send then
    lasts 10 + 1,048,576 / 1,000 us, and the second forward (905-1,805 us) rewrites `hidden`
    while it runs (a manifest WAR)."""
    trace, found = check(blocks("Declarations")[0])
    (send,) = [op for op in trace.ops if op.kind == "isend" and op.agent.kind != HOST]
    assert (send.start, round(send.end - send.start, 3)) == (905.0, 1058.576)
    (h,) = found.hazards
    assert (h.kind, trace.op(h.first).line, trace.op(h.second).line, h.manifest) == ("WAR", 4, 5, True)
    assert (trace.op(h.second).start, trace.op(h.second).end) == (905.0, 1805.0)


def test_the_vllm_example_is_one_war_between_lines_2_and_3_fixed_by_the_wait():
    text = blocks()[0]
    trace, found = check(text)
    (h,) = found.hazards
    assert (h.kind, trace.op(h.first).line, trace.op(h.second).line) == ("WAR", 2, 3)
    lines = text.splitlines(keepends=True)
    fixed = "".join(lines[:2]) + '{"op":"wait","rank":0,"handle":"send_t"}\n' + "".join(lines[2:])
    assert check(fixed)[1].hazards == ()


def test_the_pinned_example_is_clean_and_races_without_its_event():
    text = blocks()[1]
    assert check(text)[1].hazards == ()
    lines = text.splitlines(keepends=True)
    trace, found = check("".join(lines[:2] + lines[4:]))
    (h,) = found.hazards
    assert (h.kind, trace.op(h.first).name, trace.op(h.second).name) == ("WAR", "h2d", "fill")


def test_the_strided_example_races_only_where_bytes_are_shared():
    """Even and odd columns never race; every fourth column races with the even writer only."""
    trace, found = check(blocks()[2])
    assert [(h.kind, trace.op(h.first).line, trace.op(h.second).line) for h in found.hazards] \
        == [("RAW", 1, 3)]


def test_the_handoff_example_is_clean_and_its_fix_is_the_handoff():
    """With its put and get the loader's fill is ordered before the main thread's read; without
    them it is one RAW whose fix is a hand-off, and the fixed log is clean."""
    from streamsim.oplog.fixed import fixed_oplog_text
    text = blocks()[3]
    assert check(text)[1].hazards == ()
    lines = text.splitlines(keepends=True)
    racy = lines[0] + lines[3]
    trace, found = check(racy)
    (h,) = found.hazards
    assert (h.kind, trace.op(h.first).name, trace.op(h.second).name, h.fix.kind) == \
        ("RAW", "fill", "consume", "handoff")
    assert check(fixed_oplog_text(racy, trace, [h.fix]))[1].hazards == ()


# --- docs/testing.md: a user's model, its tests, and the failure they show --------------------------

TESTING = DOC.parent / "testing.md"


def page_blocks() -> tuple[str, str, str, str]:
    """The model, its test file, the failure shown, and the ``>>>`` session of docs/testing.md."""
    text = TESTING.read_text()
    model, tests = re.findall(r"```python\n(.*?)```", text, flags=re.S)[:2]
    failure = re.search(r"```\n(_+ test_.*?)```", text, flags=re.S).group(1)
    session = re.search(r"```\n(>>> .*?)```", text, flags=re.S).group(1)
    return model, tests, failure, session


def _pytest(folder: Path) -> str:
    env = {**os.environ, "COLUMNS": "80"}  # (pytest's header rules are as wide as the terminal)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), "test_prefetch.py"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    return done.stdout + done.stderr


def test_the_testing_page_runs_as_written_and_fails_as_shown(tmp_path):
    """The page's model passes its three tests through the installed pytest plugin; with the
    fix's two lines deleted, the first test fails with exactly the report the page shows."""
    model, tests, failure, _ = page_blocks()
    (tmp_path / "prefetch.py").write_text(model)
    (tmp_path / "test_prefetch.py").write_text(tests)
    assert "3 passed" in _pytest(tmp_path)
    unfixed = [ln for ln in model.splitlines(keepends=True)
               if "copied is not None and variant" not in ln and "copied.synchronize()" not in ln]
    assert len(unfixed) == len(model.splitlines()) - 2
    (tmp_path / "prefetch.py").write_text("".join(unfixed))
    out = _pytest(tmp_path)
    assert "2 failed, 1 passed" in out and failure in out


def test_the_testing_page_shows_the_real_reprs():
    import streamsim
    _, _, _, session = page_blocks()
    lines = session.splitlines()
    report = eval(lines[0].removeprefix(">>> report = "), {"streamsim": streamsim})
    shown = {lines[i].removeprefix(">>> "): lines[i + 1] for i in range(1, len(lines), 2)}
    assert shown == {expr: repr(eval(expr, {"report": report})) for expr in shown}
