"""The compiled reader's lexer (streamsim/native/_lex.pxi) reads a line as msgspec's typed decode
of it does (streamsim/oplog/fastpath.py), or refuses it: a line it takes has every field msgspec
gives it, of the same type and value (a float to the bit, -0.0 kept), and a refused line goes to
msgspec and the checker as before, so refusing loses nothing and taking must never differ.

On lines of the grammar it covers (UTF-8 strings without escapes or control characters,
integers of at most 19 digits, spaces and tabs between tokens) it must also take every line
msgspec takes: else the
lexer would be a door that never opens, and the equality above would hold of nothing.

Skipped where the compiled module was not built (CI builds it, and fails instead of skipping).
"""
from __future__ import annotations

import random

import pytest
from msgspec import UNSET

from streamsim.oplog import read
from streamsim.oplog.read import parse_oplog

from .built import required
from .test_decode import assert_same

pytestmark = required("_decode", "the compiled reader")

OPS = {  # op -> its keys beyond the common ones (the fast path's Structs)
    "sync_stream": (), "sync_device": (), "launch": ("reads", "writes"),
    "host": ("reads", "writes"), "record": ("event",), "wait_event": ("event",),
    "sync_event": ("event",), "free": ("buffer",), "record_stream": ("buffer",),
    "alloc": ("buffer", "nbytes", "label"), "wait": ("handle", "blocking", "inferred"),
    "query": ("handle", "result"),
    "isend": ("tensors", "peer", "group", "handle", "nbytes", "batch"),
    "irecv": ("tensors", "peer", "group", "handle", "nbytes", "batch", "any_source"),
    **{c: ("tensors", "inputs", "outputs", "group", "handle", "nbytes")
       for c in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")},
    "barrier": ("group", "handle"), "reduce": ("tensors", "root", "group", "handle", "nbytes"),
    **{c: ("inputs", "outputs", "root", "group", "handle", "nbytes") for c in ("gather", "scatter")},
}
COMMON = ("rank", "host", "stream", "name", "dur", "step", "site", "t")
INTS = {"rank": 2**31 - 1, "peer": 2**31 - 1, "step": 2**63 - 1, "nbytes": 2**63 - 1,
        "batch": 2**63 - 1, "root": 2**31 - 1}
FLOATS = ("dur", "t")
REFS = ("reads", "writes", "tensors", "inputs", "outputs")
ANY_STR = ("name", "inferred")  # (may be empty)


def decoder():
    read._fast_paths()  # (the compiled reader imported and bound)
    from streamsim.native import _decode
    return _decode


def _text(R: random.Random, clean: bool) -> str:
    """A JSON string: UTF-8 without escapes (the lexer's), or now and then what it leaves to
    msgspec (an escape, a control character)."""
    chars = "abcXYZ019 _:,.{}[]/-#\u00e9\u2028\u65e5\U0001f600"
    s = "".join(R.choice(chars) for _ in range(R.choice((0, 1, 1, 3, 8))))
    if not clean and R.random() < 0.1:
        s += R.choice(("\\n", "\\\"", "\\u0041", "\t", "\x7f", "\\ud800"))
    return '"' + s + '"'


def _int(R: random.Random, key: str, clean: bool) -> str:
    limit = INTS[key]
    forms = [str(R.randint(0, 9)), str(R.randint(0, limit)), str(limit), str(limit + 1),
             str(R.randint(0, 10**18 - 1))]
    if not clean and R.random() < 0.15:
        forms = ["-0", "-1", "1.0", "1e3", "01", str(10**19), "true", "null", '"1"']
    return R.choice(forms)


def _float(R: random.Random, clean: bool) -> str:
    forms = ["0", "1", "-0.0", "0.0", "1e15", "1e16", "1E2", "2.5e-3", "123456789.123456789e-3",
             str(R.random() * 10 ** R.randint(-5, 16)), str(R.randint(0, 10**20)),
             f"{R.random():.17g}", "0.1", "1000000000000000.1", "-1", "5e-324", "1e-400",
             # (up to 15 digits and exponents near +-22: the lexer's exact case and its edges)
             f"{R.randint(0, 10 ** R.randint(1, 16))}e{R.randint(-26, 26)}",
             f"{R.random() * 10 ** R.randint(-3, 12):.{R.randint(1, 16)}g}",
             f"{R.randint(0, 10 ** 8)}.{R.randint(0, 10 ** R.randint(1, 9))}E-{R.randint(0, 16)}"]
    if not clean and R.random() < 0.15:
        forms = ["01", "1.", ".5", "1e", "+1", "NaN", "Infinity", "true", '"1"', "null"]
    return R.choice(forms)


def _ref(R: random.Random, clean: bool) -> str:
    if R.random() < 0.6:
        return _text(R, clean)
    keys = {"buffer": _text(R, clean)}
    if R.random() < 0.5:
        keys["offset"] = _int(R, "nbytes", clean)
    if R.random() < 0.5:
        keys["nbytes"] = _int(R, "nbytes", clean)
    if R.random() < 0.4:
        keys["window"] = f"[{_float(R, clean)}, {_float(R, clean)}]"
    if R.random() < 0.3:  # (a strided ref's keys, each alone or with the others)
        for k in ("sizes", "strides"):
            if R.random() < 0.8:
                keys[k] = "[" + ", ".join(_int(R, "nbytes", clean)
                                          for _ in range(R.choice((0, 1, 2, 3, 64, 65)))) + "]"
        if R.random() < 0.6:
            keys["itemsize"] = R.choice(("0", "1", "2", "4")) if clean else _int(R, "nbytes", False)
    if not clean and R.random() < 0.2:
        keys[R.choice(("strides", "buffer", "sizes", "itemsize"))] = R.choice(
            ("[1]", "[-1]", "[1.5]", "[1, ]", "[", "1", '["1"]', "[[1]]"))
    items = list(keys.items())
    R.shuffle(items)
    if not clean and R.random() < 0.1:
        items.append(items[0])  # (a key given twice)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in items) + "}"


def _value(R: random.Random, key: str, clean: bool) -> str:
    if key in INTS:
        return _int(R, key, clean)
    if key in FLOATS:
        return _float(R, clean)
    if key in ("blocking", "result", "any_source"):
        return R.choice(("true", "false") if clean else ("true", "false", "1", "null"))
    if key in REFS:
        return "[" + ", ".join(_ref(R, clean) for _ in range(R.choice((0, 1, 2, 3)))) + "]"
    return _text(R, clean)


def generated_line(R: random.Random, clean: bool) -> str:
    """A line of some op, its keys in any order with any spacing; ``clean``: only what the
    lexer's grammar covers (values may still be out of range, strings empty)."""
    op = R.choice(list(OPS))
    keys = [k for k in (*COMMON, *OPS[op]) if R.random() < 0.5]
    pairs = [("op", f'"{op}"')] + [(k, _value(R, k, clean)) for k in keys]
    if not clean:
        if R.random() < 0.1:
            pairs.append((R.choice(("event", "tensors", "root", "ranks")), '"x"'))
        if R.random() < 0.1 and len(pairs) > 1:
            pairs.append(pairs[1])  # (a key given twice)
        if R.random() < 0.05:
            pairs = pairs[1:]  # (no op)
    R.shuffle(pairs)
    ws = (lambda: R.choice(("", " ", "  ", "\t"))) if R.random() < 0.5 else (lambda: "")
    sep = "," + ws() if ws() == "" else ", "
    body = sep.join(f'{ws()}"{k}"{ws()}:{ws()}{v}{ws()}' for k, v in pairs)
    line = ws() + "{" + body + "}" + ws()
    if not clean and R.random() < 0.05:
        line = line[:R.randrange(len(line))]  # (truncated)
    return line


def _same(a, b) -> bool:
    """Equal values of equal types, floats to the bit (-0.0 is not 0.0), refs field by field."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__struct_fields__"):
        return all(_same(getattr(a, f), getattr(b, f)) for f in a.__struct_fields__)
    return a == b


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "hostile"])
def test_a_line_the_lexer_takes_has_msgspec_s_fields(clean):
    """Every line the lexer takes decodes by msgspec to the same fields; on clean lines it takes
    every line msgspec takes."""
    d = decoder()
    R = random.Random(26 if clean else 62)
    taken = refused_by_both = 0
    for k in range(20000):
        line = generated_line(R, clean)
        lexed = d.lex_fields(line.encode("utf-8"))
        assert _same(lexed, d.lex_fields(line)), line  # (a str or its bytes alike)
        decoded = d.msgspec_fields(line.strip(" \t"))
        if lexed is not None:
            taken += 1
            assert decoded is not None, f"the lexer took a line msgspec refuses: {line}"
            for name, a, b in zip(("op", *_FIELDS), lexed, decoded):
                assert _same(a, b), f"{name}: lexer {a!r}, msgspec {b!r}: {line}"
        elif decoded is None:
            refused_by_both += 1
        elif clean and _required_present(line, decoded):
            raise AssertionError(f"the lexer refused a clean line msgspec takes: {line}")
    assert taken > (3000 if clean else 1000) and refused_by_both > 1000, (taken, refused_by_both)


_FIELDS = ("rank", "host", "stream", "name", "dur", "step", "site", "t", "reads", "writes",
           "event", "buffer", "nbytes", "label", "handle", "blocking", "inferred", "tensors",
           "peer", "group", "batch", "inputs", "outputs", "result", "root")


def _required_present(line: str, decoded: tuple) -> bool:
    """False for a line msgspec takes only by its Struct's default (an event op without
    ``event``, a buffer op without ``buffer``, a wait without ``handle``): the lexer refuses
    those, and the reader's check refuses them after msgspec too."""
    op = decoded[0]
    need = {"record": "event", "wait_event": "event", "sync_event": "event", "free": "buffer",
            "record_stream": "buffer", "alloc": "buffer", "wait": "handle",
            "query": "handle"}.get(op)
    return need is None or f'"{need}"' in line


