"""Where op-log text comes from: a file, or a pipe or FIFO read with a bound; and its lines.

:func:`streamsim.oplog.read.load_oplog` and ``shrink`` both read through here, so that they refuse
the same inputs and number lines alike.
"""
from __future__ import annotations

import os
import re
import stat

from ..sim.errors import ModelError

_LINE_ENDS = re.compile(r"\r\n?|\n")
_LINE_ENDS_B = re.compile(rb"\r\n?|\n")
# Characters some editors show as a line break although an op log does not break lines there: in
# a comment, they would hide the ops written after them on the same line.
_HIDDEN_BREAK = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")

MAX_PIPE_BYTES = 1 << 30  # read at most this much from a pipe or FIFO (a file's size is known)


def read_oplog_bytes(path: str) -> bytes:
    """The bytes of the op log at ``path``: a regular file, or a pipe or FIFO (``/dev/stdin``, read
    up to :data:`MAX_PIPE_BYTES`; a FIFO nobody writes to reads as empty instead of waiting for a
    writer). Devices (``/dev/zero``, ``/dev/null``, a terminal) are refused: one line, no hang."""
    def cannot(why: str) -> ModelError:
        return ModelError(f"{path}: cannot read the op log: {why}")
    try:
        kind = stat.S_IFMT(os.stat(path).st_mode)
        if kind in (stat.S_IFCHR, stat.S_IFBLK):
            raise cannot(f"a {'character' if kind == stat.S_IFCHR else 'block'} device, not a "
                         "file")
        if kind in (stat.S_IFIFO, stat.S_IFSOCK):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # no writer: open without waiting
            try:
                os.set_blocking(fd, True)  # a writer that is there: wait for its data
                with os.fdopen(fd, "rb", closefd=False) as f:
                    data = f.read(MAX_PIPE_BYTES + 1)
            finally:
                os.close(fd)
            if len(data) > MAX_PIPE_BYTES:
                raise cannot(f"more than {MAX_PIPE_BYTES:,} bytes from a pipe: write it to a "
                             "file first")
            return data
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise cannot(e.strerror or str(e)) from None


def split_lines(data: str | bytes) -> list:
    r"""The physical lines of op-log text: ``\n``, ``\r\n`` and a lone ``\r`` (old Mac files) all
    end a line, so that line numbers are the ones an editor shows."""
    if isinstance(data, bytes):
        return _LINE_ENDS_B.split(data) if b"\r" in data else data.split(b"\n")
    return _LINE_ENDS.split(data) if "\r" in data else data.split("\n")


def hides_ops(comment: str) -> str:
    """Why a comment line could hide ops from its reader ("" when it cannot): it holds a character
    that some editors show as a line break."""
    hidden = _HIDDEN_BREAK.search(comment)
    return "" if hidden is None else (f"a comment holds U+{ord(hidden.group()):04X}, which some "
                                      "editors show as a line break: anything after it on this "
                                      "line would be ignored; remove it")
