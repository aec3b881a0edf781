"""The CUDA recorder on a real GPU: a 1-rank NCCL async ``all_reduce``, and a ``batch_isend_irecv``
of a send to itself and a receive from itself, each racy and fixed, recorded and checked, with
PyTorch's CUDA Sanitizer (CSAN) beside it as a live oracle.

    python benchmarks/gpu_record_check.py         # needs one CUDA GPU and torch with NCCL

NOT run in the test suite and, as of writing, NOT yet run on a GPU at all (the machine this was
written on has none): the CUDA hooks are tested only by firing them with integers
(tests/record/test_c10d_cuda_merge.py). What it does, for each of ``racy`` and ``fixed``:

1. in a fresh process (``--child VARIANT``): start a 1-rank NCCL group, record with
   ``streamsim.record``, run ``work = all_reduce(x, async_op=True)`` (``batch_*``: ``works =
   batch_isend_irecv([isend x to rank 0, irecv y from rank 0])``, one coalesced NCCL group),
   then ``x.mul_(2)`` on the current stream, racy before the wait, fixed after it;
2. in another fresh process, the same program under CSAN (``TORCH_CUDA_SANITIZE=1``), which
   raises on the race it sees;
3. ``streamsim check`` of the recorded log.

It prints one row per variant: streamsim's verdict, CSAN's, and whether they agree (racy: a
hazard and a CSAN error; fixed: neither); for the batch, also whether the log has the batch
(``batch`` on both lines, docs/recording.md) and no deadlock or unwaited handle. Exit code 0 when both agree on both, 1 otherwise, 2
without a GPU.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile


def child(variant: str, out: str | None) -> None:
    import torch
    import torch.distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)
    torch.cuda.set_device(0)
    x = torch.ones(1 << 24, device="cuda")
    y = torch.zeros(1 << 24, device="cuda")

    def program() -> None:
        if variant.startswith("batch"):
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, 0),
                                            dist.P2POp(dist.irecv, y, 0)])
        else:
            works = [dist.all_reduce(x, async_op=True)]
        if variant.endswith("fixed"):
            for work in works:
                work.wait()
        x.mul_(2)
        if variant.endswith("racy"):
            for work in works:
                work.wait()
        torch.cuda.synchronize()

    if out is None:
        program()  # (under CSAN: it raises on the race)
    else:
        import streamsim
        with streamsim.record(out):
            program()
    dist.destroy_process_group()


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        return 0
    import torch
    if not torch.cuda.is_available():
        print("gpu_record_check: no CUDA GPU here: nothing checked")
        return 2
    import streamsim
    from streamsim.analysis.liveness import HANDLE_NEVER_WAITED
    agree = True
    with tempfile.TemporaryDirectory() as d:
        for variant in ("racy", "fixed", "batch_racy", "batch_fixed"):
            log = os.path.join(d, f"{variant}.jsonl")
            subprocess.run([sys.executable, __file__, "--child", variant, log], check=True)
            report = streamsim.check_oplog(log)
            ours = bool(report.findings.hazards)
            csan = subprocess.run([sys.executable, __file__, "--child", variant],
                                  env=dict(os.environ, TORCH_CUDA_SANITIZE="1"),
                                  capture_output=True, text=True)
            theirs = csan.returncode != 0 and "CSAN" in csan.stderr
            expected = variant.endswith("racy")
            ok = ours == theirs == expected
            if variant.startswith("batch"):
                with open(log) as f:
                    sent = [line for line in f if '"isend"' in line or '"irecv"' in line]
                batched = len(sent) == 2 and all('"batch"' in line for line in sent)
                whole = report.findings.deadlock is None and not any(
                    w.kind == HANDLE_NEVER_WAITED for w in report.findings.warnings)
                print(f"{variant}: recorded as one batch: {batched}; no deadlock or unwaited "
                      f"handle: {whole}")
                ok &= batched and whole
            agree &= ok
            print(f"{variant:11}  streamsim: {'hazard' if ours else 'clean':6}  "
                  f"CSAN: {'error' if theirs else 'clean':5}  {'agree' if ok else 'DISAGREE'}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
