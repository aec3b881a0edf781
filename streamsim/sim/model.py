"""Model files: typed parameters, named variants, and a ``build(sim, params, variant)`` function.

A model is a Python file::

    from streamsim import Param
    PARAMS = [Param("steps", int, 3, "scheduler steps")]
    VARIANTS = {"racy": "no wait before the next forward", "fixed": "wait the send handle"}
    def build(sim, p, variant): ...

Loading and parameter errors raise :class:`ModelError` with one line naming the file, line or field.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .errors import ModelError

_TYPES = {int: "int", float: "float", str: "str", bool: "bool"}


@dataclass(frozen=True)
class Param:
    """A model parameter: ``--set name=value`` on the command line."""

    name: str
    type: type
    default: Any
    help: str = ""
    choices: tuple = ()

    def parse(self, text: str) -> Any:
        """Parse a parameter's text value (``--set``), or raise ModelError naming the field."""
        try:
            if self.type is bool:
                low = text.strip().lower()
                if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                value: Any = low in ("1", "true", "yes", "on")
            else:
                value = self.type(text)
                if self.type is float and not math.isfinite(value):
                    raise ValueError
        except ValueError:
            raise ModelError(f"{self.name}={text}: expected "
                             f"{'a finite float' if self.type is float else _TYPES.get(self.type, self.type)}",
                             arguments=("params",))
        return self.check(value)

    def check(self, value: Any) -> Any:
        if self.choices and value not in self.choices:
            raise ModelError(f"{self.name}={value}: must be one of "
                             f"{', '.join(map(str, self.choices))}", arguments=("params",))
        return value


class Params(dict):
    """Parameter values with attribute access (``p.pp``), as a model's ``build`` receives them."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no parameter {name!r}") from None


@dataclass
class Model:
    """A loaded model file."""

    path: str
    name: str
    params: dict[str, Param]
    variants: dict[str, str]
    build: Callable
    doc: str = ""
    module: Any = field(default=None, repr=False)

    @property
    def default_variant(self) -> str:
        return next(iter(self.variants))

    def resolve(self, sets: Iterable[str] | Mapping[str, Any] = ()) -> Params:
        """Defaults overridden by ``--set k=v`` strings (or a mapping of typed values)."""
        values = Params({p.name: p.default for p in self.params.values()})
        items = sets.items() if isinstance(sets, Mapping) else [split_set(s) for s in sets]
        for key, value in items:
            param = self.params.get(key)
            if param is None:
                raise ModelError(f"{self.path}: unknown parameter {key!r} (known: "
                                 f"{', '.join(self.params)})")
            values[key] = param.parse(value) if isinstance(value, str) else param.check(value)
        return values

    def check_variant(self, variant: str | None) -> str:
        if variant is None:
            return self.default_variant
        if variant not in self.variants:
            raise ModelError(f"{self.path}: unknown variant {variant!r} (known: "
                             f"{', '.join(self.variants)})")
        return variant


def split_set(text: str) -> tuple[str, str]:
    """``--set key=value`` as ``(key, value)``, both stripped; a one-line error without ``=``."""
    if "=" not in text:
        raise ModelError(f"{text}: expected key=value", arguments=("params",))
    key, value = text.split("=", 1)
    return key.strip(), value.strip()


MODEL_SUFFIX = ".py"


def is_model_path(path: str) -> bool:
    """Whether ``path`` names a model file: a Python file, ending in ``.py`` (any case). The one
    rule for every command and call that takes a model or an op log: only such files are ever
    executed; anything else is read as an op log (JSON, never run)."""
    return path.lower().endswith(MODEL_SUFFIX)


def load_model(path: str) -> Model:
    """Import a model file (Python, executed with the caller's rights: only a ``.py`` file, see
    :func:`is_model_path`); any failure is one ModelError line naming the file and line."""
    if not is_model_path(path):
        raise ModelError(f"{path}: not a model file: only .py files are run as models (a model "
                         "is Python, executed with your rights)")
    if not os.path.isfile(path):
        raise ModelError(f"{path}: no such model file")
    name = "streamsim_model_" + os.path.splitext(os.path.basename(path))[0]
    # an explicit loader: ``Model.PY`` too (spec_from_file_location knows only ".py")
    spec = importlib.util.spec_from_file_location(
        name, path, loader=importlib.machinery.SourceFileLoader(name, path))
    module = importlib.util.module_from_spec(spec)
    try:
        with open(path, encoding="utf-8") as f:
            code = compile(f.read(), path, "exec")
    except SyntaxError as e:
        raise ModelError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except (UnicodeDecodeError, OSError) as e:
        raise ModelError(f"{path}: cannot read: {e}") from None
    sys.modules[name] = module
    from .guard import model_failure, model_output  # (what guards a model's code: loaded with one)
    from .wallclock import wall_bound
    try:
        with wall_bound(label=path), model_output():
            exec(code, module.__dict__)
    except BaseException as e:  # any failure of the model's code: one line naming its line
        raise model_failure(e, path, loading=True) from None
    build = getattr(module, "build", None)
    if not callable(build):
        raise ModelError(f"{path}: a model must define build(sim, params, variant)")
    params = getattr(module, "PARAMS", [])
    if not isinstance(params, (list, tuple)) or not all(isinstance(p, Param) for p in params):
        raise ModelError(f"{path}: PARAMS must be a list of streamsim.Param")
    seen: set[str] = set()
    for p in params:
        if p.type not in _TYPES:
            raise ModelError(f"{path}: parameter {p.name!r}: type must be int, float, str or bool, "
                             f"not {getattr(p.type, '__name__', p.type)}")
        if p.name in seen:
            raise ModelError(f"{path}: parameter {p.name!r} is declared twice")
        seen.add(p.name)
    variants = getattr(module, "VARIANTS", {}) or {"default": "the only variant"}
    if not isinstance(variants, Mapping) or not all(isinstance(k, str) for k in variants):
        raise ModelError(f"{path}: VARIANTS must be a dict of variant name -> description")
    variants = {k: str(v) for k, v in variants.items()}
    return Model(path=path, name=os.path.splitext(os.path.basename(path))[0],
                 params={p.name: p for p in params}, variants=variants, build=build,
                 doc=(module.__doc__ or "").strip(), module=module)
