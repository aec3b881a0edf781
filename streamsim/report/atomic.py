"""Write files atomically: a temp file in the same folder, then rename; never a half-written file."""
from __future__ import annotations

import os
import tempfile
from typing import Callable, Mapping


def write_atomic(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    write_with(path, lambda f: f.write(_encoded(data)))


def write_set_atomic(files: Mapping[str, str | bytes]) -> None:
    """Write several files so that a failure leaves every one of them as it was: all are staged
    in temp files first, and renamed into place only once every one is written (a disk that fills
    up half-way does not leave a set mixed from two runs)."""
    staged: list[tuple[str, str]] = []
    try:
        for path, data in files.items():
            staged.append((_stage(path, lambda f, d=data: f.write(_encoded(d))), path))
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp)
        raise
    for tmp, path in staged:
        os.replace(tmp, path)


def write_with(path: str, fill: Callable) -> None:
    """Call ``fill(binary_file)`` on a temp file beside ``path``; rename on success, delete on error.

    The file gets the permissions a plain ``open(path, "w")`` would give (``mkstemp`` makes it 0600).
    """
    tmp = _stage(path, fill)
    try:
        os.replace(tmp, path)
    except BaseException as e:
        _discard(tmp)
        if isinstance(e, OSError) and e.filename == tmp:
            raise OSError(e.errno, e.strerror, path) from None
        raise


def _encoded(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _stage(path: str, fill: Callable) -> str:
    """A temp file beside ``path``, filled by ``fill`` and synced; deleted again on error. Errors
    name ``path`` (the file the user asked for), not the temp file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                   dir=folder)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
    except BaseException as e:
        _discard(tmp)
        if isinstance(e, OSError) and e.filename == tmp:
            raise OSError(e.errno, e.strerror, path) from None
        raise
    return tmp


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
