"""What the compiled modules' tests share: which module a test module needs (where it was not
built, no compiler at install time, its tests are skipped, and under CI, which builds every one,
its absence fails instead: a skip there would hide a break), and every model's run, each variant
(the traces they compare the two paths on)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamsim import native
from streamsim.sim.model import load_model
from streamsim.sim.runner import simulate
from streamsim.trace import Trace

MODELS = sorted((Path(__file__).resolve().parents[2] / "models").glob("*.py"))


def required(module: str, what: str) -> pytest.MarkDecorator:
    """The skip mark of a test module that needs ``streamsim.native.<module>`` (``what``: what
    it is, for the messages); raises under CI when the module was not built."""
    built = module in native.modules()
    if not built and os.environ.get("CI"):
        raise RuntimeError(f"CI: {what} (streamsim.native.{module}) not built: pip install -e . "
                           "printed why; the differential tests must run in CI")
    return pytest.mark.skipif(not built, reason=f"{what} not built")


def model_variants() -> list[tuple[Path, str]]:
    """(model path, variant) of every model of models/, each variant."""
    return [(p, v) for p in MODELS for v in load_model(str(p)).variants]


def variant_id(x: Path | str) -> str:
    """A test id for :func:`model_variants`' parameters: the model's name, the variant."""
    return x.stem if isinstance(x, Path) else x


def model_trace(path: Path, variant: str) -> Trace:
    """The run of a model's variant at its default parameters."""
    model = load_model(str(path))
    return simulate(model, variant, model.resolve(()))
