"""Strided views: the exact byte set of a non-contiguous tensor view, and whether two share a byte.

A plain view is a byte range. A strided view (``x[:, 0::2]`` of a row-major ``x``) touches only
some bytes of its range: the blocks of ``run`` bytes that start at ``offset + sum(i_k * s_k)`` for
``0 <= i_k < n_k`` (``dims``: the pairs ``(n_k, s_k)``, strides in bytes). Its *hull* (from its
first byte to its last) is what a byte range would say, and two hulls may overlap where the views
share no byte: ``x[:, 0::2]`` and ``x[:, 1::2]`` do not conflict, their hulls do (a false hazard).

:func:`normalize` turns PyTorch's description (sizes, strides in elements, an item size) into a
canonical :class:`Strided` (dims that repeat bytes or abut are folded away), or None when the
view's bytes are its whole hull (a contiguous or transposed tensor: then a byte range is exact).
:func:`overlap` answers "do these two views share a byte?" exactly, from the dims alone, never by
enumerating bytes: the two views meet iff some difference of their block starts lies in
``(-run_a, run_b)``, and those differences are one more strided set (the Minkowski sum of the first
view's starts and the second's negated), which :func:`hits` searches with interval bounds and a gcd
test. The common cases cost a few operations: a plain range against anything (one search on one
side's dims), two views with the same strides and different offsets (dims merge: one dim a stride),
1-D strided views (arithmetic). The search is branch and bound; it is exact within
:data:`BUDGET` steps and, past them, answers True (the views are taken to overlap: a hazard may
then be reported where no byte is shared, never missed). Views made by slicing, transposing and
narrowing a tensor stay far below the budget (``tests/test_strided.py`` checks it).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

BUDGET = 4096  # search steps for one question before it answers True (conservative)


@dataclass(frozen=True, slots=True)
class Strided:
    """The byte set of a strided view, relative to its offset: blocks of ``run`` bytes starting at
    ``sum(i_k * s_k)`` for ``0 <= i_k < n_k``, ``dims`` the pairs ``(n_k, s_k)`` (every ``n_k >= 2``,
    strides in bytes, descending, none of them folded into ``run``)."""

    dims: tuple[tuple[int, int], ...]
    run: int

    @property
    def span(self) -> int:
        """The hull's length in bytes: from the first byte to one past the last."""
        return sum((n - 1) * s for n, s in self.dims) + self.run

    @property
    def touched(self) -> int:
        """How many bytes the view touches, at most (blocks counted once each; a pattern whose
        blocks overlap counts shared bytes more than once)."""
        count = self.run
        for n, _ in self.dims:
            count *= n
        return min(count, self.span)

    def text(self) -> str:
        """``sizes x strides + run``, e.g. ``4x32,4x8+4`` (a report's short form)."""
        return ",".join(f"{n}x{s}" for n, s in self.dims) + f"+{self.run}"


