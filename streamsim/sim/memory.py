"""Buffers, views and access references as a model names them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union

from ..strided import normalize
from ..trace import READ, WRITE, Access, View


@dataclass(frozen=True, slots=True)
class Ref:
    """A view plus the window of the op's duration during which it is touched."""

    view: View
    window: tuple[float, float] = (0.0, 1.0)


class Buffer:
    """A storage of ``nbytes`` on one rank, allocated on ``stream`` (its allocation stream).

    The object is the tensor's identity: a model says "the same tensor" by holding it. ``label``
    is what the model called it; ``name`` is the storage's name in traces and reports: the label,
    or ``label#k`` when another live buffer of the rank already has that name (``host.buffer``
    gives each allocation a storage of its own, as PyTorch does)."""

    __slots__ = ("rank", "name", "nbytes", "stream", "label")

    def __init__(self, rank: int, name: str, nbytes: int, stream: str = "compute",
                 label: str | None = None):
        self.rank, self.name, self.nbytes, self.stream = rank, name, int(nbytes), stream
        self.label = name if label is None else label

    @property
    def whole(self) -> View:
        return View(self.rank, self.name, 0, self.nbytes)

    def view(self, offset: int, nbytes: int) -> View:
        """Bytes ``[offset, offset + nbytes)`` of this buffer (like a tensor slice)."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"view [{offset}:{offset + nbytes}] outside buffer {self.name!r} "
                             f"of {self.nbytes} bytes")
        return View(self.rank, self.name, offset, nbytes)

    def strided(self, offset: int, sizes: Iterable[int], strides: Iterable[int],
                itemsize: int = 1) -> View:
        """The strided view whose first byte is ``offset`` and whose elements of ``itemsize``
        bytes have these ``sizes`` and ``strides`` (in elements, as ``tensor.stride()``): only
        the bytes it touches conflict (``x[:, 0::2]`` and ``x[:, 1::2]`` do not), as in an op
        log's strided ref. A view whose bytes are its whole range is a plain one."""
        sizes, strides = list(sizes), list(strides)
        if len(sizes) != len(strides) or min(sizes + strides + [offset], default=0) < 0 \
                or itemsize < 1:
            raise ValueError(f"strided view of {self.name!r}: sizes {sizes} and strides {strides} "
                             "must be non-negative and as many, itemsize >= 1")
        off, n, pat = normalize(offset, sizes, strides, itemsize)
        if off + n > self.nbytes:
            raise ValueError(f"strided view [{off}:{off + n}] outside buffer {self.name!r} of "
                             f"{self.nbytes} bytes")
        return View(self.rank, self.name, off, n, pat)

    def __getitem__(self, s: slice) -> View:
        start = 0 if s.start is None else s.start
        stop = self.nbytes if s.stop is None else s.stop
        return self.view(start, stop - start)

    def during(self, start: float, end: float) -> Ref:
        """This buffer, touched only during fraction ``[start, end]`` of the op."""
        return during(self, start, end)

    def __repr__(self) -> str:
        return f"Buffer(rank{self.rank}:{self.name}, {self.nbytes} B)"


Tensor = Union[Buffer, View, Ref]


def during(target: Tensor, start: float, end: float) -> Ref:
    """``target`` accessed only during fraction ``[start, end]`` of the op's duration."""
    if not 0.0 <= start <= end <= 1.0:
        raise ValueError(f"access window [{start}, {end}] must satisfy 0 <= start <= end <= 1")
    return Ref(as_view(target), (float(start), float(end)))


def as_view(t: Tensor) -> View:
    if isinstance(t, Buffer):
        return t.whole
    if isinstance(t, View):
        return t
    if isinstance(t, Ref):
        return t.view
    raise TypeError(f"expected a Buffer, View or Ref, got {type(t).__name__}")


def accesses(reads: Iterable[Tensor] = (), writes: Iterable[Tensor] = ()) -> tuple[Access, ...]:
    """Turn a model's ``reads=``/``writes=`` lists into trace accesses."""
    out = []
    for mode, items in ((READ, reads), (WRITE, writes)):
        for t in items:
            if isinstance(t, Ref):
                out.append(Access(t.view, mode, t.window))
            else:
                out.append(Access(as_view(t), mode))
    return tuple(out)


def nbytes_of(tensors: Iterable[Tensor]) -> int:
    """The bytes ``tensors`` hold (a strided view: the bytes it touches, not its range)."""
    return sum(v.nbytes if v.pattern is None else v.pattern.touched
               for v in map(as_view, tensors))


def new_storage(rank: int, label: str, live: set, held: set, labels: dict) -> str:
    """The storage name of a new buffer ``label`` on ``rank``, entered in ``live`` (and in
    ``labels``, storage -> label, when they differ): the label, or ``label#k`` (k = 2, 3, ...)
    when a storage of that name is ``live`` (allocated, not freed: another tensor) or ``held``
    (freed after ``record_stream``: its block is not handed out at once)."""
    storage, k = label, 1
    while (rank, storage) in live or (rank, storage) in held:
        k += 1
        storage = f"{label}#{k}"
    live.add((rank, storage))
    if storage != label:
        labels[(rank, storage)] = label
    return storage


def labels_of(labels: dict, tensors: Iterable[Tensor]) -> str:
    """What the model called ``tensors`` (``labels``: (rank, storage) -> label where they differ),
    for an op's default name."""
    views = [as_view(t) for t in tensors]
    return ", ".join(labels.get((v.rank, v.buffer), v.buffer) for v in views)
