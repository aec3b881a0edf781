"""What an aten op reads and writes: CSAN's schema rule, on CPU tensors too, and byte ranges.

The rule is ``ArgumentHandler``'s in ``torch/cuda/_sanitizer.py``: an argument whose schema alias
annotation says ``is_write`` (``Tensor(a!)``) is written, every other tensor argument is read,
except views (an alias annotation without ``!``: only metadata is used) and the arguments of a
factory function (``new_*``, ``*_like``); a returned tensor that is not a view is written. CSAN
filters on ``is_cuda``; the recorder does not, so the rule works for the CPU tensors of a gloo
program alike.

One correction of the rule: an in-place op writes ``self`` and, unless it overwrites it whole,
reads it too (``add_`` computes ``self + other``); the schema does not say so, and without the read
a write after a receive shows as WAW where the truth is RAW. :data:`OVERWRITES` lists the
in-place ops that do not read ``self``; every other in-place ``self`` is read and written.

A tensor is a byte range of its untyped storage, from its storage offset to the end of the last
element its strides reach (:func:`byte_range`); a view that touches only some bytes of that range
(``x[:, 0::2]``) is a strided ref of the op log as well (:func:`strided_fields`), so that it does
not conflict with the bytes it skips. A contiguous view, and one whose bytes fill its range (a
transposed tensor), stays a plain range: recordings of them are what they always were.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from ..strided import normalize

FACTORY = re.compile(r"(new_.*|.*_like)")  # CSAN's FACTORY_FUNCTION_REGEX
# In-place ops that write all of ``self`` without reading it (aten base names).
OVERWRITES = frozenset({
    "fill_", "zero_", "copy_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_",
    "geometric_", "cauchy_", "log_normal_", "set_", "resize_", "resize_as_", "index_fill_",
    "masked_fill_", "_index_put_impl_", "index_put_", "scatter_", "put_", "index_copy_",
    "masked_scatter_", "detach_", "as_strided_", "_copy_from", "_copy_from_and_resize",
})
# (index_put_, scatter_, ... write part of self: unwritten bytes keep their value, but the op
# does not compute the new bytes from the old ones, so no read is recorded.)


_TENSOR: Any = None  # torch.Tensor, once torch is imported (this module imports without it)


def tensors_in(value: Any) -> Iterator[Any]:
    """The tensors in an argument value: a tensor, or lists/tuples of them (``Tensor?[]``)."""
    global _TENSOR
    if _TENSOR is None:
        import torch
        _TENSOR = torch.Tensor
    if isinstance(value, _TENSOR):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)


def op_name(func: Any) -> str:
    """``add_`` for ``aten.add_.Tensor``: the op's base name (its schema name after ``::``)."""
    return func._schema.name.split("::", 1)[-1]


_READ, _WRITE, _BOTH = 1, 2, 3
_plans: dict[Any, tuple] = {}  # op overload -> its arguments' roles, returns' roles


def _plan(func: Any) -> tuple:
    """What the rule says of each argument and return of ``func`` (worked out once per op):
    ``((index, name, role), ...)`` for the tensor-carrying arguments and the indices of the
    returns that are no view (None for a factory: its outputs are metadata only)."""
    schema = func._schema
    name = schema.name.split("::", 1)[-1]
    factory = FACTORY.fullmatch(name) is not None
    args = []
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is not None and info.is_write:
            both = arg.name == "self" and name.endswith("_") and name not in OVERWRITES
            args.append((i, arg.name, _BOTH if both else _WRITE))
        elif not factory and info is None:
            args.append((i, arg.name, _READ))
    rets = None if factory else tuple(k for k, r in enumerate(schema.returns)
                                      if r.alias_info is None)
    plan = _plans[func] = (tuple(args), rets, len(schema.returns))
    return plan


def split_access(func: Any, args: tuple, kwargs: dict, outputs: Any) -> tuple[list, list, list]:
    """``(read, written, made)`` tensors of one aten call (the module docstring's rule): each
    tensor once, a tensor both read and written in both lists; ``made``: the returned tensors
    that are no view (the op allocated them, unless an ``out=`` argument was returned)."""
    plan = _plans.get(func) or _plan(func)
    roles, rets, nret = plan
    reads: list = []
    writes: list = []
    made: list = []
    n = len(args)
    for i, name, role in roles:
        if i < n:
            value = args[i]
        elif name in kwargs:
            value = kwargs[name]
        else:
            continue
        if role & _WRITE:
            ts = list(tensors_in(value))
            writes += ts
            if role == _BOTH:
                reads += ts
        else:
            reads += tensors_in(value)
    if rets:
        outs = outputs if nret > 1 else (outputs,)
        for k in rets:
            made += tensors_in(outs[k])
        writes += made
    return _unique(reads), _unique(writes), made


def _unique(ts: list) -> list:
    seen: set[int] = set()
    out = []
    for t in ts:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def strided_fields(t: Any) -> dict[str, Any] | None:
    """The op-log strided ref fields of tensor ``t`` (``sizes``, ``strides`` in elements,
    ``itemsize``), or None when its bytes are its whole :func:`byte_range` (contiguous, transposed,
    or no element)."""
    if t.numel() == 0 or t.is_contiguous():
        return None
    sizes, strides, item = list(t.shape), list(t.stride()), t.element_size()
    if normalize(0, sizes, strides, item)[2] is None:
        return None
    return {"sizes": sizes, "strides": strides, "itemsize": item}


def byte_range(t: Any) -> tuple[int, int] | None:
    """``(offset, nbytes)`` of tensor ``t`` in its untyped storage: the hull from its first to
    its last element, or None for a tensor of no element (it touches no memory)."""
    n = t.numel()
    if n == 0:
        return None
    item = t.element_size()
    if t.is_contiguous():
        span = n
    else:
        span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    return t.storage_offset() * item, span * item