def _merge(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Dims of one point set, canonical: sorted by stride (descending), equal strides joined
    (``{i s} + {j s}`` is ``{k s}``, ``k < n1 + n2 - 1``), a dim whose stride is the whole extent
    of the next one joined with it (``{i * n2 s + j s}`` is ``{k s}``, ``k < n1 n2``)."""
    dims = sorted((d for d in dims if d[0] > 1 and d[1] > 0), key=lambda d: -d[1])
    changed = True
    while changed:
        changed = False
        out: list[tuple[int, int]] = []
        for n, s in dims:
            if out and out[-1][1] == s:
                out[-1] = (out[-1][0] + n - 1, s)
                changed = True
            elif out and out[-1][1] == n * s:
                out[-1] = (out[-1][0] * n, s)
                changed = True
            else:
                out.append((n, s))
        dims = out
    return dims


def normalize(offset: int, sizes: list[int] | tuple[int, ...],
              strides: list[int] | tuple[int, ...], itemsize: int
              ) -> tuple[int, int, Strided | None]:
    """``(offset, nbytes, pattern)`` of the view with these ``sizes`` and ``strides`` (elements,
    non-negative) of ``itemsize`` bytes, its first byte at ``offset``: the hull's offset and length,
    and its :class:`Strided` pattern, or None when its bytes are the whole hull (or it has none:
    nbytes 0)."""
    if any(n == 0 for n in sizes):
        return offset, 0, None
    dims = _merge([(n, s * itemsize) for n, s in zip(sizes, strides)])
    run = itemsize
    while dims and dims[-1][1] <= run:  # blocks that abut or overlap: one longer block
        n, s = dims.pop()
        run += (n - 1) * s
        dims = _merge(dims)
    if not dims:
        return offset, run, None
    pat = Strided(tuple(dims), run)
    return offset, pat.span, pat


@lru_cache(maxsize=4096)
def extent(sizes: tuple[int, ...], strides: tuple[int, ...], itemsize: int
           ) -> tuple[int, Strided | None]:
    """``normalize(offset, sizes, strides, itemsize)[1:]``, which does not depend on the
    offset: the hull's length and the pattern, remembered by shape (a log's strided refs repeat a
    few shapes at many offsets: a tensor split the same way every step). One pattern object
    serves every view of a shape."""
    return normalize(0, sizes, strides, itemsize)[1:]


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def hits(dims: tuple[tuple[int, int], ...], off: int, lo: int, hi: int) -> bool:
    """Is some point ``off + sum(i_k * s_k)`` (``dims`` as in :class:`Strided`, sorted by stride,
    descending) in ``[lo, hi)``? Exact within :data:`BUDGET` steps, else True."""
    budget = [BUDGET]
    exts = [0] * (len(dims) + 1)  # exts[k]: the extent of dims[k:]
    gcds = [0] * (len(dims) + 1)
    for k in range(len(dims) - 1, -1, -1):
        n, s = dims[k]
        exts[k] = exts[k + 1] + (n - 1) * s
        gcds[k] = gcd(gcds[k + 1], s)
    try:
        return _hits(dims, exts, gcds, 0, off, lo, hi, budget)
    except _OverBudget:
        return True


class _OverBudget(Exception):
    pass


def _hits(dims, exts, gcds, k, off, lo, hi, budget) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        raise _OverBudget
    ext = exts[k]
    if off >= hi or off + ext < lo or lo >= hi:
        return False
    if lo <= off and off + ext < hi:
        return True  # the whole (non-empty) sub-pattern is inside
    if k == len(dims):
        return lo <= off < hi
    g = gcds[k]
    if lo + (off - lo) % g >= hi:  # every point is off mod g: none of them in [lo, hi)
        return False
    n, s = dims[k]
    inner = exts[k + 1]
    first = max(0, _ceil_div(lo - off - inner, s))  # outer indices whose sub-pattern meets it
    last = min(n - 1, (hi - 1 - off) // s)
    if first > last:
        return False
    if k == len(dims) - 1:  # 1-D: the first point at or after lo
        i = max(first, _ceil_div(lo - off, s))
        return i <= last and off + i * s < hi
    full_lo = max(first, _ceil_div(lo - off, s))  # indices whose whole sub-pattern is inside
    full_hi = min(last, (hi - 1 - inner - off) // s)
    if full_lo <= full_hi:
        return True
    for i in range(first, last + 1):
        if _hits(dims, exts, gcds, k + 1, off + i * s, lo, hi, budget):
            return True
    return False


@lru_cache(maxsize=65536)
def _hits_from(dims: tuple[tuple[int, int], ...], lo: int, hi: int) -> bool:
    """``hits(dims, 0, lo, hi)``, remembered: :func:`hits` compares only differences of its
    points and bounds (``off`` against ``lo`` and ``hi``, ``(off - lo) % g``), so moving ``off``,
    ``lo`` and ``hi`` together gives the same answer, and one answer serves every view of a
    pattern at the same place in a segment (the happens-before pass asks it for each strided
    access of each segment: a tensor split the same way every step asks the same questions)."""
    return hits(dims, 0, lo, hi)


def block_hits(pat: Strided | None, offset: int, nbytes: int, lo: int, hi: int) -> bool:
    """Does the view (``pat`` None: the plain range ``[offset, offset + nbytes)``) touch a byte of
    ``[lo, hi)``?"""
    if pat is None:
        return offset < hi and lo < offset + nbytes and nbytes > 0 and lo < hi
    return lo < hi and _hits_from(pat.dims, lo - pat.run + 1 - offset, hi - offset)


def covers(pat: Strided | None, offset: int, nbytes: int, lo: int, hi: int) -> bool:
    """Does the view touch every byte of ``[lo, hi)`` (``lo < hi``)? Exact for a plain range; for a
    strided view, True when one block holds the whole interval (a pattern whose blocks abut
    across dims may cover more than this says: callers use it only to forget what is covered)."""
    if pat is None:
        return offset <= lo and hi <= offset + nbytes
    if hi - lo > pat.run:
        return False
    return _hits_from(pat.dims, hi - pat.run - offset, lo + 1 - offset)


def overlap(a_off: int, a_n: int, a: Strided | None, b_off: int, b_n: int,
            b: Strided | None) -> bool:
    """Do the views ``(a_off, a_n, a)`` and ``(b_off, b_n, b)`` (offset, hull length, pattern or
    None for a plain range) of one storage share a byte? Exact within :data:`BUDGET`."""
    if not (a_off < b_off + b_n and b_off < a_off + a_n) or a_n <= 0 or b_n <= 0:
        return False
    if a is None and b is None:
        return True
    if a is None:
        return block_hits(b, b_off, b_n, a_off, a_off + a_n)
    if b is None:
        return block_hits(a, a_off, a_n, b_off, b_off + b_n)
    return _overlap(a_off - b_off, a, b)


@lru_cache(maxsize=4096)
def _overlap(d: int, a: Strided, b: Strided) -> bool:
    """Two strided views whose offsets differ by ``d`` (a's minus b's): they share a byte iff
    ``sa - sb`` is in ``(-a.run, b.run)`` for some block starts sa of a and sb of b; those
    differences are d + a's starts + b's starts negated, one more strided point set."""
    shift = d - sum((n - 1) * s for n, s in b.dims)
    dims = tuple(_merge(list(a.dims) + list(b.dims)))
    return hits(dims, shift, 1 - a.run, b.run)
