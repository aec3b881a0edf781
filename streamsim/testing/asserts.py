"""The assertions of :mod:`streamsim.testing` (see there): each runs a model or an op log and
raises AssertionError with the report's text."""
from __future__ import annotations

import os
from typing import Any, Collection, Mapping

from ..pipeline import check_oplog, run_model, strategies
from ..oplog import OpLog
from ..report.report import Report, render_text
from ..sim.errors import ModelError
from ..sim.model import Model, is_model_path

ModelInput = str | os.PathLike | Model | OpLog
RootCauseName = tuple[str, str, str, str]  # (kind, buffer, first site's label, second's)

__all__ = ["run", "assert_safe", "assert_hazard", "assert_root_causes", "root_cause_names"]


def run(model: ModelInput, variant: str | None = None, *, seed: int | None = None,
        jitter: float = 0.0, strategy: str = strategies.DEFAULT, depth: int = 2,
        params: Mapping[str, Any] | None = None, **kw_params: Any) -> Report:
    """The report of one run, as ``streamsim run`` (a model) or ``streamsim check`` (an op log)
    makes it, fixes costed: what every assertion below checks and prints."""
    values = {**(params or {}), **kw_params}
    if isinstance(model, Model) or (not isinstance(model, OpLog) and is_model_path(os.fspath(model))):
        return run_model(model if isinstance(model, Model) else os.fspath(model), variant, values,
                         seed=seed, jitter=jitter, strategy=strategy, depth=depth)
    if variant is not None or values or not strategies.get(strategy).applies_to_oplog:
        raise ModelError(f"{getattr(model, 'path', model)}: an op log takes no variant, parameter "
                         "or strategy (those are a model's)")
    return check_oplog(model if isinstance(model, OpLog) else os.fspath(model), seed=seed,
                       jitter=jitter)


def assert_safe(model: ModelInput, variant: str | None = None, **kw: Any) -> Report:
    """Fail (AssertionError, the report's text) on any data hazard or deadlock; return the report.
    Takes :func:`run`'s arguments."""
    report = run(model, variant, **kw)
    if not report.findings.clean:
        raise AssertionError(render_text(report))
    return report


def assert_hazard(model: ModelInput, variant: str | None = None, *, kind: str | None = None,
                  buffer: str | None = None, manifest: bool | None = None, **kw: Any) -> Report:
    """Fail unless some data hazard matches: ``kind`` (``RAW``, ``WAR``, ``WAW``,
    ``use-after-free``), ``buffer`` (its name) and ``manifest`` (True: it struck in this run;
    False: latent), each when given. The message names what was expected, then the report."""
    report = run(model, variant, **kw)
    if not any((kind is None or h.kind == kind) and (buffer is None or h.buffer == buffer)
               and (manifest is None or h.manifest == manifest)
               for h in report.findings.hazards):
        wanted = " ".join(filter(None, (
            {True: "manifest", False: "latent"}.get(manifest), kind or "data hazard",
            f"on {buffer!r}" if buffer is not None else "")))
        raise AssertionError(f"expected a {wanted}; the run found none:\n\n{render_text(report)}")
    return report


def root_cause_names(report: Report) -> list[RootCauseName]:
    """Each root cause of ``report`` as ``(kind, buffer, first label, second label)``, in report
    order: what :func:`assert_root_causes` compares."""
    return [(rc.kind, rc.buffer, rc.first.label, rc.second.label)
            for rc in report.findings.root_causes]


def assert_root_causes(model: ModelInput, variant: str | None = None, *,
                       expected: Collection[RootCauseName], **kw: Any) -> Report:
    """Fail unless the run's root causes are exactly ``expected`` (in any order), each
    ``(kind, buffer, first label, second label)`` as :func:`root_cause_names` gives them; the
    message lists the missing and the unexpected ones, then the report."""
    report = run(model, variant, **kw)
    found = root_cause_names(report)
    want = [tuple(e) for e in expected]
    missing = [e for e in want if e not in found]
    extra = [f for f in found if f not in want]
    if missing or extra:
        lines = ["the root causes differ from the expected ones:"]
        lines += [f"  missing:    {e!r}" for e in missing]
        lines += [f"  unexpected: {f!r}" for f in extra]
        raise AssertionError("\n".join(lines) + "\n\n" + render_text(report))
    return report
