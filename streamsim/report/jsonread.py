"""Reading a version-4 JSON report: an op by its id, and the version-3 object it holds.

A version-4 report (:mod:`.jsonv4`) names ops by id; ``ops.rows[str(id)]`` is the op's row, in
the order of ``ops.columns``. :func:`op_of` gives it as version 3 described an op, and
:func:`as_v3` the whole version-3 object: what ``--json-version 3`` prints for the same run (the
test of the format holds the two equal, so that version 4 loses nothing version 3 said).
"""
from __future__ import annotations

from typing import Any

OPTIONAL = ("microbatch", "line")  # version 3 leaves these out of an op where they are null


def op_of(report: dict[str, Any], op_id: int | None) -> dict[str, Any] | None:
    """The op ``op_id`` of a version-4 report as version 3 describes it (``{id, name, kind,
    agent, rank, step, location, start, end}``, plus ``microbatch``/``line`` where set);
    ``None`` for ``None``. A KeyError for an id the report does not list."""
    if op_id is None:
        return None
    ops = report["ops"]
    d: dict[str, Any] = {"id": op_id}
    for column, value in zip(ops["columns"], ops["rows"][str(op_id)]):
        if value is not None or column not in OPTIONAL:
            d[column] = value
    return d


def as_v3(report: dict[str, Any]) -> dict[str, Any]:
    """The version-3 object of a version-4 report (``json.loads`` of its text): every op id
    replaced by the op described, ``ops`` dropped, ``streamsim_json`` 3. Version 3 gives a fix's
    ``handle_op`` and ``record_after`` as ids: they stay ids. A version-3 report is returned as
    it is (a reader of both versions can pass either); another version is a ValueError."""
    version = report.get("streamsim_json")
    if version == 3:
        return report
    if version != 4:
        raise ValueError(f"streamsim_json {version!r}: as_v3 reads versions 4 and 3")
    def fix(f: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if f is None else {**f, "before": op_of(report, f["before"])}

    out: dict[str, Any] = {}
    for key, value in report.items():
        if key == "ops":
            continue
        if key == "streamsim_json":
            value = 3
        elif key == "hazards":
            value = [{**h, "first": op_of(report, h["first"]),
                      "second": op_of(report, h["second"]), "fix": fix(h["fix"])} for h in value]
        elif key == "warnings":
            value = [{**w, "op": op_of(report, w["op"])} for w in value]
        elif key == "deadlock" and value is not None:
            value = {**value, "blocked": [{**b, "op": op_of(report, b["op"])}
                                          for b in value["blocked"]]}
        out[key] = value
    return out
