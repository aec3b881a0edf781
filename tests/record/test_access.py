"""The schema access rule on CPU (CSAN's ``ArgumentHandler`` cases, its ``is_cuda`` filter
dropped) with the recorder's in-place read table, and byte ranges of views."""
from __future__ import annotations

import pytest

from streamsim.record.access import byte_range, split_access, strided_fields

from .conftest import need_torch


def accesses(fn, **named):
    """``[(op, reads, writes)]`` of the aten ops ``fn(**named)`` runs, each tensor shown by the
    name of the argument whose storage it is (``out`` for one the op made)."""
    torch = need_torch()
    from torch.utils._python_dispatch import TorchDispatchMode
    names = {t.untyped_storage()._cdata: k for k, t in named.items()}
    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            r, w, made = split_access(func, args, kwargs, out)

            def show(ts):
                return sorted(names.get(t.untyped_storage()._cdata, "out") for t in ts)
            seen.append((func._schema.name.split("::")[1], show(r), show(w)))
            return out
    with Spy():
        fn(**named)
    return seen


def T(*shape):
    return need_torch().ones(*shape)


@pytest.mark.parametrize("fn, named, expected", [
    (lambda a, b: a + b, dict(a=T(4), b=T(4)), [("add", ["a", "b"], ["out"])]),
    (lambda a, b: a.add_(b), dict(a=T(4), b=T(4)), [("add_", ["a", "b"], ["a"])]),  # reads self
    (lambda a, b: a.mul_(b), dict(a=T(4), b=T(4)), [("mul_", ["a", "b"], ["a"])]),
    (lambda a: a.fill_(2.0), dict(a=T(4)), [("fill_", [], ["a"])]),  # overwrites: no read
    (lambda a: a.zero_(), dict(a=T(4)), [("zero_", [], ["a"])]),
    (lambda a, b: a.copy_(b), dict(a=T(4), b=T(4)), [("copy_", ["b"], ["a"])]),
    (lambda a, b, c: need_torch().add(a, b, out=c), dict(a=T(4), b=T(4), c=T(4)),
     [("add", ["a", "b"], ["c"])]),  # out= is written, not read
    (lambda a, b: need_torch().cat([a, b]), dict(a=T(4), b=T(4)), [("cat", ["a", "b"], ["out"])]),
    (lambda a: a.view(2, 2), dict(a=T(4)), [("view", [], [])]),  # a view: metadata only
    (lambda a: a.t(), dict(a=T(2, 2)), [("t", [], [])]),
    (lambda a: a.split(2), dict(a=T(4)), [("split", [], [])]),
    (lambda a: a[1:3], dict(a=T(4)), [("slice", [], [])]),
    (lambda a, b: a @ b, dict(a=T(2, 2), b=T(2, 2)), [("mm", ["a", "b"], ["out"])]),
    (lambda a: a.sum(), dict(a=T(4)), [("sum", ["a"], ["out"])]),
    (lambda a: a.clone(), dict(a=T(4)), [("clone", ["a"], ["out"])]),
    (lambda a: need_torch().zeros_like(a), dict(a=T(4)), [("zeros_like", [], [])]),  # factory
    (lambda a: a.new_zeros(4), dict(a=T(4)), [("new_zeros", [], [])]),
    (lambda a, b: need_torch().where(a > 0, a, b), dict(a=T(4), b=T(4)),
     [("gt", ["a"], ["out"]), ("where", ["a", "b", "out"], ["out"])]),
    (lambda a, i, v: a.index_put_((i,), v), dict(a=T(4), i=need_torch().tensor([1]), v=T(1)),
     [("index_put_", ["i", "v"], ["a"])]),
    (lambda a: a.relu_(), dict(a=T(4)), [("relu_", ["a"], ["a"])]),
    (lambda a, b: a.addcmul_(b, b), dict(a=T(4), b=T(4)), [("addcmul_", ["a", "b"], ["a"])]),
])
def test_reads_and_writes_of_aten_ops(fn, named, expected):
    assert accesses(fn, **named) == expected


def test_a_strided_view_is_the_byte_hull_of_its_elements():
    torch = need_torch()
    x = torch.zeros(4, 6)  # float32: 24 bytes a row
    assert byte_range(x) == (0, 96)
    assert byte_range(x[1]) == (24, 24)
    assert byte_range(x[:, 0::2]) == (0, 4 * (1 + 3 * 6 + 2 * 2))  # first to last element
    assert byte_range(x[:, 1::2]) == (4, 4 * (1 + 3 * 6 + 2 * 2))
    assert byte_range(x[2:2]) is None  # no element: no memory touched


def test_views_with_gaps_are_strided_refs_and_dense_ones_are_not():
    """strided_fields: sizes and strides (elements) and the item size of a view that skips bytes
    of its range; None for a view whose bytes fill it (contiguous, transposed, expanded)."""
    torch = need_torch()
    x = torch.zeros(4, 6)
    assert strided_fields(x[:, 1::2]) == {"sizes": [4, 3], "strides": [6, 2], "itemsize": 4}
    assert strided_fields(x[::2]) == {"sizes": [2, 6], "strides": [12, 1], "itemsize": 4}
    assert strided_fields(x) is None and strided_fields(x[1]) is None
    assert strided_fields(x.t()) is None  # every byte of its range, in another order
    assert strided_fields(torch.zeros(1, 6).expand(3, 6)) is None  # one row, read thrice
    assert strided_fields(x[2:2]) is None
