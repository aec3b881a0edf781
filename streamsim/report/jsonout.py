"""The report's JSON output, by format version: 4 (the default) or 3 (kept for one release).

``streamsim run|check --format json``, ``--out``'s ``report.json`` and :func:`dumps_json` write
version 4 (:mod:`.jsonv4`: each op listed once, findings naming ops by id); ``--json-version 3``
and ``dumps_json(r, version=3)`` write version 3 (:func:`.report.report_json`) byte for byte as
before. docs/cli.md documents both and the change between them.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from .jsonv4 import JSON_V4, json_v4_chunks
from .report import Report, dumps_json_v3

# What --format json writes unless told. 2: root_causes added (instances index hazards); 3: a site
# is {label, location}; 4: each op the findings name listed once in ops, findings name ops by id.
JSON_VERSION = JSON_V4
JSON_VERSIONS = (3, JSON_V4)  # what --json-version accepts


def json_chunks(r: Report, version: int = JSON_VERSION) -> Iterator[str]:
    """The JSON text of ``r`` in the given format version, in pieces (version 4 a table block at
    a time; version 3 whole). Another version is a ValueError."""
    if version == JSON_V4:
        return json_v4_chunks(r)
    if version == 3:
        return iter((dumps_json_v3(r),))
    raise ValueError(f"JSON version {version!r}: streamsim writes {' or '.join(map(str, JSON_VERSIONS))}")


def dumps_json(r: Report, version: int = JSON_VERSION) -> str:
    """The report's stable JSON form as text (docs/cli.md), in format version ``version``: the
    same report gives the same bytes."""
    return "".join(json_chunks(r, version))


def write_json(r: Report, out: TextIO, version: int = JSON_VERSION) -> None:
    """Write :func:`dumps_json`'s text to ``out`` as it is made (a large report is never held
    whole as text)."""
    for chunk in json_chunks(r, version):
        out.write(chunk)
