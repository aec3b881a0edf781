"""What the analyses found: data hazards (with fixes), a deadlock, warnings; and their JSON form.

These records are what reports render. They hold op ids, not ops, so they stay small and comparable;
the ``*_json`` helpers take the trace to describe the ops they name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..trace import Agent, Blocked, Op, Trace

RAW = "RAW"
WAR = "WAR"
WAW = "WAW"
USE_AFTER_FREE = "use-after-free"

Place = int | tuple  # an op id, or an injection key (agent, kind, location, n): see Fix


@dataclass(frozen=True, slots=True)
class Fix:
    """The cheapest sync that adds a hazard's missing happens-before edge.

    ``kind`` is ``wait_handle`` (wait the Work of op ``handle_op``; on ``wait_stream`` when it is set,
    i.e. an NCCL ``work.wait()`` made while that stream is current, else a host-blocking wait),
    ``event`` (record an event on ``event_stream`` right after host op ``record_after`` and wait it on
    ``wait_stream``), ``event_sync`` (record on ``event_stream``, ``event.synchronize()`` on the host) or
    ``record_stream`` (``tensor.record_stream(event_stream)`` before the free) or ``handoff`` (a put
    on a channel of its own right after host op ``record_after``, on its thread, and a get of it on
    the thread of ``before``). ``before`` is the host op before which the sync must be inserted.

    The same record names the places of a fix two ways: by op id (``before``, ``handle_op``,
    ``record_after``: ops of the run the fix was found in), or, once keyed for a re-run
    (:func:`streamsim.sim.inject.key_fixes`), by injection key, the same program action in any run
    of the same program; a keyed ``record_stream`` fix also names the ``buffer`` its free frees.

    ``text`` is always a ``str`` when read. The compiled proposer leaves it unmade (its words,
    streamsim/native/_fixes.pyx) until it is read: see :class:`_FixText`.
    """

    kind: str
    text: str
    before: Place
    handle_op: Place | None = None
    record_after: Place | None = None
    event_stream: Agent | None = None
    wait_stream: Agent | None = None
    buffer: str | None = None

    @property
    def identity(self) -> tuple:
        """What tells two fixes apart: the sync and its places, not its wording (several
        hazards, or several ops issued by one action, often share one sync)."""
        return (self.kind, self.before, self.handle_op, self.record_after, self.event_stream,
                self.wait_stream, self.buffer)


class _FixText:
    """``Fix.text``, read through its slot: the ``str`` there, or where the compiled proposer left
    the fix's words unmade (a ``Words``: streamsim/native/_fixes.pyx), the text made from them.

    Most hazards' fix texts are never read (the text report words root causes, not hazards),
    and one made at once was most of a hazard's memory. Equality, hashing, ``repr``, pickling
    and ``dataclasses.replace`` read the field by name, so they see the text."""

    __slots__ = ("slot", "unmade")

    def __init__(self, slot: Any) -> None:
        self.slot = slot  # the dataclass's member descriptor, which the compiled stages read
        self.unmade: type | None = None  # Words, once the compiled proposer is bound

    def __get__(self, fix: Any, owner: type | None = None) -> Any:
        if fix is None:
            return self
        value = self.slot.__get__(fix, owner)
        return str(value) if type(value) is self.unmade else value

    def __set__(self, fix: Any, value: Any) -> None:
        self.slot.__set__(fix, value)

    def __delete__(self, fix: Any) -> None:
        self.slot.__delete__(fix)


Fix.text = _FixText(Fix.__dict__["text"])  # type: ignore[assignment, misc]


@dataclass(frozen=True, slots=True)
class Hazard:
    """Two conflicting accesses to bytes ``range`` of ``rank``'s ``buffer`` with no HB path between them.

    ``first`` is the op earlier in issue order (see ``analysis.hb``), which may have started after
    the other;
    ``kind`` is RAW, WAR or WAW from the two modes in that order, or use-after-free (when either op is
    a ``free``). ``manifest``: the second access started before the first ended in this run's timing
    (docs/semantics.md).
    """

    kind: str
    rank: int
    buffer: str
    range: tuple[int, int]
    first: int
    second: int
    first_mode: str
    second_mode: str
    manifest: bool
    fix: Fix | None = None


@dataclass(frozen=True, slots=True)
class Deadlock:
    """Agents blocked for good when the simulation stalled, and the wait-for cycle if there is one."""

    blocked: tuple[Blocked, ...]
    cycle: tuple[Agent, ...] | None = None


@dataclass(frozen=True, slots=True)
class Warning:  # noqa: A001 - the report's word; shadows the builtin only inside this module
    """A non-fatal finding: a handle never waited, an event waited but never recorded, ..."""

    kind: str
    message: str
    op: int | None = None


@dataclass(frozen=True, slots=True)
class Findings:
    """Everything the analyses found in one trace."""

    hazards: tuple[Hazard, ...] = ()
    deadlock: Deadlock | None = None
    warnings: tuple[Warning, ...] = ()
    root_causes: tuple = ()  # rootcause.RootCause records: the hazards grouped by code sites

    def __repr__(self) -> str:
        """``<Findings 4 root causes, 150 hazards (6 manifest), no deadlock, 0 warnings>``."""
        k, n = len(self.root_causes), len(self.hazards)
        m, w = sum(h.manifest for h in self.hazards), len(self.warnings)
        return (f"<Findings {k} root cause{'s' * (k != 1)}, {n} hazard{'s' * (n != 1)} "
                f"({m} manifest), {'deadlock' if self.deadlock else 'no deadlock'}, {w} "
                f"warning{'s' * (w != 1)}>")

    @property
    def featured(self) -> Hazard | None:
        """The hazard to show first: the first manifest one (it struck), else the first."""
        return next((h for h in self.hazards if h.manifest), self.hazards[0] if self.hazards else None)

    @property
    def clean(self) -> bool:
        """No hazard and no deadlock (warnings do not count)."""
        return not self.hazards and self.deadlock is None

    @property
    def verdict(self) -> str:
        """One word, worst first: ``manifest`` (a hazard struck in this run), ``deadlock``,
        ``latent`` (hazards, none struck) or ``clean`` (``compare`` and ``sweep`` say it)."""
        if any(h.manifest for h in self.hazards):
            return "manifest"
        if self.deadlock is not None:
            return "deadlock"
        return "latent" if self.hazards else "clean"


VERDICTS = ("manifest", "deadlock", "latent", "clean")  # Findings.verdict's words, worst first


def verdict_word(verdict: str) -> str:
    """A verdict as a table cell: in capitals unless ``clean``, so that a finding stands out."""
    return verdict if verdict == "clean" else verdict.upper()


# --- JSON form: plain dicts, lists, strings and numbers only ---------------------------------------

def op_json(op: Op) -> dict[str, Any]:
    """Describe an op for a report: who ran it, where it came from, when."""
    d: dict[str, Any] = {
        "id": op.id, "name": op.name, "kind": op.kind, "agent": str(op.agent), "rank": op.agent.rank,
        "step": op.step, "location": op.location, "start": op.start, "end": op.end,
    }
    if op.microbatch is not None:  # (a model's label: only when it gave one)
        d["microbatch"] = op.microbatch
    if op.line is not None:
        d["line"] = op.line
    return d


def _agent(a: Agent | None) -> str | None:
    return None if a is None else str(a)


def fix_json(fix: Fix, trace: Trace) -> dict[str, Any]:
    return {
        "kind": fix.kind, "text": fix.text, "before": op_json(trace.op(fix.before)),
        "handle_op": fix.handle_op, "record_after": fix.record_after,
        "event_stream": _agent(fix.event_stream), "wait_stream": _agent(fix.wait_stream),
    }


def hazard_json(h: Hazard, trace: Trace) -> dict[str, Any]:
    return {
        "kind": h.kind, "buffer": h.buffer, "rank": h.rank, "range": [h.range[0], h.range[1]],
        "first": op_json(trace.op(h.first)), "second": op_json(trace.op(h.second)),
        "first_mode": h.first_mode, "second_mode": h.second_mode, "manifest": h.manifest,
        "fix": None if h.fix is None else fix_json(h.fix, trace),
    }


def deadlock_json(d: Deadlock, trace: Trace) -> dict[str, Any]:
    return {
        "blocked": [{"agent": str(b.agent), "op": None if b.op is None else op_json(trace.op(b.op)),
                     "reason": b.reason, "waits_for": [str(a) for a in b.waits_for]}
                    for b in d.blocked],
        "cycle": None if d.cycle is None else [str(a) for a in d.cycle],
    }


def warning_json(w: Warning, trace: Trace) -> dict[str, Any]:
    return {"kind": w.kind, "message": w.message,
            "op": None if w.op is None else op_json(trace.op(w.op))}


def root_cause_json(rc, fix_cost=None) -> dict[str, Any]:
    """A root cause (``rootcause.RootCause``); ``instances`` index the report's ``hazards``."""
    return {
        "kind": rc.kind, "buffer": rc.buffer, "first_site": rc.first.to_json_dict(),
        "second_site": rc.second.to_json_dict(), "instances": list(rc.instances),
        "manifest": rc.manifest, "ranks": list(rc.ranks),
        "fix": None if rc.fix is None else {"kind": rc.fix_kind, "text": rc.fix},
        "no_fix": rc.no_fix or None,
        "fix_cost": None if fix_cost is None else fix_cost.to_json_dict(),
    }


def findings_json(f: Findings, trace: Trace, root_cause_costs=()) -> dict[str, Any]:
    costs = list(root_cause_costs) + [None] * (len(f.root_causes) - len(root_cause_costs))
    return {
        "root_causes": [root_cause_json(rc, c) for rc, c in zip(f.root_causes, costs)],
        "hazards": [hazard_json(h, trace) for h in f.hazards],
        "deadlock": None if f.deadlock is None else deadlock_json(f.deadlock, trace),
        "warnings": [warning_json(w, trace) for w in f.warnings],
    }


def to_json_dict(obj: Hazard | Fix | Deadlock | Warning | Findings | Op, trace: Trace) -> dict[str, Any]:
    """Plain-dict form of any finding record (ops are described with :func:`op_json`)."""
    for cls, fn in ((Findings, findings_json), (Hazard, hazard_json), (Fix, fix_json),
                    (Deadlock, deadlock_json), (Warning, warning_json)):
        if isinstance(obj, cls):
            return fn(obj, trace)  # type: ignore[arg-type]
    if isinstance(obj, Op):
        return op_json(obj)
    raise TypeError(f"no JSON form for {type(obj).__name__}")
