"""Strided views (streamsim/strided.py): the byte set a pattern stands for, and the exact overlap
test, against a brute-force reference that enumerates the bytes of each view."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from streamsim import strided
from streamsim.strided import block_hits, covers, normalize, overlap


def bytes_of(offset: int, sizes, strides, itemsize: int) -> set[int]:
    """The reference: every byte the view touches, element by element."""
    out: set[int] = set()
    for idx in itertools.product(*(range(n) for n in sizes)):
        start = offset + itemsize * sum(i * s for i, s in zip(idx, strides))
        out.update(range(start, start + itemsize))
    return out


def pattern_bytes(offset: int, nbytes: int, pat) -> set[int]:
    """The bytes a normalized (offset, nbytes, pattern) stands for."""
    if pat is None:
        return set(range(offset, offset + nbytes))
    sizes = [n for n, _ in pat.dims]
    return {offset + sum(i * s for i, (_, s) in zip(idx, pat.dims)) + b
            for idx in itertools.product(*(range(n) for n in sizes)) for b in range(pat.run)}


views = st.tuples(
    st.integers(0, 12),  # offset in bytes
    st.lists(st.integers(0, 4), min_size=1, max_size=3),  # sizes
    st.lists(st.integers(0, 7), min_size=3, max_size=3),  # strides (elements; zip cuts)
    st.integers(1, 4))  # itemsize


def _norm(v):
    off, sizes, strides, item = v
    return normalize(off, sizes, strides[:len(sizes)], item)


@settings(max_examples=2000, deadline=None)
@given(views)
def test_normalize_keeps_the_bytes(v):
    """The canonical pattern (dims folded, merged, dropped) touches exactly the view's bytes, and
    its hull is from the first byte to one past the last; a dense view has no pattern."""
    off, sizes, strides, item = v
    ref = bytes_of(off, sizes, strides[:len(sizes)], item)
    o, n, pat = _norm(v)
    assert pattern_bytes(o, n, pat) == ref
    if ref:
        assert (o, o + n) == (min(ref), max(ref) + 1)
        assert (pat is None) == (len(ref) == n)
    else:
        assert n == 0


@settings(max_examples=3000, deadline=None)
@given(views, views)
def test_overlap_is_exact(v, w):
    """Property: ``overlap`` says True iff the two views share a byte (brute force). The hull rule
    (byte ranges from first to last byte) fails it: ``x[:, 0::2]`` against ``x[:, 1::2]``."""
    a, b = _norm(v), _norm(w)
    ref = bool(bytes_of(v[0], v[1], v[2][:len(v[1])], v[3])
               & bytes_of(w[0], w[1], w[2][:len(w[1])], w[3]))
    assert overlap(*a, *b) == ref
    assert overlap(*b, *a) == ref


@settings(max_examples=3000, deadline=None)
@given(views, st.integers(-6, 40), st.integers(0, 24), st.integers(1, 10**6))
def test_block_hits_and_covers_are_right_wherever_the_view_sits(v, lo, width, shift):
    """Property: ``block_hits`` says whether the view touches a byte of ``[lo, hi)`` (brute
    force), and ``covers``, when it says True, that it touches every one; moved by ``shift``
    with the interval, the same answers (their cache keeps one answer for every place: it
    relies on this)."""
    o, n, pat = _norm(v)
    touched = bytes_of(v[0], v[1], v[2][:len(v[1])], v[3])
    wanted = set(range(lo, lo + width))
    for k in (0, shift):
        assert block_hits(pat, o + k, n, lo + k, lo + width + k) == bool(touched & wanted)
        if width and covers(pat, o + k, n, lo + k, lo + width + k):
            assert wanted <= touched


def _forget() -> None:
    """Drop the answers remembered under another budget."""
    strided._overlap.cache_clear()
    strided._hits_from.cache_clear()


def test_the_hull_rule_is_wrong_on_interleaved_columns():
    """The false hazard strided refs remove: a (4, 8) float32 tensor's even and odd columns have
    overlapping hulls and no common byte."""
    even = normalize(0, [4, 4], [8, 2], 4)
    odd = normalize(4, [4, 4], [8, 2], 4)
    hull = even[0] < odd[0] + odd[1] and odd[0] < even[0] + even[1]
    assert hull and not overlap(*even, *odd)
    assert overlap(*even, *normalize(0, [4, 2], [8, 4], 4))  # x[:, 0::4] shares even's bytes


def _slices(shape, item):
    """Views that slicing, narrowing and transposing a row-major tensor of ``shape`` make."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    out = []
    for start, step in itertools.product((0, 1, 3), (1, 2, 3)):
        for d in range(len(shape)):
            sizes = list(shape)
            sizes[d] = len(range(start, shape[d], step))
            st_ = list(strides)
            st_[d] *= step
            out.append((start * strides[d] * item, sizes, st_))
            out.append((start * strides[d] * item, sizes[::-1], st_[::-1]))  # transposed
    return out


@pytest.mark.parametrize("shape", [(6, 10), (4, 5, 6), (3, 7, 2, 4)])
def test_views_of_real_tensors_stay_far_below_the_budget(monkeypatch, shape):
    """Slices, steps and transposes of real tensors are answered exactly in under 64 search steps
    (the budget is 4096): the conservative answer is never what they get."""
    monkeypatch.setattr(strided, "BUDGET", 64)
    _forget()
    item = 4
    vs = _slices(shape, item)
    for (o1, s1, t1), (o2, s2, t2) in itertools.product(vs, vs):
        ref = bool(bytes_of(o1, s1, t1, item) & bytes_of(o2, s2, t2, item))
        assert overlap(*normalize(o1, s1, t1, item), *normalize(o2, s2, t2, item)) == ref
    _forget()


def test_over_budget_answers_overlap(monkeypatch):
    """Past the budget the test is conservative: it says the views overlap (a hazard may be
    reported that no byte shares; none is missed)."""
    monkeypatch.setattr(strided, "BUDGET", 0)
    _forget()
    even = normalize(0, [4, 4], [8, 2], 4)
    odd = normalize(4, [4, 4], [8, 2], 4)
    assert overlap(*even, *odd)
    strided._overlap.cache_clear()
