"""The fast JSON writer writes exactly what ``json.dumps(obj, indent=2)`` writes, and, compact, what
``json.dumps(obj, separators=(",", ":"))`` writes (JSON version 4's table entries)."""
from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from streamsim.report.jsontext import dumps_compact, dumps_indented, encode_compact, repaired

_floats = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                    st.floats(min_value=-1e-3, max_value=1e-3),  # around orjson's 1e-4 switch
                    st.sampled_from([1e-4, 9.999e-5, 1e-5, 1e16, 1e-7, -2.5e-6, 10.00001, 0.0,
                                     -0.0, 5e-324]))
_text = st.one_of(st.text(), st.text(st.characters(codec="utf-8")),
                  st.text(st.characters(min_codepoint=0x7e, max_codepoint=0x2000)),
                  st.text(alphabet="ab\"\\\x7f\x00\n: 0.00001e-5"),
                  st.sampled_from(["\ud800", "x\udfffy", "\U0001f600", "1e-5", "0.00001"]))
_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2 ** 63),
                    _floats, _text)
_json = st.recursive(_leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.tuples(kids, kids),
    st.dictionaries(_text, kids, max_size=4),
    st.dictionaries(st.integers(), kids, max_size=2)), max_leaves=25)


@settings(max_examples=600, deadline=None)
@given(_json)
def test_same_text_as_the_standard_library(obj):
    """Strings of any characters (escaped as ensure_ascii does), floats on both sides of 1e-4,
    integers beyond 64 bits, non-string keys: the text is json's, byte for byte."""
    assert dumps_indented(obj) == json.dumps(obj, indent=2)


@settings(max_examples=600, deadline=None)
@given(_json)
def test_compact_is_the_standard_librarys_compact_text(obj):
    """The same objects, one line: json's compact text, byte for byte."""
    assert dumps_compact(obj) == json.dumps(obj, separators=(",", ":"))


@settings(max_examples=200, deadline=None)
@given(st.lists(_json, max_size=5))
def test_entries_joined_then_repaired_are_each_entrys_text(objs):
    """The version-4 writer encodes a table's entries one by one, joins the bytes and repairs the
    whole once: the same as repairing each (a float below 1e-4 in one entry, a non-ASCII name
    in another, an entry orjson refuses)."""
    joined = repaired(b",\n".join(encode_compact(x) for x in objs))
    assert joined == ",\n".join(json.dumps(x, separators=(",", ":")) for x in objs)


def test_a_report_sized_object_takes_the_fast_path_and_stays_identical():
    """Many small dicts of ASCII names, ints and times, as hazards are: the same text."""
    obj = {"hazards": [{"id": i, "name": f"k{i}", "start": i * 1.5, "end": i * 1.5 + 0.001,
                        "range": [0, i], "manifest": i % 2 == 0, "fix": None}
                       for i in range(2000)]}
    assert dumps_indented(obj) == json.dumps(obj, indent=2)


def test_non_finite_floats_are_null_on_both_paths():
    """NaN and infinities become null (json would write NaN, which is not JSON), also where a
    64-bit overflow sends the object to the standard library."""
    assert dumps_indented([math.nan, math.inf, -math.inf]) == "[\n  null,\n  null,\n  null\n]"
    assert dumps_indented({"big": 2 ** 70, "x": math.nan}) == \
        '{\n  "big": 1180591620717411303424,\n  "x": null\n}'
