"""Run ``N`` ranks of a torch.distributed program on 127.0.0.1 (the recorder tests' launcher,
lighter than torchrun): ``python ranks.py N TIMEOUT SCRIPT ARGS``. Each rank gets RANK,
WORLD_SIZE, MASTER_ADDR, a MASTER_PORT (``RANKS_MASTER_PORT`` when set: the caller's, which
runs several of these at once, each on a port of its own; else a free one) and the loopback
interface for gloo; after TIMEOUT seconds every rank still running is killed. Exit code: the
first nonzero rank's, else 0."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    n, timeout, script, *args = sys.argv[1:]
    port = int(os.environ.get("RANKS_MASTER_PORT") or free_port())
    procs = []
    for r in range(int(n)):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=n,
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, script, *args], env=env))
    deadline = time.monotonic() + float(timeout)
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.kill()
            print(f"ranks.py: killed after {timeout} s", file=sys.stderr)
            codes.append(124)
            for q in procs:
                q.wait()
    return next((c for c in codes if c), 0)


if __name__ == "__main__":
    sys.exit(main())
