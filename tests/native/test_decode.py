"""The compiled reader (streamsim/native/_decode.pyx) and the Python fast path read every op log as
the Python checker alone (every line through it) does: the same :class:`OpLog` (every line's
fields, its interned views, the groups and threads), or the same one-line error, on every op log
written out in the tests, on generated logs of every op kind (also with a recorder's site and t),
and on those logs with lines broken the ways a hostile or damaged file breaks them (a key given
twice, escapes, a byte that is not UTF-8, a BOM, comments, CR line ends, wrong types).

Skipped where the compiled module was not built (no compiler at install time; CI builds it, and
fails instead of skipping).
"""
from __future__ import annotations

import dataclasses
import json
import random

import pytest

from streamsim import native
from streamsim.oplog import read
from streamsim.oplog.read import parse_oplog
from streamsim.oplog.source import split_lines
from streamsim.sim.errors import ModelError

from .built import required
from .test_differential import generated_log, logs_in_tests

pytestmark = required("_decode", "the compiled reader")


def outcome(data: str | bytes, monkeypatch, path: str):
    """The parsed log and the identity structure of its views (which lines share one Ref
    object), or the error message, read by one reader: ``compiled``, ``fast`` (the Python fast
    path) or ``checker`` (the Python checker alone, every line: the reference of both)."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1" if path == "compiled" else "0")
    try:
        with monkeypatch.context() as m:
            if path == "checker":
                m.setattr(read, "SMALL_LOG", float("inf"))  # (every log: the checker's alone)
            log = parse_oplog(data, "d.jsonl")
    except ModelError as e:
        return str(e)
    first: dict[int, int] = {}
    shared = [first.setdefault(id(r), i) for i, ln in enumerate(log.lines)
              for r in (*ln.reads, *ln.writes)]
    return log, shared


def assert_same(data: str | bytes, monkeypatch, where: str) -> None:
    """The compiled reader and the Python fast path each read ``data`` as the checker does."""
    b = outcome(data, monkeypatch, "checker")
    for path in ("compiled", "fast"):
        a = outcome(data, monkeypatch, path)
        if a != b:
            _differ(a, b, f"{where}, {path}")


def _differ(a, b, where: str) -> None:
    """Fail naming what differs between two outcomes (:func:`outcome`)."""
    if isinstance(a, str) or isinstance(b, str):
        raise AssertionError(f"{where}: {a if isinstance(a, str) else 'read it'!r}, "
                             f"the checker {b if isinstance(b, str) else 'read it'!r}")
    for x, y in zip(a[0].lines, b[0].lines):
        assert x == y, f"{where}: line {x.lineno} differs: {x} != {y}"
    assert a[0] == b[0], f"{where}: the logs differ outside their lines"
    raise AssertionError(f"{where}: the views are shared differently")


def test_every_op_log_of_the_tests_reads_the_same(monkeypatch):
    """The hand-written logs of every test, those that test an error included."""
    found = logs_in_tests()
    assert len(found) >= 40, len(found)
    for where, text in found:
        assert_same(text, monkeypatch, where)
        assert_same(text.encode("utf-8", "surrogatepass"), monkeypatch, where + " (bytes)")


@pytest.mark.parametrize("chunk", range(4))
def test_generated_logs_read_the_same(monkeypatch, chunk):
    """Every op kind, 1-3 ranks, two threads, views with offsets, declarations."""
    for seed in range(chunk * 100, chunk * 100 + 100):
        text = generated_log(seed)
        assert_same(text.encode(), monkeypatch, f"generated log {seed}")


IN_ALL_RANKS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                "reduce", "gather", "scatter", "barrier")


def recorded_like(text: str, R: random.Random, back: float) -> str:
    """``text`` with a recorder's ``site`` and ``t`` on every op line (each thread's t in time
    order, but one line in ``1 / back`` of them going back in time: an error, on a fast line or
    a line the checker reads), and most collectives in which every rank takes part without their
    ``ranks`` list (as a recorder writes those of the default group)."""
    clock: dict[tuple, float] = {}
    out = []
    objs = [json.loads(line) for line in text.splitlines()]
    every = list(range(1 + max(o.get("rank", 0) for o in objs)))
    for obj in objs:
        if obj["op"] in IN_ALL_RANKS and sorted(obj.get("ranks", ())) == every and \
                R.random() < 0.7:
            del obj["ranks"]  # (the same collective: every rank of the log takes part)
        if obj["op"] not in ("group", "config"):
            thread = (obj.get("rank", 0), obj.get("host", "main"))
            t = clock.get(thread, 0.0) + R.choice((0, 0.5, 3, 17.25))
            if R.random() < back:
                t -= 20
            clock[thread] = t = max(t, 0.0) if R.random() < 0.9 else t
            obj["t"] = t if R.random() < 0.8 else int(t) if t == int(t) else t
            obj["site"] = f"/src/prog.py:{R.randint(1, 99)} fn"
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("chunk", range(2))
def test_recorded_like_logs_read_the_same(monkeypatch, chunk):
    """Every line with a site and a t, as a recorder writes them (the common lines take the
    compiled path then too); t going back on a thread is the same error on both paths."""
    R = random.Random(chunk)
    for k in range(150):
        text = recorded_like(generated_log(5000 + chunk * 1000 + k), R, (0.0, 0.01, 0.1)[k % 3])
        assert_same(text, monkeypatch, f"recorded-like log {chunk}/{k}")


BREAKS = (
    lambda s: s[:-1] + ', "name": "twice"}' if '"name"' in s else s[:-1] + ', "op": "launch"}',
    lambda s: s.replace('"', '"\\u0061', 1) if s.count('"') > 4 else s,  # an escape
    lambda s: s.replace("}", "", 1),  # malformed
    lambda s: "\ufeff" + s,  # a BOM (line 1 only is allowed one)
    lambda s: "# " + s,  # a comment
    lambda s: "  " + s + "  ",
    lambda s: s.replace('"dur": ', '"dur": "', 1).replace(", ", '", ', 1) if '"dur"' in s else s,
    lambda s: s.replace("[", '[7, ', 1),  # a ref that is a number
    lambda s: s.replace('"rank": ', '"rank": -', 1),
    lambda s: s.replace('"launch"', '"lunch"', 1),
    lambda s: "",
)


@pytest.mark.parametrize("chunk", range(3))
def test_broken_lines_give_the_same_error_or_log(monkeypatch, chunk):
    """A generated log with one to three of its lines broken (as text, and as bytes with a line
    ending in CR or a byte that is not UTF-8): the same log or the same first error."""
    R = random.Random(chunk)
    for k in range(150):
        lines = generated_log(chunk * 1000 + k).splitlines()
        for _ in range(R.randint(1, 3)):
            i = R.randrange(len(lines))
            lines[i] = R.choice(BREAKS)(lines[i])
        text = "\n".join(lines) + "\n"
        assert_same(text, monkeypatch, f"broken log {chunk}/{k}")
        data = text.encode()
        if R.random() < 0.3:
            data = data.replace(b"\n", b"\r", R.randint(1, 5))
        if R.random() < 0.3:
            at = R.randrange(len(data))
            data = data[:at] + b"\xff" + data[at:]
        assert_same(data, monkeypatch, f"broken log {chunk}/{k} (bytes)")


EDGES = (b"", b"\n", b"\n\n", b'{"op": "launch"}', b'{"op": "launch"}\n\n',
         b'{"op": "launch"}\n{"op": "launch", "name": "\\u0061"}',  # (the last handed over)
         b'{"op": "launch"}\n{"op": "launch", "name": "\xff"}',  # (not UTF-8, at the end)
         b'  \n# a comment\n{"op": "host"}\n   ', b'{"op": "launch"}\n{"op": "lunch"}')


def test_the_compiled_reader_reads_the_lines_where_they_lie_in_the_bytes(monkeypatch):
    """A log's bytes with no CR are handed to the compiled reader whole (no list of a bytes
    object a line): each line found in them, a line handed to the reference made of its own
    bytes, at the ends of the log too (no last line end, blank lines last, a last line the
    checker words); with a CR they are split first, and the reader refuses them whole."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (the suite may run with it 0: the module is)
    compiled = native.decoder()
    given: list[type] = []
    first_pass = compiled.first_pass
    monkeypatch.setattr(compiled, "first_pass",
                        lambda parser, lines, raw: (given.append(type(lines)),
                                                    first_pass(parser, lines, raw)))
    monkeypatch.setattr(read, "SMALL_LOG", 0)
    for data in EDGES:
        given.clear()
        assert_same(data, monkeypatch, repr(data))
        assert given == [bytes], (data, given)  # (the compiled reader's pass: the bytes whole)
        crlf = data.replace(b"\n", b"\r\n")
        given.clear()
        assert_same(crlf, monkeypatch, repr(crlf))
        assert given == [list if b"\r" in crlf else bytes], (crlf, given)  # (split first)
    def ends_at(lines) -> int | str:
        parser = read._Parser("f.jsonl")
        try:
            first_pass(parser, lines, [])
        except ModelError as e:
            return str(e)
        return parser.lineno

    for data in EDGES:  # (pass 1 ends at the last line split_lines counts, as the reference's)
        got = ends_at(data)
        assert got == ends_at(split_lines(data)), data
        assert got == len(split_lines(data)) or isinstance(got, str), (data, got)
    with pytest.raises(ValueError, match="split them first"):
        first_pass(read._Parser("f.jsonl"), b'{"op": "launch"}\r\n', [])


