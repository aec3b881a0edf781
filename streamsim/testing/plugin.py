"""The pytest plugin: the ``streamsim_check`` fixture, with no conftest and no import.

Installing streamsim registers this module through the ``pytest11`` entry point (setup.cfg), so
every pytest session can ask for the fixture::

    def test_fix_54962_stays_safe(streamsim_check):
        streamsim_check.assert_safe("models/vllm_pp.py", "fixed_54962")

The fixture's methods are those of :mod:`streamsim.testing`; a failed assertion fails the test
with the report's text alone (``pytest.fail(..., pytrace=False)``): the report is the explanation,
a traceback through streamsim would only hide it. This module imports nothing of streamsim until a
test asks for the fixture, so that pytest sessions that never use it do not pay for it.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import pytest


class StreamsimCheck:
    """What the ``streamsim_check`` fixture gives: :func:`streamsim.testing.run`,
    ``assert_safe``, ``assert_hazard``, ``assert_root_causes`` and ``root_cause_names``, each
    failing the test with the report's text."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        from streamsim import testing
        if name not in testing.__all__:
            raise AttributeError(f"streamsim_check has no {name!r} (it has "
                                 f"{', '.join(testing.__all__)})")
        helper = getattr(testing, name)

        @functools.wraps(helper)
        def call(*args: Any, **kw: Any) -> Any:
            try:
                return helper(*args, **kw)
            except AssertionError as e:
                message = str(e)
            pytest.fail(message, pytrace=False)  # (outside the except: no chained traceback)
        return call


@pytest.fixture
def streamsim_check() -> StreamsimCheck:
    """streamsim's assertions (see :mod:`streamsim.testing`): ``streamsim_check.assert_safe(
    "model.py", "variant", param=value)`` fails the test with the report's text."""
    return StreamsimCheck()
