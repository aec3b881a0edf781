"""The scans that key ops by thread (issue order, injection keys, the ops a fix delays) look
threads up by object identity for speed (issue 26), but must still tell threads apart by
equality: two equal Agent objects are one thread, as when the dataclass was hashed per op. Each
test below fails if a scan treats equal-but-distinct Agent objects as two threads, or if the
fix shift's narrowed keying disagrees with ``injection_keys``."""
from __future__ import annotations

import os

from streamsim import load_model, simulate
from streamsim.pipeline.fixcost import _keyed_host_ops
from streamsim.sim.inject import injection_keys
from streamsim.trace import HOST, STREAM, Agent, issue_keys, trace_from_ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _twin_trace(line: bool):
    """Two host actions of rank 0's main thread whose Agent objects are equal but distinct, each
    enqueuing a kernel, and one action of rank 1 (``line``: op-log lines on the first two host
    actions; the third, as a fix's inserted action, has none and goes after its thread's last
    line)."""
    a, b = Agent(0, HOST, "main"), Agent(0, HOST, "main")
    other = Agent(1, HOST, "main")
    s = Agent(0, STREAM, "compute")
    assert a == b and a is not b
    ln = (lambda n: {"line": n}) if line else (lambda n: {})
    ops = [dict(name="launch", agent=a, kind="launch", location="m.py:1", **ln(1)),
           dict(name="launch", agent=s, kind="launch", issuer=0, location="m.py:1"),
           dict(name="host", agent=other, kind="host", location="m.py:9", **ln(2)),
           dict(name="launch", agent=b, kind="launch", location="m.py:1"),
           dict(name="launch", agent=s, kind="launch", issuer=3, location="m.py:1")]
    return trace_from_ops(ops)


def test_issue_keys_count_equal_agents_as_one_thread():
    """A model's round-robin: the second action of rank 0's thread is its index 1, two rounds
    after its first, whichever Agent object it carries; a stream op goes right after its action."""
    keys = issue_keys(_twin_trace(line=False))
    width = 4  # two host threads
    assert keys == [0, 1, 2, 1 * width, 1 * width + 1]


def test_issue_keys_of_an_op_log_follow_lines_per_equal_thread():
    """The action without a line goes right after line 1, its thread's last line, though its
    Agent object is not the one that carried line 1."""
    keys = issue_keys(_twin_trace(line=True))
    assert keys == [4, 5, 8, 1 * 4 + 2, 1 * 4 + 3]


def test_injection_keys_number_equal_agents_as_one_thread():
    """The second launch from m.py:1 of rank 0's thread is its n=1, though its Agent object is
    another one: a re-run finds it by that count."""
    trace = _twin_trace(line=False)
    keys = injection_keys(trace)
    assert keys[0][1:] == ("launch", "m.py:1", 0) and keys[3][1:] == ("launch", "m.py:1", 1)
    assert keys[0][0] == keys[3][0] == Agent(0, HOST, "main")
    assert set(keys) == {0, 2, 3}  # host actions only


def test_the_fix_shift_keys_what_injection_keys_keys():
    """On a real model run (repeated lines, many threads), the fix shift's keying restricted to
    some keys is ``injection_keys`` restricted to them, op for op."""
    model = load_model(os.path.join(ROOT, "models", "vllm_pp.py"))
    trace = simulate(model, "regressed_49274", ["requests=2", "decode_steps=3"])
    every = injection_keys(trace)
    wanted = set(list(every.values())[5::7])
    assert len(wanted) > 10
    assert _keyed_host_ops(trace, wanted) == {i: k for i, k in every.items() if k in wanted}


def test_injection_keys_of_some_ops_are_the_whole_keying_restricted():
    """Keying only the actions some fixes name (``injection_keys(trace, only)``, what
    ``key_fixes`` does) gives each the key the whole keying gives it: its n counts every earlier
    action of its thread, kind and location, wanted or not (a repeated line, many threads)."""
    model = load_model(os.path.join(ROOT, "models", "vllm_pp.py"))
    trace = simulate(model, "regressed_49274", ["requests=2", "decode_steps=3"])
    every = injection_keys(trace)
    for k in (3, 7, 11):
        only = set(list(every)[k::k + 2])
        assert injection_keys(trace, only) == {i: every[i] for i in every if i in only}
    twin = _twin_trace(line=False)
    assert injection_keys(twin, {3}) == {3: injection_keys(twin)[3]}
