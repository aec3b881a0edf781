"""Fuzzing `streamsim check` with mutated op logs (issue 19): whatever the bytes, the command ends
with exit 0 or 1 and valid JSON on stdout, or exit 2 and exactly one line on stderr that names no
Python exception class (that would be a bug of ours shown as the user's mistake); never a
traceback, never an internal error (exit 3), and never more memory than a bound for a small input.

In CI it runs a bounded number of examples; outside CI, for a long run::

    STREAMSIM_FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest -q tests/oplog/test_fuzz_cli.py

The seeds are valid op logs of the other tests (copied: tests do not import each other).
"""
from __future__ import annotations

import io
import json
import os
import re
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsim.cli.main import main

EXAMPLES = int(os.environ.get("STREAMSIM_FUZZ_EXAMPLES", "120"))
PYTHON_EXCEPTION = re.compile(r"\b(?:[A-Z][a-z]+)+(?:Error|Exception)\b|\binternal error\b")
MEMORY_BOUND = 64 << 20  # bytes traced during one example (inputs are a few KB)

SEEDS = [
    # the op-log format's example: a WAR between a send and the next forward
    '{"op":"launch","rank":0,"name":"forward[t]","writes":["hidden"],"dur":900}\n'
    '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400}\n'
    '{"op":"launch","rank":0,"name":"forward[t+1]","writes":["hidden"],"dur":900}\n'
    '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","dur":400}\n',
    # a deadlock with an unmatched send (issue 19 item 1)
    '{"op":"irecv","rank":1,"tensors":["a"],"peer":0,"group":"g1","handle":"r"}\n'
    '{"op":"wait","rank":1,"handle":"r"}\n'
    '{"op":"isend","rank":0,"tensors":["b"],"peer":2,"group":"g2"}\n',
    # events, a collective, views with windows, alloc and free, a comment
    '# a header comment\n'
    '{"op":"alloc","rank":0,"buffer":"x","nbytes":64}\n'
    '{"op":"launch","rank":0,"name":"fill","writes":[{"buffer":"x","offset":0,"nbytes":32,'
    '"window":[0.5,1.0]}],"dur":10}\n'
    '{"op":"record","rank":0,"event":"e"}\n'
    '{"op":"wait_event","rank":0,"event":"e","stream":"side"}\n'
    '{"op":"launch","rank":0,"name":"use","stream":"side","reads":["x"],"dur":5}\n'
    '{"op":"all_reduce","rank":0,"tensors":["g"],"group":"dp","ranks":[0,1],"handle":"ar"}\n'
    '{"op":"all_reduce","rank":1,"tensors":["g"],"group":"dp","ranks":[0,1]}\n'
    '{"op":"wait","rank":0,"handle":"ar"}\n'
    '{"op":"free","rank":0,"buffer":"x"}\n'
    '{"op":"launch","rank":0,"name":"late","reads":["x"]}\n',
    # gloo objects, a host thread, a blocking wait and a query
    '{"op":"send_object","rank":0,"peer":1,"nbytes":100}\n'
    '{"op":"recv_object","rank":1,"peer":0}\n'
    '{"op":"host","rank":1,"host":"loader","name":"fill","writes":["pinned"],"dur":3}\n'
    '{"op":"isend","rank":1,"tensors":["pinned"],"peer":0,"handle":"h","nbytes":1048576}\n'
    '{"op":"query","rank":1,"handle":"h"}\n'
    '{"op":"wait","rank":1,"handle":"h","blocking":true}\n'
    '{"op":"irecv","rank":0,"tensors":["in"],"peer":1}\n'
    '{"op":"sync_device","rank":0}\n',
]

# Bytes that have broken readers before: huge numbers, NaN, other line endings and separators,
# BOMs, NUL, invalid UTF-8, deep nesting, duplicate keys, escapes, control characters.
TOKENS = [b"1" + b"0" * 400, b"1e400", b"-1", b"NaN", b"Infinity", b"\r", b"\r\n", b"\n\n",
          b"\xef\xbb\xbf", b"\x00", b"\xff", b"\xe2\x80\xa8", b"\xc2\x85", b"[" * 200,
          b'"op":"launch",', b'"rank":2147483648', b'"dur":1e16', b'"\\ud800"', b"#",
          b'"name":"\\u001b[2J`` <script>"', b"{}", b"[]", b'"tensors":[]', b"true", b"null",
          b'"handle":"h"', b'"peer":0', b'"group":"g"', b'"window":[1,0]', b"9" * 30]


@st.composite
def mutated_log(draw) -> bytes:
    """A seed log with a few byte-, token- or line-level mutations."""
    data = bytearray(draw(st.sampled_from(SEEDS)).encode())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "replace", "delete", "lines", "flip"]))
        at = draw(st.integers(0, len(data)))
        if kind == "insert":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif kind == "replace":
            end = min(len(data), at + draw(st.integers(1, 12)))
            data[at:end] = draw(st.sampled_from(TOKENS))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 20))]
        elif kind == "flip" and data:
            data[min(at, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        else:  # duplicate, drop or swap whole lines
            lines = bytes(data).split(b"\n")
            i, j = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
            how = draw(st.sampled_from(["dup", "drop", "swap"]))
            if how == "dup":
                lines.insert(j, lines[i])
            elif how == "drop" and len(lines) > 1:
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_log(), st.sampled_from([["--format", "json"], ["--format", "json", "--seed", "3",
                                                               "--jitter", "0.5"]]))
def test_check_on_a_mutated_log_ends_cleanly(tmp_path_factory, data, options):
    """Exit 0/1 with valid JSON, or exit 2 with one stderr line; no traceback; memory bounded."""
    path = tmp_path_factory.mktemp("fuzz") / "mutated.jsonl"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    tracemalloc.start()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["check", str(path), *options])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    stderr = err.getvalue()
    assert "Traceback" not in stderr, stderr
    assert peak < MEMORY_BOUND, (peak, data)
    if code == 2:
        assert stderr.count("\n") == 1 and stderr.startswith("streamsim: "), (stderr, data)
        assert out.getvalue() == ""
        # a bad input's message says what is wrong in the input; one that names a Python
        # exception class is a bug of ours passed off as the user's mistake (issue 23)
        assert not PYTHON_EXCEPTION.search(stderr), (stderr, data)
    else:
        assert code in (0, 1), (code, stderr, data)  # (3 would be an internal error: a bug)
        report = json.loads(out.getvalue())
        assert (code == 1) == bool(report["hazards"] or report["deadlock"]), data
