"""The user code site of the op being recorded: the innermost frame outside torch and streamsim.

A recorded line names where the user's program issued it (``pp.py:42 main``), so that reports show
the user's own lines and root causes group by them. Walking the stack costs a few attribute reads
a frame; whether a code object is the user's is decided once per code object and cached, as is
its file's shown path.
"""
from __future__ import annotations

import os
import sys
from types import CodeType

_TORCH_DIRS: tuple[str, ...] = ()
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INTERNAL_FILES = ("<frozen ", "<string>")  # import machinery; exec'd code is not a file of ours
_shown: dict[CodeType, str | None] = {}  # code -> its shown file, None when not the user's


def _torch_dirs() -> tuple[str, ...]:
    global _TORCH_DIRS
    if not _TORCH_DIRS:
        import torch
        _TORCH_DIRS = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,)
    return _TORCH_DIRS


def _stdlib_dirs() -> tuple[str, ...]:
    import sysconfig
    return tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib",
                                                                               "platstdlib")})


_STDLIB = _stdlib_dirs()


def shown_file(code: CodeType) -> str | None:
    """The file of ``code`` as a site shows it (relative to the working directory when under
    it), or None when the code is torch's, streamsim's or the standard library's."""
    if code in _shown:
        return _shown[code]
    path = code.co_filename
    shown: str | None = None
    if not path.startswith(_INTERNAL_FILES):
        full = os.path.abspath(path)
        inside = full.startswith((_OWN_DIR, *_torch_dirs())) or (
            full.startswith(_STDLIB) and "site-packages" not in full)
        if not inside:
            rel = os.path.relpath(full)
            shown = full if rel.startswith("..") else rel
    _shown[code] = shown
    return shown


def user_site(depth: int = 1) -> str:
    """``file:line function`` of the innermost user frame above the caller (``depth`` frames
    up), or ``"<torch>"`` when every frame is torch's or streamsim's (work a library issued by
    itself, such as at interpreter exit)."""
    f = sys._getframe(depth)
    while f is not None:
        shown = shown_file(f.f_code)
        if shown is not None:
            return f"{shown}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back
    return "<torch>"