def _handed_over(monkeypatch) -> list[int]:
    """The compiled reader on, for logs of any size, and the list of the line numbers it hands
    to the Python reader (its ``take``) from now on."""
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    monkeypatch.setattr(read, "SMALL_LOG", 0)
    taken: list[int] = []
    take = read._Parser.take
    monkeypatch.setattr(read._Parser, "take",
                        lambda self, i, *rest: (taken.append(i), take(self, i, *rest)))
    return taken


def _the_checker_words(monkeypatch, taken: list, text: str, path: str, broken: tuple,
                       worded: str, message: str) -> None:
    """Each of ``broken`` after ``text`` reads alike on every path (:func:`assert_same`); with
    the compiled reader on, ``worded`` after ``text`` is an error ``message`` (a regex) that the
    reference words, the one line handed to it (``taken``: :func:`_handed_over`'s list)."""
    for line in broken:
        assert_same(text + line + "\n", monkeypatch, f"broken: {line}")
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (assert_same left the last reader's)
    taken.clear()
    with pytest.raises(ModelError, match=message):
        parse_oplog(text + worded + "\n", path)
    assert taken == [text.count("\n") + 1], taken  # (the reference words it)


def test_the_compiled_reader_takes_the_common_lines(monkeypatch):
    """It decodes kernels, host work, events and syncs, sends, waits and queries itself, refs by
    name, as objects and strided, and hands the reference only what it does not take (here: the
    declaration, a line with an escape, and a strided ref the checker refuses, which it words):
    so the equality above is between two readers, not the reference and itself."""
    taken = _handed_over(monkeypatch)
    text = ('{"op": "group", "group": "pp", "backend": "nccl", "ranks": [0]}\n'
            '{"op": "launch", "stream": "s0", "reads": ["a"], "writes": ["b"], "dur": 2}\n'
            '{"op": "host", "writes": ["a"], "step": 3}\n'
            '{"op": "record", "stream": "s0", "event": "e"}\n'
            '{"op": "wait_event", "event": "e"}\n'
            '{"op": "launch", "reads": [{"buffer": "b", "offset": 1, "window": [0, 0.5]}]}\n'
            '{"op": "launch", "reads": [{"buffer": "b", "sizes": [2], "strides": [2]}]}\n'
            '{"op": "launch", "name": "\\u0061", "reads": [{"buffer": "b", "sizes": [2, 3], '
            '"strides": [6, 1], "itemsize": 4}]}\n'
            '{"op": "sync_stream", "stream": "s0"}\n{"op": "sync_device"}\n'
            '{"op": "sync_event", "event": "e"}\n'
            '{"op": "isend", "group": "w", "tensors": ["a"], "peer": 1, "handle": "h"}\n'
            '{"op": "query", "handle": "h", "result": false}\n{"op": "query", "handle": "h"}\n'
            '{"op": "wait", "handle": "h"}\n')
    log = parse_oplog(text, "c.jsonl")
    assert taken == [1, 8], taken
    assert len(log.lines) == 14
    assert [(ln.op, ln.target, ln.result) for ln in log.lines[11:13]] == [
        ("query", 12, False), ("query", 12, None)]
    assert log.lines[5].reads[0].view.pattern is not None  # (strided: every other byte)
    with pytest.raises(ModelError, match="c.jsonl:2: .*missing its 'strides'"):
        parse_oplog('{"op": "launch"}\n{"op": "launch", "reads": [{"buffer": "b", '
                    '"sizes": [2]}]}\n', "c.jsonl")
    assert taken[-1] == 2  # (the reference words it)


ROOTED = [  # 2 ranks of group "g": each rooted collective on both, root 1, and a barrier
    '{"op": "reduce", "rank": 0, "group": "g", "tensors": ["a"], "root": 1, "handle": "r"}',
    '{"op": "reduce", "rank": 1, "group": "g", "tensors": ["a"], "root": 1, "nbytes": 8}',
    '{"op": "gather", "rank": 0, "group": "g", "inputs": ["a"], "root": 1}',
    '{"op": "gather", "rank": 1, "group": "g", "inputs": ["a"], "outputs": ["b", "c"], '
    '"root": 1}',
    '{"op": "scatter", "rank": 0, "group": "g", "outputs": ["a"], "root": 1}',
    '{"op": "scatter", "rank": 1, "group": "g", "inputs": ["b", "c"], "outputs": ["a"], '
    '"root": 1}',
    '{"op": "barrier", "rank": 0, "group": "g"}', '{"op": "barrier", "rank": 1, "group": "g"}',
]


def test_rooted_collectives_and_barriers_take_the_fast_paths(monkeypatch):
    """``reduce``, ``gather``, ``scatter`` (a ``root``, the root's own list) and ``barrier``
    without a ``ranks`` list are the fast paths' (the compiled reader makes their Lines: the
    root's writes of a reduce, the non-root's none) and read as the checker reads them; broken
    ones (no root, the root's list on another rank or missing on the root, a reduce without
    tensors) are the checker's, which words them."""
    text = "\n".join(ROOTED) + "\n"
    assert_same(text, monkeypatch, "rooted collectives")
    taken = _handed_over(monkeypatch)
    lines = parse_oplog(text, "g.jsonl").lines
    assert taken == [], taken
    assert [(ln.op, ln.root, len(ln.reads), len(ln.writes)) for ln in lines] == [
        ("reduce", 1, 1, 0), ("reduce", 1, 1, 1), ("gather", 1, 1, 0), ("gather", 1, 1, 2),
        ("scatter", 1, 0, 1), ("scatter", 1, 2, 1), ("barrier", None, 0, 0),
        ("barrier", None, 0, 0)]
    no_outputs = ROOTED[3].replace(', "outputs": ["b", "c"]', "")
    _the_checker_words(monkeypatch, taken, text, "g.jsonl", (
        ROOTED[0].replace(', "root": 1', ""), ROOTED[2].replace("0,", "1,", 1), no_outputs,
        ROOTED[4].replace('"outputs"', '"inputs": ["b"], "outputs"'),
        ROOTED[1].replace('"tensors": ["a"], ', "")),
        no_outputs, "g.jsonl:9: missing required field 'outputs'")


ANY_SOURCE = [  # what a recorder writes of dist.recv(t) without a source: the peer it saw
    '{"op": "isend", "rank": 1, "peer": 0, "tensors": ["a"], "handle": "s"}',
    '{"op": "irecv", "rank": 0, "peer": 1, "tensors": ["b"], "any_source": true, "handle": "r"}',
    '{"op": "irecv", "rank": 0, "peer": 1, "tensors": ["b"], "any_source": true, "name": "rcv"}',
    '{"op": "irecv", "rank": 0, "peer": 1, "tensors": ["b"], "any_source": false}',
    '{"op": "isend", "rank": 1, "peer": 0, "tensors": ["a"]}',
    '{"op": "isend", "rank": 1, "peer": 0, "tensors": ["a"]}',
]


def test_a_receive_from_any_source_takes_the_fast_paths(monkeypatch):
    """An ``irecv`` with ``any_source`` is the fast paths' (the compiled reader and msgspec's:
    its name the checker's default for it where the line gives none) and reads as the checker
    reads it; with a ``batch``, not a boolean, or on an ``isend``, it is the checker's, which
    words it."""
    from streamsim.oplog.fastpath import fast_spec
    from streamsim.oplog.schema import ANY_SOURCE_NAME
    text = "\n".join(ANY_SOURCE) + "\n"
    assert_same(text, monkeypatch, "any source")
    parser = read._Parser("f.jsonl")
    parser.lineno = 1
    parser.take(1, ANY_SOURCE[0], [])
    assert fast_spec(parser, ANY_SOURCE[1]) is not None  # (the Python fast path's)
    taken = _handed_over(monkeypatch)
    lines = parse_oplog(text, "a.jsonl").lines
    assert taken == [], taken
    assert [(ln.op, ln.name, ln.any_source) for ln in lines[1:4]] == [
        ("irecv", ANY_SOURCE_NAME, True), ("irecv", "rcv", True), ("irecv", "irecv", False)]
    batched = ANY_SOURCE[1].replace('"handle": "r"', '"batch": 1')
    _the_checker_words(monkeypatch, taken, text, "a.jsonl", (
        batched, ANY_SOURCE[1].replace("true", '"yes"'),
        ANY_SOURCE[0].replace('"handle"', '"any_source": true, "handle"')),
        batched, "a.jsonl:7: an irecv of a batch names its peer")


def test_lines_that_name_one_buffer_share_its_one_tuple(monkeypatch):
    """A line whose reads (or writes) name one buffer alone holds that buffer's one ``(ref,)``
    tuple, the same object as every other such line of the same life (48 bytes a line less);
    a new life (an alloc) has a tuple of its own, and a line of two refs its own tuple, each
    read as the checker reads it."""
    text = ('{"op": "alloc", "buffer": "a", "nbytes": 8}\n'
            '{"op": "launch", "reads": ["a"], "writes": ["b"]}\n'
            '{"op": "launch", "reads": ["b"], "writes": ["a"]}\n'
            '{"op": "launch", "reads": ["a", "b"]}\n'
            '{"op": "host", "writes": ["a"]}\n'
            '{"op": "free", "buffer": "a"}\n'
            '{"op": "alloc", "buffer": "a", "nbytes": 16}\n'
            '{"op": "launch", "reads": ["a"]}\n')
    assert_same(text, monkeypatch, "one buffer a line")
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")  # (assert_same left the last reader's)
    monkeypatch.setattr(read, "SMALL_LOG", 0)  # (a log this small: else the checker's alone)
    lines = parse_oplog(text, "t.jsonl").lines
    assert lines[1].reads is lines[2].writes is lines[4].writes
    assert lines[1].writes is lines[2].reads
    assert lines[3].reads == (*lines[1].reads, *lines[1].writes)
    assert lines[7].reads[0].view.nbytes == 16  # (not the first life's 8-byte Ref)


def test_durations_keep_their_value_and_sign(monkeypatch):
    """The compiled reader's rows hold a ``dur`` as a C double (no float object a line): each
    line's reads back as the checker reads it, 0.0 and -0.0 each its sign, an integer a float."""
    text = "".join(f'{{"op": "launch", "reads": ["a"], "dur": {d}}}\n'
                   for d in ("2.5", "1e0", "2.5", "0.0", "-0.0", "2.50", "1"))
    assert_same(text, monkeypatch, "durations")
    monkeypatch.setenv("STREAMSIM_NATIVE", "1")
    monkeypatch.setattr(read, "SMALL_LOG", 0)  # (a log this small: else the checker's alone)
    log = parse_oplog(text, "d.jsonl")
    assert type(log.lines).__name__ == "Rows"
    d = [ln.dur for ln in log.lines]
    assert [type(x) for x in d] == [float] * 7
    assert d == [2.5, 1.0, 2.5, 0.0, -0.0, 2.5, 1.0]
    assert str(d[3]) == "0.0" and str(d[4]) == "-0.0"


SETTLED = {
    # "b" alive from the start: named by its name (its Line made in pass 1, the Ref pending),
    # then by a line the checker reads (an escape): one Ref object for both
    "a name, then the checker's line": (
        '{"op": "launch", "reads": ["b"]}\n'
        '{"op": "launch", "name": "\\u0061", "reads": ["b", {"buffer": "c", "sizes": [2], '
        '"strides": [2]}]}\n'),
    # a strided ref the compiled reader takes, its hull growing the implicit life, then the
    # name: the name's Ref sized to the hull's end
    "a strided hull, then a name": (
        '{"op": "launch", "reads": [{"buffer": "b", "offset": 4, "sizes": [2, 2], '
        '"strides": [4, 1], "itemsize": 2}]}\n'
        '{"op": "launch", "reads": ["b"]}\n{"op": "host", "writes": [{"buffer": "b", '
        '"sizes": [3], "strides": [2]}]}\n'),
    # a later ref makes the implicit life 8 bytes: the name's Ref, made at 1, is replaced
    "a name, then a larger extent": (
        '{"op": "launch", "reads": ["b"]}\n'
        '{"op": "launch", "writes": [{"buffer": "b", "offset": 4, "nbytes": 4}]}\n'
        '{"op": "host", "reads": ["b", {"buffer": "b", "offset": 2}]}\n'),
    # an explicit 1-byte ref interned first: the name's pending Ref (also 1 byte) gives way to it
    "an equal explicit ref first": (
        '{"op": "launch", "reads": [{"buffer": "b", "nbytes": 1}]}\n'
        '{"op": "launch", "reads": ["b"]}\n{"op": "host", "writes": ["b"]}\n'),
    # the implicit life's ref, then an alloc's life of the same name and size
    "an implicit life, then an allocated one": (
        '{"op": "launch", "reads": ["b"]}\n{"op": "free", "buffer": "b"}\n'
        '{"op": "alloc", "buffer": "b", "nbytes": 1}\n{"op": "launch", "reads": ["b"]}\n'),
}


@pytest.mark.parametrize("case", SETTLED)
def test_refs_made_in_pass_1_settle_as_the_checker_resolves_them(monkeypatch, case):
    """A Line made in pass 1 names a buffer alive from the start before the log's end says its
    size: its Ref is sized, and shared with every equal ref of the log, as the checker's."""
    assert_same(SETTLED[case], monkeypatch, case)
    log, shared = outcome(SETTLED[case], monkeypatch, "compiled")
    refs = [r for ln in log.lines for r in (*ln.reads, *ln.writes)]
    assert len({id(r) for r in refs}) == len(set(refs)), "equal refs are not one object"


def test_the_comparison_catches_a_difference(monkeypatch):
    """The test can fail: a compiled reader whose Lines differ in one field is caught."""
    read._fast_paths()  # (the compiled reader imported and bound before it is replaced)
    compiled = native._decoder
    second_pass = compiled.second_pass

    class Off:
        first_pass = compiled.first_pass
        fast_spec = compiled.fast_spec

        @staticmethod
        def second_pass(parser, raw):
            lines = list(second_pass(parser, raw))  # (rows: each Line made as read)
            lines[0] = dataclasses.replace(lines[0], dur=lines[0].dur + 1)
            return lines
    monkeypatch.setattr(native, "_decoder", Off)
    with pytest.raises(AssertionError, match="line 2 differs"):
        assert_same(generated_log(1), monkeypatch, "generated log 1")
