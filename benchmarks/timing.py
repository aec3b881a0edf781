"""Time one ``streamsim`` command as a whole process: wall clock, CPU, peak RSS, and the time spent
inside ``main()`` (the process less interpreter start-up), for the benchmarks.

    python benchmarks/timing.py ARGS...   # child: run `streamsim ARGS`, report on fd 3

The parent (:func:`time_command`) starts the child with its stdout sent to a file (the report is
written, as a user's would be), waits for it with ``os.wait4`` for the child's own peak RSS and CPU
time, and reads the child's ``main()`` time from a pipe.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def time_command(args: list[str], stdout_path: str = os.devnull, *,
                 python: str = sys.executable, env: dict[str, str] | None = None) -> dict:
    """Run ``streamsim ARGS`` in a fresh process (``env``: variables set for it, e.g.
    ``STREAMSIM_NATIVE``); return wall, cpu, main (seconds), peak RSS (KB), exit code."""
    r, w = os.pipe()
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter()
        child = subprocess.Popen([python, __file__, *args], stdout=out, stderr=subprocess.PIPE,
                                 pass_fds=(w,), env={**os.environ, **(env or {}), "TIMING_FD": str(w)},
                                 cwd=ROOT)
        os.close(w)
        err = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
    with os.fdopen(r) as f:
        inner = f.read()
    if child.returncode not in (0, 1):
        raise RuntimeError(f"streamsim {' '.join(args)} failed ({child.returncode}): "
                           f"{err.decode()[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "main": float(inner),
            "rss_kb": usage.ru_maxrss, "code": child.returncode}


def _child() -> None:
    t0 = time.perf_counter()
    sys.path.insert(0, ROOT)
    from streamsim.cli.main import main
    try:
        code = main(sys.argv[1:])
    finally:
        sys.stdout.flush()
        os.write(int(os.environ["TIMING_FD"]), f"{time.perf_counter() - t0!r}".encode())
    sys.exit(code)


if __name__ == "__main__":
    _child()
