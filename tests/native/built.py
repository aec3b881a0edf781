"""Which compiled module a test module needs: where it was not built (no compiler at install time)
its tests are skipped, and under CI, which builds every one, its absence fails instead (a skip
there would hide a break)."""
from __future__ import annotations

import os

import pytest

from streamsim import native


def required(module: str, what: str) -> pytest.MarkDecorator:
    """The skip mark of a test module that needs ``streamsim.native.<module>`` (``what``: what
    it is, for the messages); raises under CI when the module was not built."""
    built = module in native.modules()
    if not built and os.environ.get("CI"):
        raise RuntimeError(f"CI: {what} (streamsim.native.{module}) not built: pip install -e . "
                           "printed why; the differential tests must run in CI")
    return pytest.mark.skipif(not built, reason=f"{what} not built")
