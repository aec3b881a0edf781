"""The recorder's tests need torch: without it they skip on a developer's machine, but under CI
(``CI`` set) a missing torch fails them, so that CI never passes with the recorder untested."""
from __future__ import annotations

import os

import pytest


def need_torch():
    """torch, or a skip (a failure under CI) saying how to install it."""
    try:
        import torch
    except ImportError:
        msg = "torch is not installed: make venv installs it (pip install torch==2.13.0)"
        if os.environ.get("CI"):
            pytest.fail(f"CI: {msg}; the recorder tests must run in CI", pytrace=False)
        pytest.skip(msg, allow_module_level=True)  # (test_access's parameters call it at import)
    return torch


@pytest.fixture
def torch():
    return need_torch()
