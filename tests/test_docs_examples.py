"""The examples in docs/oplog.md say what `check` finds: each is checked as written."""
from __future__ import annotations

import re
from pathlib import Path

from streamsim import analyse, parse_oplog, simulate_oplog

DOC = Path(__file__).resolve().parents[1] / "docs" / "oplog.md"


def blocks() -> list[str]:
    return re.findall(r"```\n(\{.*?)```", DOC.read_text(), flags=re.S)


def check(text: str):
    trace = simulate_oplog(parse_oplog(text, "doc.jsonl"))
    return trace, analyse(trace)


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