def test_the_lexer_refuses_what_msgspec_would_read_differently():
    """Each of these, msgspec reads (or refuses) in a way the lexer does not copy: it refuses
    them all, and they take the way they took before."""
    d = decoder()
    for line in ['{"op": "launch", "name": "a\\u0062"}', '{"op": "launch", "name": "\x7f"}',
                 '{"op": "launch", "dur": 1, "dur": 2}', '{"op": "launch"} x',
                 '{"op": "launch", "rank": -0}', '{"op": "launch", "rank": 1234567890123456789}',
                 '{"op": "launch", "event": "e"}', '{"op": "group"}', '{"op": "record"}',
                 '{"op": "launch", "reads": [{"buffer": "b", "strides": [-1]}]}',
                 '{"op": "launch", "reads": [{"buffer": "b", "itemsize": 0}]}',
                 '{"op": "launch", "reads": [{"buffer": "b", "sizes": [1], "sizes": [1]}]}',
                 '{"op": "launch", "reads": [{"buffer": "b", "sizes": [%s]}]}' % ("1," * 65)[:-1],
                 '{"op": "launch", "reads": [{"buffer": "b", "strides": [1.0]}]}',
                 '\x0c{"op": "launch"}', '{"op": "launch", "dur": NaN}', '{"rank": 0}',
                 '{"op": "wait", "handle": ""}', '{"op": "launch", "stream": ""}']:
        assert d.lex_fields(line.encode("utf-8")) is None, line
    for data in (b'{"op": "launch", "name": "\xff"}', b'{"op": "launch", "name": "\xed\xa0\x80"}',
                 b'{"op": "launch", "name": "\xc3"}', b'{"op": "launch"}\xc2\xa0',
                 '{"op": "launch", "name": "\ud800"}'):  # (not UTF-8; a lone surrogate)
        assert d.lex_fields(data) is None, data


