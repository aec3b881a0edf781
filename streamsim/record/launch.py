"""``streamsim record -o run.jsonl -- CMD ARGS``: record every rank of a program left as it is.

The command runs with ``STREAMSIM_RECORD_DIR`` set and :mod:`streamsim.record.hook` first on
``PYTHONPATH``: its ``sitecustomize`` makes every Python process of the run (``torchrun``'s
workers included) wrap ``torch.distributed.init_process_group`` as torch.distributed is
imported. A process that calls it starts a :class:`~streamsim.record.mode.Recorder` right after,
writing ``rank<R>.jsonl`` into the directory, and stops it at exit. ``torchrun`` itself, which
never calls it, records nothing. When the command ends, the rank files are merged into the one
op log (:mod:`.merge`), the command to check it is printed, and the program's own exit code is
passed on.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Sequence

from .merge import merge_files
from .version import RecordError

ENV_DIR = "STREAMSIM_RECORD_DIR"
HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hook")


def parse_steps(text: str) -> tuple[int, int]:
    """``N:M`` (steps N to M, both included) as a pair; a RecordError otherwise."""
    m = re.fullmatch(r"(\d+):(\d+)", text)
    if m is None or int(m[1]) > int(m[2]):
        raise RecordError(f"--steps {text!r}: expected N:M with N <= M (steps N to M)")
    return int(m[1]), int(m[2])


def record_command(out: str, command: Sequence[str], *, steps: tuple[int, int] | None = None,
                   comm_buffers_only: bool = False) -> int:
    """Run ``command`` recorded, merge its ranks into ``out``; the command's exit code."""
    if not command:
        raise RecordError("streamsim record: no command to run (streamsim record -o "
                          "run.jsonl -- torchrun ... train.py)")
    tmp = tempfile.mkdtemp(prefix="streamsim-record-")
    try:
        env = dict(os.environ)
        env[ENV_DIR] = tmp
        env["PYTHONPATH"] = os.pathsep.join([HOOK_DIR] + [p for p in [env.get("PYTHONPATH")]
                                                          if p])
        try:
            code = subprocess.call(list(command), env=env)
        except FileNotFoundError:
            raise RecordError(f"streamsim record: command not found: {command[0]}") from None
        parts = sorted((f for f in os.listdir(tmp) if re.fullmatch(r"rank\d+\.jsonl", f)),
                       key=lambda f: int(f[4:-6]))
        if not parts:
            print("streamsim record: nothing recorded (no process of the command called "
                  "torch.distributed.init_process_group)", file=sys.stderr)
            return code if code else 2
        n = merge_files([os.path.join(tmp, f) for f in parts], out, steps=steps,
                        comm_buffers_only=comm_buffers_only)
        print(f"streamsim record: {n} lines from {len(parts)} rank{'s' * (len(parts) != 1)} "
              f"in {out}; check it with:\n    streamsim check {out}", file=sys.stderr)
        return code
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install_hook(directory: str) -> None:
    """In a process of a recorded run: wrap ``init_process_group`` once torch.distributed is
    imported (a finder on ``sys.meta_path`` sees the import), to start recording after it."""
    import importlib.abc
    import importlib.util

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch.distributed":
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            exec_module = loader.exec_module

            def exec_and_wrap(module):
                exec_module(module)
                _wrap_init(module, directory)
                sys.meta_path[:] = [f for f in sys.meta_path if f is not finder]
            loader.exec_module = exec_and_wrap
            return spec

    finder = Finder()
    sys.meta_path.insert(0, finder)


def _wrap_init(dist, directory: str) -> None:
    import atexit
    import functools
    orig = dist.init_process_group

    @functools.wraps(orig)
    def init_process_group(*args, **kwargs):
        out = orig(*args, **kwargs)
        from .mode import Recorder
        rec = Recorder(os.path.join(directory, f"rank{dist.get_rank()}.jsonl"))
        rec.start()
        atexit.register(rec.stop)
        return out

    dist.init_process_group = init_process_group
    dist.distributed_c10d.init_process_group = init_process_group
