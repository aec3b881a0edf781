"""Regenerate docs/gallery.md's section of recorded real programs (``make gallery-recorded``).

Each program of ``RUNS`` is run on 2 gloo ranks on 127.0.0.1 under ``streamsim record`` (with
tests/record/ranks.py, the recorder tests' launcher: a free port, every rank killed after a
timeout), its log is checked, and the lines between the page's ``<!-- recorded: begin -->`` and
``<!-- recorded: end -->`` are rewritten: a verdict table, then each run's root causes and fixes
as ``streamsim check`` prints them. The programs are the ones tests/record checks.

This is a target of its own, not part of ``make gallery``: it needs torch and takes a minute or
more of 2-rank runs, and a recording's manifest/latent counts follow the run's real timing, so
unlike the compare tables the section is not byte-stable and no test compares it with a fresh
run (tests/record checks the same verdicts). Run it from the repository root.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from streamsim import check_oplog, render_text

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "gallery.md"
SECTION = re.compile(r"(<!-- recorded: begin -->\n)(.*?)(<!-- recorded: end -->)", re.S)
EXAMPLE, LIBRARIES = "examples/pp_send_overwrite.py", "tests/record/programs/libraries.py"
TIMEOUT = 180  # seconds a run's ranks may take (a loaded machine is slow to start torch)

# (name, what it is, program and arguments, drop inferred waits from the log)
RUNS = [
    ("vllm_shaped_racy", "the vLLM-#49274-shaped example: the next forward rewrites the buffer "
     "before its isend is waited", (EXAMPLE, "--steps", "4"), False),
    ("vllm_shaped_fixed", "the same, the previous send waited first (`--fixed`)",
     (EXAMPLE, "--steps", "4", "--fixed"), False),
    ("pipelining_and_ddp", "GPipe, 1F1B, Interleaved1F1B (torch.distributed.pipelining), then "
     "DDP: one program, one log", (LIBRARIES,), False),
    ("gpipe_deferred_waits", "GPipe with the schedule's p2p waits deferred to the step's end",
     (LIBRARIES, "--defer"), False),
    ("interleaved_late_forward_wait", "Interleaved1F1B with each forward's receive waited after "
     "that forward", (LIBRARIES, "--defer-interleaved"), False),
    ("ddp_without_inferred_waits", "the pipelining_and_ddp log without its inferred waits (DDP's "
     "reducer waits in C++)", (LIBRARIES,), True),
]


def record(program: tuple[str, ...], out: Path) -> str:
    """``streamsim record -o OUT -- python ranks.py 2 TIMEOUT PROGRAM``: the program's stdout."""
    cmd = [sys.executable, "-m", "streamsim", "record", "-o", str(out), "--", sys.executable,
           "tests/record/ranks.py", "2", str(TIMEOUT), *program]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT + 60)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(program)}: exit code {p.returncode}\n{p.stderr}")
    return p.stdout


def verdict(f) -> str:
    if f.deadlock is not None:
        return "DEADLOCK"
    if not f.hazards:
        return "clean"
    return "MANIFEST" if any(h.manifest for h in f.hazards) else "LATENT"


def section(folder: Path) -> str:
    from streamsim.record.works import is_inferred
    programs = sorted({r[2] for r in RUNS})
    logs = {p: folder / f"run{i}.jsonl" for i, p in enumerate(programs)}
    with ThreadPoolExecutor(2) as pool:  # (two runs of 2 ranks at a time: a 2-core machine)
        stdout = dict(zip(programs, pool.map(lambda p: record(p, logs[p]), programs)))
    rows, details = [], []
    for name, what, program, drop_inferred in RUNS:
        log = logs[program]
        if drop_inferred:
            text = log.read_text()
            log = folder / f"{name}.jsonl"
            log.write_text("".join(x + "\n" for x in text.splitlines() if not is_inferred(x)))
        report = check_oplog(log, fix_cost=False)
        f = report.findings
        manifest = sum(h.manifest for h in f.hazards)
        truth = re.search(r"corrupted steps: \[[\d, ]*\] of \d+", stdout[program])
        rows.append((name, verdict(f), len(f.root_causes), len(f.hazards), manifest,
                     len(f.hazards) - manifest, "yes" if f.deadlock else "no",
                     f"receiver: {truth[0]}" if truth and not drop_inferred else "-"))
        text = render_text(report).splitlines()
        kept = [x for x in text[1:] if re.match(r"\[\d+\] |    fix: ", x)]
        summary = text[0].split(": ", 1)[1]
        command = " ".join(program)
        details.append(f"**{name}**: {what}. `{command}`"
                       + (" (inferred waits dropped)" if drop_inferred else "") + f": {summary}\n")
        if kept:
            details.append("```text\n" + "\n".join(kept[:8])
                           + ("\n..." if len(kept) > 8 else "") + "\n```\n")
    head = ("run", "verdict", "root causes", "hazards", "manifest", "latent", "deadlock",
            "what the program saw")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    table = ["  ".join(str(c).ljust(w) if i in (0, 7) else str(c).rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in [head, *rows]]
    table.insert(1, "  ".join("-" * w for w in widths))
    return "```text\n" + "\n".join(table) + "\n```\n\n" + "\n".join(details) + "\n"


def regenerate(page: Path = PAGE) -> None:
    text = page.read_text(encoding="utf-8")
    if not SECTION.search(text):
        raise SystemExit(f"{page}: no <!-- recorded: begin --> ... <!-- recorded: end --> section")
    with tempfile.TemporaryDirectory(prefix="streamsim-gallery-") as d:
        body = section(Path(d))
    page.write_text(SECTION.sub(lambda m: m.group(1) + body + m.group(3), text), encoding="utf-8")


if __name__ == "__main__":
    regenerate()
    print(f"regenerated the recorded section of {PAGE.relative_to(ROOT)}", file=sys.stderr)
