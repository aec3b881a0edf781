"""Labels a model gives the ops it issues: their step and micro-batch (``Host.step``,
``Host.microbatch``), and, for a program that replays a file, the file line they stand for
(``Host.origin``, :mod:`.origins`).

``host.step = t`` labels the ops that follow with step ``t`` (reports, step metrics). A pipeline schedule runs several micro-batches in one iteration, so ``host.step`` alone leaves their
ops indistinguishable in reports ("step 3 -> step 3"). ``host.microbatch = k`` labels the ops that
follow (until set again, ``None`` to clear) with micro-batch ``k``; reports, JSON and pictures show
it beside the step (``step 3 micro-batch 1``, ``s3 mb1``). The label lives in each op's
``attrs["microbatch"]`` (``Op.microbatch``), put there by the engine's record hook
(``Engine.tag_rec``), installed the first time a model sets a micro-batch: a model that never does
pays nothing, and its reports are unchanged.
"""
from __future__ import annotations

from typing import Any, Callable

from .errors import ModelError
from .origins import Origin, install as install_origins


def _get_step(host: Any) -> int | None:
    return host._h.step


def _set_step(host: Any, value: int | None) -> None:
    """Label the ops that follow with a step number (shown in reports)."""
    host._h.step = value


def _get(host: Any) -> int | None:
    return host._h.microbatch


def _set(host: Any, value: int | None) -> None:
    """Label the ops that follow with micro-batch ``value`` (an int, or None: no label)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ModelError(f"host.microbatch must be an int or None, not {value!r}")
    host._h.microbatch = value
    engine = host._e
    if not getattr(engine.tag_rec, "labels_microbatch", False):
        engine.tag_rec = _tagger(engine, engine.tag_rec)


def _tagger(engine: Any, previous: Callable | None) -> Callable:
    """The record hook: each new op takes the micro-batch of the host thread issuing it (every
    op is created while its host thread runs: ``engine.current``)."""
    def tag(rec) -> None:
        if previous is not None:
            previous(rec)
        h = engine.current
        if h is not None and h.microbatch is not None:
            rec.attrs = {**rec.attrs, "microbatch": h.microbatch}
    tag.labels_microbatch = True  # type: ignore[attr-defined]
    return tag


def _get_origin(host: Any) -> Origin | None:
    return host._h.origin


def _set_origin(host: Any, value: Origin | None) -> None:
    """Label the ops that follow with the file line they stand for (a replay's; None: none)."""
    h = host._h
    if h.origin is None and value is not None:  # (the engine's hook: once)
        install_origins(host._e)
    h.origin = value


step = property(_get_step, _set_step, doc=_set_step.__doc__)
origin = property(_get_origin, _set_origin, doc=_set_origin.__doc__)
microbatch = property(_get, _set, doc=_set.__doc__)
