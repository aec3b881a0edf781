"""Write files atomically: a temp file in the same folder, then rename; never a half-written file."""
from __future__ import annotations

import os
import tempfile
from typing import Callable


def write_atomic(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    write_with(path, lambda f: f.write(data.encode("utf-8") if isinstance(data, str) else data))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_with(path: str, fill: Callable) -> None:
    """Call ``fill(binary_file)`` on a temp file beside ``path``; rename on success, delete on error.

    The file gets the permissions a plain ``open(path, "w")`` would give (``mkstemp`` makes it 0600).
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                   dir=folder)
    except OSError as e:  # name the file the user asked for, not our temp file
        raise OSError(e.errno, e.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError) and e.filename == tmp:
            raise OSError(e.errno, e.strerror, path) from None
        raise
