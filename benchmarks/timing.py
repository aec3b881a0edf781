"""Time one ``streamsim`` command as a whole process: wall clock, CPU, peak RSS, and the time spent
inside ``main()`` (the process less interpreter start-up), for the benchmarks.

    python benchmarks/timing.py ARGS...   # child: run `streamsim ARGS`, report on fd 3

The parent (:func:`time_command`) starts the child with its stdout sent to a file (the report is
written, as a user's would be), waits for it with ``os.wait4`` for the child's own peak RSS and CPU
time, and reads the child's ``main()`` time from a pipe. The child runs the command as the
``streamsim`` program does (``main(argv, supervise=True)``: the work in a supervised child of its
own, with the command's heap policy, streamsim/native/_heap.pyx), so that the peak RSS is the one
a user's command reaches (``wait4``'s covers the processes it reaped). Until the fifteenth
session it ran ``main(argv)``, a library caller's path without the policy, whose peak on a
1,000,000-line check was 1,101 MB where the program's was 1,485 MB.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def compile_bytecode(root: str = ROOT) -> None:
    """Write the bytecode of ``root``'s package first, as an install leaves it, before any
    command is timed: an editable install writes it on first import, unless
    PYTHONDONTWRITEBYTECODE is set (it is on these machines), and then every run compiles every
    module again (~0.05-0.07 s a command on a 2-core machine; a tree without it, timed beside one
    with it, looks that much slower)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(root, "streamsim")],
                   check=True, stdout=subprocess.DEVNULL)


def time_command(args: list[str], stdout_path: str = os.devnull, *,
                 python: str = sys.executable, env: dict[str, str] | None = None,
                 tree: bool = False) -> dict:
    """Run ``streamsim ARGS`` in a fresh process (``env``: variables set for it, e.g.
    ``STREAMSIM_NATIVE``); return wall, cpu, main (seconds), peak RSS (KB), exit code. ``cpu``
    counts the worker processes it started and reaped (``--jobs``: ``wait4``'s usage includes
    them); ``rss_kb`` is the largest single process's peak. With ``tree``, also ``tree_rss_kb``
    and ``tree_pss_kb``: the peak of the sum over the process and its workers, sampled every
    100 ms from /proc (PSS shares a page the fork left shared among the processes holding it;
    RSS counts it in each)."""
    r, w = os.pipe()
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter()
        child = subprocess.Popen([python, __file__, *args], stdout=out, stderr=subprocess.PIPE,
                                 pass_fds=(w,), env={**os.environ, **(env or {}), "TIMING_FD": str(w)},
                                 cwd=ROOT)
        os.close(w)
        peaks = {"rss": 0, "pss": 0}
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_tree, args=(child.pid, peaks, stop), daemon=True)
        if tree:
            sampler.start()
        err = child.stderr.read()
        stop.set()
        if tree:
            sampler.join()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
    with os.fdopen(r) as f:
        inner = f.read()
    if child.returncode not in (0, 1):
        raise RuntimeError(f"streamsim {' '.join(args)} failed ({child.returncode}): "
                           f"{err.decode()[-2000:]}")
    got = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "main": float(inner),
           "rss_kb": usage.ru_maxrss, "code": child.returncode}
    if tree:
        got.update(tree_rss_kb=peaks["rss"], tree_pss_kb=peaks["pss"])
    return got


def _sample_tree(root: int, peaks: dict, stop: threading.Event) -> None:
    """Until ``stop``: the peak summed RSS and PSS (KB) of ``root`` and its descendants."""
    while not stop.wait(0.1):  # (a scan of /proc takes CPU from what is timed: not faster)
        parents = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        stat = f.read()
                    parents[int(name)] = int(stat[stat.rfind(b")") + 2:].split()[1])
                except (OSError, ValueError, IndexError):
                    pass
        found, grew = {root}, True
        while grew:
            new = {p for p, pp in parents.items() if pp in found and p not in found}
            found |= new
            grew = bool(new)
        rss = pss = 0
        for pid in found:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Rss:"):
                            rss += int(line.split()[1])
                        elif line.startswith("Pss:"):
                            pss += int(line.split()[1])
            except (OSError, ValueError):
                pass
        peaks["rss"], peaks["pss"] = max(peaks["rss"], rss), max(peaks["pss"], pss)


def _child() -> None:
    t0 = time.perf_counter()
    sys.path.insert(0, ROOT)
    from streamsim.cli.main import main
    try:
        code = main(sys.argv[1:], supervise=True)  # (as the program runs it: the module's doc)
    finally:
        sys.stdout.flush()
        os.write(int(os.environ["TIMING_FD"]), f"{time.perf_counter() - t0!r}".encode())
    sys.exit(code)


if __name__ == "__main__":
    _child()