def test_the_reader_lexes_the_common_lines(monkeypatch):
    """A log's common lines go through the lexer (lexed_lines), those it does not cover the way
    they went before, and the log reads as with the checker alone (test_decode.py holds the
    compiled reader to that on many more logs)."""
    d = decoder()
    text = '{"op": "group", "group": "pp", "backend": "nccl", "ranks": [0, 1]}\n' + (
            '{"op": "launch", "stream": "s0", "reads": ["a"], "writes": ["b"], "dur": 2}\n'
            '{"op": "launch", "name": "caf\u00e9", "reads": ["a"]}\n'
            '{"op": "isend", "tensors": [{"buffer": "b", "offset": 1, "window": [0, 0.5]}], '
            '"peer": 1, "handle": "h", "t": 3.25, "site": "p.py:3 f"}\n'
            '{"op": "wait", "handle": "h", "inferred": "completion"}\n\n'
            '# a comment\n{"op": "alloc", "buffer": "c", "nbytes": 8, "label": "x"}\n'
            '{"op": "free", "buffer": "c"}\n') * 500
    for data in (text, text.encode("utf-8")):
        monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (the compiled reader, whatever the suite's
        log = parse_oplog(data, "lex.jsonl")  # path; assert_same below sets it as it needs)
        assert len(log.lines) == 3000
        assert d.lexed_lines() == 3000, d.lexed_lines()
        assert_same(data, monkeypatch, "the lexed log")


MEMO = {
    # the checker reads the second alloc (a label the lexer does not take): the name's Ref after
    # it is the new life's, 8 bytes, not the one remembered from the first life
    "an alloc the lexer does not take": (
        '{"op": "alloc", "buffer": "b", "nbytes": 4}\n{"op": "launch", "reads": ["b"]}\n'
        '{"op": "free", "buffer": "b"}\n'
        '{"op": "alloc", "buffer": "b", "nbytes": 8, "label": "caf\u00e9"}\n'
        '{"op": "launch", "reads": ["b"]}\n'),
    # lexed allocs: each life's own size
    "lives the lexer takes": (
        '{"op": "launch", "writes": ["b"]}\n{"op": "alloc", "buffer": "b", "nbytes": 4}\n'
        '{"op": "launch", "reads": ["b"]}\n{"op": "free", "buffer": "b"}\n'
        '{"op": "alloc", "buffer": "b", "nbytes": 2}\n{"op": "host", "reads": ["b", "b"]}\n'
        '{"op": "free", "buffer": "b"}\n{"op": "alloc", "buffer": "b"}\n'
        '{"op": "launch", "reads": ["b"]}\n'),
    # one name on two ranks, two threads: two buffers
    "one name on two ranks": (
        '{"op": "alloc", "buffer": "b", "nbytes": 4}\n'
        '{"op": "alloc", "rank": 1, "buffer": "b", "nbytes": 6}\n'
        '{"op": "launch", "reads": ["b"]}\n{"op": "launch", "rank": 1, "reads": ["b"]}\n'
        '{"op": "host", "host": "h2", "reads": ["b"]}\n{"op": "launch", "reads": ["b"]}\n'),
    # an implicit life grown by a ref object after the name's Ref was made
    "an implicit life grown later": (
        '{"op": "launch", "reads": ["b"]}\n{"op": "launch", "reads": ["b"]}\n'
        '{"op": "launch", "writes": [{"buffer": "b", "offset": 8, "nbytes": 8}]}\n'
        '{"op": "launch", "reads": ["b"]}\n'),
}


@pytest.mark.parametrize("case", MEMO)
def test_a_remembered_ref_follows_the_buffer_s_life(monkeypatch, case):
    """The compiled reader remembers each buffer name's Ref between lines the lexer takes; an
    alloc, or a line it does not take, makes it resolve the name again, so each ref has the
    size of the life it names, as the checker reads it."""
    text = MEMO[case] * 3
    assert_same(text, monkeypatch, case)
    assert_same(text.encode("utf-8"), monkeypatch, case + " (bytes)")


TIMES = {
    # two threads' lines interleaved, each thread's t in order: read
    "two threads, in order": (
        '{"op": "host", "t": 1.5}\n{"op": "host", "t": 2}\n{"op": "host", "host": "h2", "t": 0.5}\n'
        '{"op": "host", "t": 2}\n{"op": "host", "host": "h2", "t": 0.7}\n'
        '{"op": "host", "rank": 1, "t": 0.1}\n{"op": "host", "t": 3}\n'),
    # a t back in time on the thread of the line before: the checker's error
    "back in time, same thread": '{"op": "host", "t": 5}\n{"op": "host", "t": 6}\n'
                                 '{"op": "host", "t": 4}\n',
    # back in time after another thread's lines
    "back in time, after another thread": (
        '{"op": "host", "t": 5}\n{"op": "host", "host": "h2", "t": 1}\n{"op": "host", "t": 4}\n'),
    # the checker reads a line between (a name the lexer does not take) and must see the t the
    # lexed line before it gave its thread
    "back in time, at a line the checker reads": (
        '{"op": "host", "t": 5}\n{"op": "host", "name": "caf\u00e9", "t": 4}\n'),
    "in order, across a line the checker reads": (
        '{"op": "host", "t": 5}\n{"op": "host", "name": "caf\u00e9", "t": 6}\n'
        '{"op": "host", "t": 5.5}\n'),
}


@pytest.mark.parametrize("case", TIMES)
def test_each_thread_s_t_is_checked_as_the_checker_checks_it(monkeypatch, case):
    """The compiled reader keeps the last t of the thread of the line before in C while lexed
    lines stay on that thread; every order, and every error, is the checker's."""
    for data in (TIMES[case], TIMES[case].encode("utf-8")):
        assert_same(data, monkeypatch, case)


MUTATED = [b'{"op": "launch", "stream": "s0", "reads": ["a", {"buffer": "b", "offset": 1, '
           b'"nbytes": 2, "window": [0, 0.5]}], "writes": ["b"], "dur": 2.5e-3, "t": 12.5, '
           b'"site": "p.py:3 f"}',
           b'{"op": "isend", "tensors": ["x"], "peer": 1, "group": "g", "handle": "h", '
           b'"nbytes": 8, "batch": 0}',
           b'{"op": "wait", "handle": "h", "blocking": true, "inferred": "completion", '
           b'"name": "caf\xc3\xa9"}',
           b'{"op": "all_reduce", "inputs": ["a"], "outputs": ["b"], "rank": 3, "step": 9}']


def test_damaged_bytes_are_refused_or_read_as_msgspec_reads_them():
    """Lines cut at every byte, and lines with bytes changed, dropped or put in (quotes,
    brackets, escapes, bytes past ASCII): the lexer refuses them, or takes them as msgspec reads
    them (valid UTF-8 then, and the same fields); none crashes it."""
    d = decoder()
    R = random.Random(2026)
    cases = [x[:cut] for x in MUTATED for cut in range(len(x) + 1)]
    for _ in range(20000):
        x = bytearray(R.choice(MUTATED))
        for _ in range(R.randint(1, 4)):
            at, how = R.randrange(len(x)), R.random()
            if how < 0.4:
                x[at] = R.randrange(256)
            elif how < 0.7:
                del x[at]
            else:
                x.insert(at, R.choice(b'",:{}[]\\ 0e.-\x80\xff'))
        cases.append(bytes(x))
    taken = 0
    for x in cases:
        lexed = d.lex_fields(x)
        if lexed is None:
            continue
        taken += 1
        decoded = d.msgspec_fields(x.decode("utf-8").strip(" \t"))
        assert decoded is not None, x
        for name, a, b in zip(("op", *_FIELDS), lexed, decoded):
            assert _same(a, b), f"{name}: lexer {a!r}, msgspec {b!r}: {x!r}"
    assert taken > 500, taken
