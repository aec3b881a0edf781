"""Write files atomically: never a half-written file, never a set of files mixed from two runs.

One file: a temp file in the same folder, then one rename (:func:`write_atomic`). A set of files
(``--out DIR``): a fresh sibling folder, swapped in with one exchange of the two names
(:func:`replace_folder`), so that a kill at any point leaves the earlier set or the new one.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import shutil
import tempfile
import time
from typing import Callable, Iterable, Mapping

STAGE = ".streamsim-"  # staging folders are ".<name>.streamsim-XXXX" beside the output folder
STALE_AFTER = 2.0  # seconds: an unlocked staging folder younger than this may be starting up


def write_atomic(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    write_with(path, lambda f: f.write(_encoded(data)))


def replace_folder(folder: str, files: Mapping[str, str | bytes], owned: Iterable[str]) -> None:
    """Make ``folder`` hold exactly ``files`` (name -> data), all or nothing.

    The files are written and synced in a fresh sibling folder, which is then swapped with
    ``folder`` in one ``renameat2(RENAME_EXCHANGE)`` (Linux); the earlier set, now under the
    sibling's name, is deleted. A process killed at any point leaves ``folder`` with its earlier
    set or the new one, never a mix, and the next run deletes what it left (a staging folder is
    locked by its living writer, so that concurrent runs leave each other's alone). Concurrent
    runs into one folder each swap in a whole set: the last one stays. Where the exchange is not
    available, the earlier folder is renamed away first: in between, ``folder`` is absent.

    ``folder`` may exist only if it holds nothing but names in ``owned`` (what streamsim writes
    there): a folder holding anything else is refused, not replaced.
    """
    target = os.path.realpath(folder)  # (a symlink to a folder: the folder it names is replaced)
    parent, name = os.path.split(target)
    if not name:
        raise OSError(errno.EINVAL, "cannot replace the root folder", folder)
    _named(folder, os.makedirs, parent, exist_ok=True)
    owned = frozenset(owned)
    _check_ours(folder, target, owned)
    _clean_leftovers(parent, name)
    stage = _named(folder, tempfile.mkdtemp, prefix=f".{name}{STAGE}", dir=parent)
    lock = os.open(stage, os.O_RDONLY)
    swapped = False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # alive: no concurrent run may clean it up
        for fname, data in files.items():
            _write_file(os.path.join(stage, fname), _encoded(data), os.path.join(folder, fname))
        os.chmod(stage, 0o777 & ~_umask())  # (mkdtemp makes it 0700)
        _sync_dir(stage)
        held = os.open(parent, os.O_RDONLY)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)  # one swap at a time beside this folder
            _check_ours(folder, target, owned)  # (another run may have made it meanwhile)
            if os.path.lexists(target):
                _swap(stage, target)
            else:
                os.rename(stage, target)
            swapped = True
            _sync_dir(parent)
        finally:
            os.close(held)
    except OSError as e:
        if e.filename is None or str(e.filename).startswith(parent + os.sep + "."):
            raise OSError(e.errno, e.strerror, folder) from None  # name the user's folder
        raise
    finally:
        os.close(lock)
        if not swapped or os.path.isdir(stage):  # a failed write, or the earlier set
            shutil.rmtree(stage, ignore_errors=True)


def check_folder(folder: str, owned: Iterable[str]) -> None:
    """Raise now what :func:`replace_folder` would raise about ``folder`` itself (an empty name,
    the root, a file, a folder holding what streamsim did not write): before a long run, not
    after it."""
    if not folder.strip():
        raise OSError(errno.EINVAL, "empty folder name", folder)
    target = os.path.realpath(folder)
    if not os.path.split(target)[1]:
        raise OSError(errno.EINVAL, "cannot replace the root folder", folder)
    _check_ours(folder, target, frozenset(owned))


def _named(folder: str, fn: Callable, *args, **kw):
    """``fn(*args, **kw)``, an OSError naming ``folder`` (not a temp path)."""
    try:
        return fn(*args, **kw)
    except OSError as e:
        raise OSError(e.errno, e.strerror, folder) from None


def _check_ours(folder: str, target: str, owned: frozenset[str]) -> None:
    if not os.path.lexists(target):
        return
    if not os.path.isdir(target):
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", folder)
    foreign = sorted(n for n in os.listdir(target) if n not in owned and not _OLD_TEMP.match(n))
    if foreign:  # (an OSError naming the folder: one line on the command line, exit 2)
        raise OSError(errno.ENOTEMPTY, f"holds {foreign[0]!r}, which streamsim did not write, and "
                      "the whole folder would be replaced: give a new folder, or one that only "
                      "streamsim writes to", folder)


_OLD_TEMP = re.compile(r"^\..+\.[A-Za-z0-9_]+\.tmp$")  # what the per-file writer of old left


def _clean_leftovers(parent: str, name: str) -> None:
    """Delete the staging folders of runs into ``parent/name`` that were killed (unlocked, and not
    just being made)."""
    prefix = f".{name}{STAGE}"
    try:
        entries = [e for e in os.listdir(parent) if e.startswith(prefix)]
    except OSError:
        return
    for entry in entries:
        path = os.path.join(parent, entry)
        try:
            if time.time() - os.lstat(path).st_mtime < STALE_AFTER:
                continue
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a living run holds it
            os.close(fd)
            continue
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swap the names ``a`` and ``b`` in one step (Linux ``renameat2``); False where unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


def _swap(stage: str, target: str) -> None:
    """Put ``stage`` at ``target`` and the earlier ``target`` at ``stage``."""
    if _exchange(stage, target):
        return
    old = stage + ".old"  # (no exchange: two renames, with ``target`` absent in between)
    os.rename(target, old)
    try:
        os.rename(stage, target)
    except OSError:
        os.rename(old, target)  # the earlier set back in place: never neither
        raise
    os.rename(old, stage)


def _write_file(path: str, data: bytes, shown: str) -> None:
    """Write and sync one file of a staged set; errors name ``shown`` (the user's file)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, shown) from None


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
        if isinstance(e, OSError) and e.filename in (tmp, None):  # (a full disk names no file)
            raise OSError(e.errno, e.strerror, path) from None
        raise
    return tmp


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
