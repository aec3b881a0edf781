"""Every public name of ``streamsim`` says what it is: the API reference (``make docs``, pdoc) is
made from these docstrings, so a name without one would be a bare signature there."""
from __future__ import annotations

import dataclasses
import inspect

import streamsim


def _own_doc(obj) -> str:
    """The docstring ``obj`` itself carries: a class's own (not inherited, not the signature a
    dataclass writes when it has none), a function's."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__") or ""
        if dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("):
            return ""  # generated from the fields
        return doc.strip()
    return (getattr(obj, "__doc__", None) or "").strip()


def test_every_public_name_has_a_docstring():
    missing = [name for name in streamsim.__all__ if len(_own_doc(getattr(streamsim, name))) < 20]
    assert not missing, f"public names without a docstring: {missing}"


def test_the_package_docstring_lists_every_public_name():
    """The package docstring is the reference's first page: it names each export."""
    doc = streamsim.__doc__
    absent = [n for n in streamsim.__all__ if n not in doc]
    assert not absent, absent
