"""Strided buffer refs in the op log (issue 25): ``{"buffer", "offset", "sizes", "strides",
"itemsize"}`` names only the bytes a non-contiguous view touches, so ``x[:, 0::2]`` and
``x[:, 1::2]`` do not race where their byte hulls would; the reader checks the fields (one-line
errors naming the line and field), and the writer writes them back."""
from __future__ import annotations

import json

import pytest

from streamsim import check_oplog, dump_oplog
from streamsim.oplog import parse_oplog, simulate_oplog
from streamsim.sim.errors import ModelError
from streamsim.strided import Strided


def ref(offset: int, sizes, strides, itemsize: int = 4, buffer: str = "x") -> dict:
    r = {"buffer": buffer, "sizes": sizes, "strides": strides, "itemsize": itemsize}
    if offset:
        r["offset"] = offset
    return r


def log(*lines: dict) -> str:
    return "\n".join(json.dumps(d) for d in lines) + "\n"


EVEN = ref(0, [4, 4], [8, 2])  # x[:, 0::2] of a (4, 8) float32 x
ODD = ref(4, [4, 4], [8, 2])  # x[:, 1::2]


def kinds(text: str, tmp_path) -> list[tuple[str, int, int]]:
    p = tmp_path / "s.jsonl"
    p.write_text(text)
    f = check_oplog(str(p)).findings
    return [(h.kind, h.first, h.second) for h in f.hazards]


def test_even_and_odd_columns_on_two_streams_do_not_race(tmp_path):
    """Two streams writing a tensor's even and odd columns, unordered: no hazard (their byte hulls,
    what a plain range would say, overlap in 116 bytes); a third reading every fourth column races
    with the even writer only."""
    text = log({"op": "launch", "stream": "s1", "name": "even", "writes": [EVEN]},
               {"op": "launch", "stream": "s2", "name": "odd", "writes": [ODD]})
    assert kinds(text, tmp_path) == []
    every4 = {"op": "launch", "stream": "s3", "name": "every4",
              "reads": [ref(0, [4, 2], [8, 4])]}
    trace = simulate_oplog(parse_oplog(text + log(every4)))
    assert [(h[0], trace.op(h[1]).name, trace.op(h[2]).name)
            for h in kinds(text + log(every4), tmp_path)] == [("RAW", "even", "every4")]


def test_hull_ranges_of_the_same_views_race(tmp_path):
    """The same two kernels written as byte ranges (the hulls) report the false WAW that strided
    refs remove."""
    text = log({"op": "launch", "stream": "s1", "writes": [{"buffer": "x", "nbytes": 124}]},
               {"op": "launch", "stream": "s2",
                "writes": [{"buffer": "x", "offset": 4, "nbytes": 124}]})
    assert [k for k, _, _ in kinds(text, tmp_path)] == ["WAW"]


def test_a_dense_strided_ref_is_a_plain_range():
    """A transposed tensor touches every byte of its range: the reader makes it a plain view (so a
    recorder's strided ref of it costs the analysis nothing)."""
    lines = parse_oplog(log({"op": "launch", "writes": [ref(0, [8, 4], [1, 8])]})).lines
    v = lines[0].writes[0].view
    assert (v.offset, v.nbytes, v.pattern) == (0, 128, None)
    v = parse_oplog(log({"op": "launch", "writes": [ODD]})).lines[0].writes[0].view
    assert (v.offset, v.nbytes, v.pattern) == (4, 124, Strided(((16, 8),), 4))


def test_strided_refs_survive_the_writer(tmp_path):
    """dump_oplog writes a strided view back as a strided ref that reads as the same view, and the
    written log's check is the original's (no hazard between even and odd)."""
    odd_int16 = ref(2, [3, 2], [3, 1], itemsize=2, buffer="y")  # blocks of 4 bytes, stride 6
    text = log({"op": "launch", "stream": "s1", "writes": [EVEN, odd_int16]},
               {"op": "launch", "stream": "s2", "writes": [ODD], "reads": [ref(0, [2], [3], 2, "y")]})
    trace = simulate_oplog(parse_oplog(text))
    out = tmp_path / "d.jsonl"
    dump_oplog(trace, str(out))
    written = out.read_text()
    assert '"sizes"' in written and '"nbytes":124' not in written
    again = simulate_oplog(parse_oplog(written))
    views = lambda t: sorted((a.view.buffer, a.view.offset, a.view.nbytes, a.view.pattern, a.mode)
                             for o in t.ops for a in o.accesses)
    assert views(again) == views(trace)
    assert [k for k, _, _ in kinds(written, tmp_path)] == [k for k, _, _ in kinds(text, tmp_path)]


def error_of(text: str) -> str:
    with pytest.raises(ModelError) as exc:
        parse_oplog(text, "s.jsonl", empty_ok=False)
    return str(exc.value)


@pytest.mark.parametrize("r, message", [
    ({"buffer": "x", "sizes": [4]},
     "s.jsonl:2: a strided buffer ref of 'writes' is missing its 'strides'"),
    ({"buffer": "x", "itemsize": 4},
     "s.jsonl:2: a strided buffer ref of 'writes' is missing its 'sizes'"),
    ({"buffer": "x", "sizes": [4, 4], "strides": [2]},
     "s.jsonl:2: a strided buffer ref of 'writes' has 2 sizes and 1 strides: one stride a size"),
    ({"buffer": "x", "sizes": [4], "strides": [-1]},
     "s.jsonl:2: field 'strides' of a buffer ref in 'writes' must be an array of at most 64 "
     "non-negative integers below 2^63, got [-1]"),
    ({"buffer": "x", "sizes": "4", "strides": [1]},
     "s.jsonl:2: field 'sizes' of a buffer ref in 'writes' must be an array of at most 64 "
     "non-negative integers below 2^63, got string"),
    ({"buffer": "x", "sizes": [4], "strides": [1], "itemsize": 0},
     "s.jsonl:2: field 'itemsize' of a buffer ref in 'writes' must be a positive integer, got 0"),
    ({"buffer": "x", "sizes": [4], "strides": [1], "nbytes": 4},
     "s.jsonl:2: a buffer ref of 'writes' gives both 'nbytes' and 'sizes'/'strides': a strided "
     "ref's size is what its sizes and strides reach"),
    ({"buffer": "x", "sizes": [3, 2**62], "strides": [2**62, 1]},
     "s.jsonl:2: a strided buffer ref of 'writes' reaches byte 13835058055282163712, beyond 2^63"),
    ({"buffer": "x", "sizes": [4, 4], "strides": [8, 2], "itemsize": 4, "offset": 8},
     "s.jsonl:2: view [8:132] of buffer 'x' is outside its 128 bytes (allocated at line 1)"),
])
def test_bad_strided_refs_are_one_line_errors(r, message):
    """Every mistake in a strided ref stops the read with one line naming the file, the line and
    the field."""
    text = log({"op": "alloc", "buffer": "x", "nbytes": 128}, {"op": "launch", "writes": [r]})
    assert error_of(text) == message
