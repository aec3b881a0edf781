"""Assertions for a model's own test suite: one call runs a model (or replays an op log) and
fails with the report ``streamsim run`` would print.

A regression test is three lines:

    from streamsim.testing import assert_safe

    def test_the_send_buffer_is_waited_before_reuse():
        assert_safe("models/vllm_pp.py", "fixed_54962")

With pytest, the ``streamsim_check`` fixture (`streamsim.testing.plugin`, registered through
the ``pytest11`` entry point: no conftest, no import) offers the same calls and reports a failure
as the report's text alone, without a Python traceback.

The helpers take ``model``: a model file (``.py``), a loaded `streamsim.Model`, an op log
path (any other file) or a parsed `streamsim.oplog.OpLog`; ``variant`` and ``**params``
(typed values or ``--set`` text) apply to a model only. ``seed``, ``jitter``, ``strategy`` and
``depth`` are the simulation's own keywords, as for ``streamsim run``; a model parameter of one of
those names goes in ``params={...}``. Each helper returns the `streamsim.Report`, so a
test can go on to read its records (``report.findings.root_causes``...).

* `run`: the report, no assertion.
* `assert_safe`: no data hazard and no deadlock (warnings do not count: the exit code's rule).
* `assert_hazard`: some hazard of this kind / buffer / manifest-or-latent is found (a model
  kept to show a bug must keep showing it).
* `assert_root_causes`: exactly these root causes, each named ``(kind, buffer, first label,
  second label)``: the two code sites by their labels, not their line numbers, so that editing the
  model file does not break the test.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["run", "assert_safe", "assert_hazard", "assert_root_causes", "root_cause_names"]


def __getattr__(name: str) -> Any:
    """The helpers, imported on first use: the pytest plugin imports this package in every
    session, and need not pay for the simulator and the analyses until a test runs one."""
    if name not in __all__:
        raise AttributeError(f"module 'streamsim.testing' has no attribute {name!r}")
    value = getattr(import_module(".asserts", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
