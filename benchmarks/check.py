"""Benchmark of ``streamsim check`` as a user runs it: against PyTorch's CUDA Sanitizer, start-up,
memory, and where the time goes.

    python benchmarks/check.py                      # all of the below at their default sizes
    python benchmarks/check.py --vs-csan 200000     # ops/s beside CSAN's EventHandler (targets)
    python benchmarks/check.py --startup            # check of a one-line log
    python benchmarks/check.py --memory 1000000     # peak RSS per op-log line
    python benchmarks/check.py --stages 200000      # CPU per stage, and the Python-object floor
    python benchmarks/check.py --reader 200000      # the op-log reader: lines the Python one read
    python benchmarks/check.py --replay 200000      # the replay: compiled or the engine, and CPU
    python benchmarks/check.py --jobs-ab 100000 200000 model  # default check/run, --jobs 1 vs 2

The op log is the random stream program of ``benchmarks/programs.py``. ``--vs-csan`` times, in
interleaved rounds (best of ``--repeat``, median beside it), each a fresh process: ``streamsim
check --no-fix-cost`` writing the text report and the JSON report to a file (start-up, parsing,
replay, analysis, report), and CSAN's ``EventHandler`` driven in-process over the same ops
(``csan_driver.py``, CPU PyTorch 2.13.0 in a venv of its own: ``--csan-python``, else
``benchmarks/.csan-venv``, made on first use; never a dependency of streamsim) with its stack
capture stubbed out and as shipped. CSAN does not re-simulate anything, so the ratios compare
``--no-fix-cost``; the default ``check`` (fixes costed by re-simulation, its re-runs in ``--jobs``
processes: by default one per CPU, at most 4) is timed beside them, and with ``--jobs 1`` (one
core, as CSAN runs: the like-for-like figure), best of ``--repeat`` alternating rounds where
compiled, once in pure Python (a quarter minute a run). ``--jobs-ab`` times the default check with
``--jobs 1`` and ``--jobs 2`` in alternating rounds: wall, CPU (the workers' included) and the peak
RSS and PSS of the process and its workers together.
Where the compiled core is built (docs/native.md), every streamsim figure is taken on both paths
in the same run (``[native]``, and ``[python]`` with ``STREAMSIM_NATIVE=0``), interleaved.
Targets (issue 26, which replaced issue 18's 0.5x/1.5x): ``check --no-fix-cost`` >= 3x CSAN stubbed
(JSON and text), the default ``check`` (fixes costed) >= 2x CSAN stubbed, a one-line log checked in
<= 0.1 s whole process, <= 300 B of peak RSS per line at 1M lines (CSAN as shipped is shown, with
no target). Prints the figures; exits 0 whatever they are (a benchmark, not a test).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from programs import (write_attention_program, write_random_program,  # noqa: E402
                      write_recorded_program, write_threaded_program)
from timing import compile_bytecode, time_command  # noqa: E402

TARGET_STUBBED, TARGET_DEFAULT = 3.0, 2.0  # x CSAN stubbed: --no-fix-cost, and fixes costed
TARGET_HAZARD_FREE = 5.0  # x CSAN stubbed: a hazard-free log of as many ops, --no-fix-cost
TARGET_STARTUP_S = 0.1
TARGET_KB_PER_LINE = 0.3
CSAN_VENV = os.path.join(HERE, ".csan-venv")


def csan_python(given: str | None) -> str:
    """A Python with CPU PyTorch 2.13.0: ``given``, else benchmarks/.csan-venv (made if missing)."""
    if given:
        return given
    py = os.path.join(CSAN_VENV, "bin", "python")
    if not os.path.exists(py):
        print(f"making {CSAN_VENV} with torch==2.13.0 (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", CSAN_VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "torch==2.13.0"], check=True)
    return py


def csan(python: str, log: str, mode: str) -> dict:
    out = subprocess.run([python, os.path.join(HERE, "csan_driver.py"), log, mode], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def paths() -> dict[str, dict[str, str]]:
    """The paths to time, each with the environment that selects it: the compiled core where it
    is built (docs/native.md) and the pure-Python reference (``STREAMSIM_NATIVE=0``)."""
    sys.path.insert(0, ROOT)
    from streamsim import native
    got = {"python": {"STREAMSIM_NATIVE": "0"}}
    if native.built():
        got = {"native": {"STREAMSIM_NATIVE": "1"}, **got}
    return got


def vs_csan(n: int, repeat: int, python: str, tmp: str) -> None:
    log = os.path.join(tmp, f"random{n}.jsonl")
    write_random_program(log, n)
    report = os.path.join(tmp, "report")
    envs = paths()
    runs: dict[str, list[float]] = {f"{k} {p}": [] for p in envs for k in ("text", "json")}
    runs.update(stubbed=[], shipped=[])
    hazards = errors = None
    for _ in range(repeat):  # interleaved: a slow period of the machine hits every contender
        for p, env in envs.items():
            runs[f"text {p}"].append(time_command(["check", log, "--no-fix-cost"], report,
                                                  env=env)["wall"])
            with open(report) as f:
                hazards = f.readline().split(" of ")[1].split(" data")[0]
            runs[f"json {p}"].append(time_command(["check", log, "--no-fix-cost", "--format",
                                                   "json"], report, env=env)["wall"])
        for mode in ("stubbed", "shipped"):
            r = csan(python, log, mode)
            runs[mode].append(r["seconds"])
            errors = r["errors"]
    best = {k: min(v) for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"random program: {n:,} ops (8 streams, 64 events, 1,000 buffers, 1 sync op in 7); "
          f"streamsim finds {hazards} hazards, CSAN reports {errors:,} unsynchronized accesses")
    print(f"ops/s, best of {repeat} interleaved rounds (median):")
    label = {"text": "streamsim check --no-fix-cost (text report), whole process",
             "json": "streamsim check --no-fix-cost --format json, whole process",
             "stubbed": "CSAN EventHandler, stack capture stubbed, in-process",
             "shipped": "CSAN EventHandler as shipped (stack capture on), in-process"}
    for k in runs:
        fmt, _, p = k.partition(" ")
        name = f"{label[fmt]}{f' [{p}]' if p else ''}"
        print(f"  {name:71} {n / best[k]:>9,.0f} ({n / med[k]:>7,.0f})  {best[k]:6.2f} s")
    print(f"ratios, streamsim / CSAN ops/s, best runs (target: >= {TARGET_STUBBED}x stubbed; as "
          "shipped for reference):")
    for k in runs:
        if k in ("stubbed", "shipped"):
            continue
        a, b = best["stubbed"] / best[k], best["shipped"] / best[k]
        print(f"  {k:11}: {a:.2f}x stubbed ({'met' if a >= TARGET_STUBBED else 'MISSED'}), "
              f"{b:.2f}x as shipped")
    if len(envs) > 1:
        for fmt in ("text", "json"):
            print(f"  {fmt} native / python: {best[f'{fmt} python'] / best[f'{fmt} native']:.2f}x")
    walls = {}
    jobs = default_jobs()
    for p, env in envs.items():  # (the compiled path best of ``repeat`` alternating rounds, as
        # the figures above; the pure-Python one once: its default check takes a quarter minute)
        rounds = repeat if p == "native" else 1
        ones, ts = [], []
        for _ in range(rounds):
            ones.append(time_command(["check", log, "--jobs", "1"], report, env=env)["wall"])
            ts.append(time_command(["check", log], report, env=env)["wall"])
        one, t = min(ones), min(ts)
        walls[p] = t
        with open(report) as f:
            costed = sum(1 for line in f if "fix cost (re-simulated" in line)
        how = "once" if rounds == 1 else f"best of {rounds} alternating rounds"
        med = "" if rounds == 1 else f" (median {statistics.median(ts):.2f} s)"
        print(f"default check (fixes costed by re-simulation), text, {how} [{p}], default --jobs "
              f"(here {jobs} processes; CSAN uses one core): {t:.2f} s{med} "
              f"({n / t:,.0f} ops/s; {costed} root causes costed one by one in the text; "
              f"{best['stubbed'] / t:.2f}x CSAN stubbed, target >= {TARGET_DEFAULT}x: "
              f"{'met' if best['stubbed'] / t >= TARGET_DEFAULT else 'MISSED'}); "
              f"--jobs 1 (one core, like for like): {one:.2f} s, "
              f"{best['stubbed'] / one:.2f}x CSAN stubbed")
    if len(walls) > 1:
        print(f"  default check native / python: {walls['python'] / walls['native']:.2f}x")
    hazard_free(n, repeat, python, tmp, envs)


def hazard_free(n: int, repeat: int, python: str, tmp: str, envs: dict) -> None:
    """The same program with each stream's kernels on its own buffers only (no foreign buffer):
    no hazard, so what is timed is reading, replaying and the HB pass (issue 26: >= 5x CSAN)."""
    log = os.path.join(tmp, f"clean{n}.jsonl")
    write_random_program(log, n, foreign=0.0)
    report = os.path.join(tmp, "report")
    runs: dict[str, list[float]] = {f"{k} {p}": [] for p in envs for k in ("text", "json")}
    runs["stubbed"] = []
    for _ in range(repeat):  # interleaved, as above
        for p, env in envs.items():
            for k, fmt in (("text", []), ("json", ["--format", "json"])):
                runs[f"{k} {p}"].append(time_command(["check", log, "--no-fix-cost", *fmt],
                                                     report, env=env)["wall"])
        r = csan(python, log, "stubbed")
        runs["stubbed"].append(r["seconds"])
    with open(report) as f:  # (the last run's, JSON: what is timed must be hazard-free)
        found = json.load(f)
    if found["hazards"] or r["errors"]:
        raise SystemExit(f"hazard-free program: streamsim found {len(found['hazards'])} "
                         f"hazards, CSAN {r['errors']}: not the workload this target is for")
    head = found["summary"]
    best = {k: min(v) for k, v in runs.items()}
    print(f"hazard-free program ({n:,} ops, no foreign buffer): streamsim says {head!r}; CSAN "
          f"reports {r['errors']:,}; best of {repeat} interleaved: CSAN stubbed "
          f"{best['stubbed']:.2f} s")
    for k in runs:
        if k != "stubbed":
            a = best["stubbed"] / best[k]
            print(f"  {k:11}: {best[k]:.2f} s, {a:.2f}x CSAN stubbed (target >= "
                  f"{TARGET_HAZARD_FREE}x: {'met' if a >= TARGET_HAZARD_FREE else 'MISSED'})")


def default_jobs() -> int:
    """The processes a default ``check`` costs fixes in here, when it has that many re-runs
    (``streamsim.pipeline.workers.default_jobs``)."""
    sys.path.insert(0, ROOT)
    from streamsim.pipeline.workers import MAX_DEFAULT_JOBS, cpus
    return min(cpus(), MAX_DEFAULT_JOBS)


# benchmarks/split.py's model run (its stage timers run in one process: it times --jobs 1 only)
MODEL_RUN = ["run", "models/vllm_pp.py", "--variant", "regressed_49274", "--set", "requests=32",
             "--set", "decode_steps=256", "--set", "tp=2"]


def jobs_ab(sizes: list, repeat: int, tmp: str) -> None:
    """The default check (fixes costed) with ``--jobs 1`` and ``--jobs 2``, alternating rounds:
    wall, CPU (workers included) and the peak RSS/PSS of the process tree; best and median.
    ``sizes``: lines of random programs, or ``"model"`` for split.py's model run."""
    for n in sizes:
        if n == "model":
            argv, what = MODEL_RUN, "default `" + " ".join(["streamsim", *MODEL_RUN]) + "`"
        else:
            log = os.path.join(tmp, f"random{n}.jsonl")
            write_random_program(log, n)
            argv, what = ["check", log], f"default check of the {n:,}-line random program"
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(repeat):
            for jobs in runs:
                runs[jobs].append(time_command([*argv, "--jobs", str(jobs)],
                                               os.path.join(tmp, f"report{jobs}"), tree=True))
        same = open(os.path.join(tmp, "report1"), "rb").read() == \
            open(os.path.join(tmp, "report2"), "rb").read()
        print(f"{what}, --jobs 1 vs 2, best (median) of {repeat} alternating rounds; reports "
              f"{'identical' if same else 'DIFFER'}:")
        for jobs, got in runs.items():
            def fig(key: str, scale: float = 1.0) -> str:
                vals = [r[key] * scale for r in got]
                return f"{min(vals):6.2f} ({statistics.median(vals):6.2f})"
            mb = 1 / 1024
            print(f"  --jobs {jobs}: wall {fig('wall')} s, CPU {fig('cpu')} s, peak RSS of the "
                  f"process tree {fig('tree_rss_kb', mb)} MB, PSS {fig('tree_pss_kb', mb)} MB")
        w1 = min(r["wall"] for r in runs[1])
        w2 = min(r["wall"] for r in runs[2])
        print(f"  best wall --jobs 1 / --jobs 2: {w1 / w2:.2f}x")


def startup(repeat: int, tmp: str) -> None:
    log = os.path.join(tmp, "one.jsonl")
    with open(log, "w") as f:
        f.write('{"op": "launch", "name": "k", "writes": ["x"]}\n')
    # as a user runs it (`python -m streamsim`: supervised, a forked child doing the work, which
    # main(argv) in benchmarks/timing.py is not), in turns with a bare interpreter
    walls, bares = [], []
    for _ in range(repeat):
        walls.append(_wall([sys.executable, "-m", "streamsim", "check", log]))
        bares.append(_wall([sys.executable, "-c", "pass"]))
    probe = ("import sys; sys.argv = ['streamsim', 'check', %r]; from streamsim.cli.main import main;"
             " main(sys.argv[1:]); heavy = ('networkx', 'matplotlib', 'numpy', 'simpy', 'greenlet',"
             " 'tqdm', 'orjson', 'msgspec'); print(' '.join(m for m in heavy if m in sys.modules),"
             " file=sys.stderr)" % log)
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            cwd=ROOT).stderr.strip()
    bare, best = min(bares), min(walls)
    print(f"start-up: check of a one-line log, whole process: best {best:.3f} s, median "
          f"{statistics.median(walls):.3f} s of {repeat} (target <= {TARGET_STARTUP_S} s: "
          f"{'met' if best <= TARGET_STARTUP_S else 'MISSED'}); a bare `python -c pass` "
          f"{bare:.3f} s; imported: {loaded or 'none of the heavy modules'}")


def _wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def memory(n: int, tmp: str) -> None:
    log = os.path.join(tmp, f"random{n}.jsonl")
    write_random_program(log, n)
    for args in (["--no-fix-cost"], ["--no-fix-cost", "--format", "json"]):
        for p, env in paths().items():
            r = time_command(["check", log, *args], os.path.join(tmp, "report"), env=env)
            kb = r["rss_kb"] / n
            print(f"memory [{p}]: check {' '.join(args)} of {n:,} lines: peak RSS "
                  f"{r['rss_kb'] / 1024:,.0f} MB = {kb:.2f} KB/line (target <= "
                  f"{TARGET_KB_PER_LINE}: {'met' if kb <= TARGET_KB_PER_LINE else 'MISSED'}); "
                  f"{r['wall']:.1f} s")


def stages(n: int, tmp: str) -> None:
    """CPU seconds of each stage in this process, and the floor of Python object work."""
    sys.path.insert(0, ROOT)
    import gc
    log = os.path.join(tmp, f"random{n}.jsonl")
    write_random_program(log, n)
    T = time.process_time
    t0 = T()
    from streamsim.analysis.checks import analyse
    from streamsim.analysis.metrics import compute_metrics
    from streamsim.gcpause import gc_paused
    from streamsim.oplog import load_oplog, simulate_oplog
    from streamsim.report.jsonout import dumps_json
    from streamsim.report.report import Report, render_text
    from streamsim.sim.records import Rec
    t = {"import": T() - t0}
    with gc_paused():
        t0 = T()
        oplog = load_oplog(log)
        t["parse"], t0 = T() - t0, T()
        trace = simulate_oplog(oplog)
        t["replay"], t0 = T() - t0, T()
        findings = analyse(trace)
        t["analyse"], t0 = T() - t0, T()
        report = Report(source=log, trace=trace, findings=findings,
                        metrics=compute_metrics(trace))
        t["metrics"], t0 = T() - t0, T()
        render_text(report)
        t["text report"], t0 = T() - t0, T()
        dumps_json(report)
        t["JSON report"] = T() - t0
        # Floors: what merely making and reading the records costs, with no logic at all.
        with open(log, "rb") as f:
            lines = f.read().splitlines()
        t0 = T()
        decoded = [json.loads(x) for x in lines]
        floor_parse = T() - t0
        del decoded
        ops = trace.ops
        t0 = T()
        made = [Rec(o.id, o.agent, o.index, o.kind, o.name, o.enqueued, o.step, o.location,
                    o.accesses, {}) for o in ops]
        floor_make = T() - t0
        del made
        t0 = T()
        for o in ops:
            (o.id, o.agent, o.index, o.kind, o.start_seq, o.end_seq, o.issuer, o.after, o.joins)
            for acc in o.accesses:
                (acc.view.rank, acc.view.buffer, acc.view.offset, acc.view.nbytes, acc.mode)
        floor_read = T() - t0
    gc.collect()
    total = sum(v for k, v in t.items() if k != "JSON report")
    print(f"stages of check (text) on {n:,} lines = {len(trace.ops):,} trace ops, CPU s in one "
          f"process: " + ", ".join(f"{k} {v:.2f}" for k, v in t.items())
          + f"; total (text) {total:.2f}")
    floor = floor_parse + floor_make + floor_read
    print(f"Python object floor: json.loads of every line {floor_parse:.2f} s, making the trace's "
          f"{len(ops):,} records {floor_make:.2f} s, reading their fields once {floor_read:.2f} s: "
          f"{floor:.2f} s = {floor / total:.0%} of the total (what records made and read cost "
          f"before any logic runs)")


def reader(n: int, repeat: int, tmp: str) -> None:
    """Parse CPU of op logs on both paths, and how many of their lines the compiled reader lexed
    from their bytes (streamsim/native/_lex.pxi; the others msgspec decodes) and how many it
    handed to the Python reader (issue 26: a recorded log should never drop to the slow path)."""
    sys.path.insert(0, ROOT)
    from streamsim import native
    from streamsim.gcpause import gc_paused
    from streamsim.oplog import read
    random_log, recorded_log, attention_log = (os.path.join(tmp, f"{k}{n}.jsonl")
                                               for k in ("random", "rec", "attention"))
    write_random_program(random_log, n)
    with open(random_log) as f, open(random_log + ".site", "w") as g:
        for i, text in enumerate(f):  # the same program, every line with a recorder's site and t
            g.write(text[:-2] + f', "site": "/src/prog.py:{i % 97} fn", "t": {i * 1.5}}}\n')
    write_recorded_program(recorded_log, n)
    write_attention_program(attention_log, n)
    logs = {"random program": random_log, "random program, recorder's site and t":
            random_log + ".site", "recorded-like pipeline (alloc, host, isend/irecv, wait, free)":
            recorded_log, "recorded-like attention (q, k, v as strided views of qkv)":
            attention_log}
    take = read._Parser.take
    handed = [0]

    def counted(self, *args):
        handed[0] += 1
        return take(self, *args)
    print(f"op-log reader, parse CPU best of {repeat} alternating (median), gc paused:")
    for label, log in logs.items():
        times: dict[str, list[float]] = {"native": [], "python": []}
        for _ in range(repeat):
            for p in times:
                os.environ["STREAMSIM_NATIVE"] = "1" if p == "native" else "0"
                handed[0] = 0
                read._Parser.take = counted
                try:
                    with gc_paused():
                        t0 = time.process_time()
                        log_ = read.load_oplog(log)
                        times[p].append(time.process_time() - t0)
                finally:
                    read._Parser.take = take
                if p == "native":
                    by_python = handed[0]
                    decoder = native.decoder()
                    lexed = decoder.lexed_lines() if decoder is not None else 0
        os.environ.pop("STREAMSIM_NATIVE", None)
        lines = len(log_.lines)
        best = {p: min(v) for p, v in times.items() if v}
        med = {p: statistics.median(v) for p, v in times.items() if v}
        print(f"  {label}: {lines:,} lines; the compiled reader lexed {lexed:,} "
              f"({lexed / max(lines, 1):.0%}) from their bytes and handed {by_python:,} "
              f"({by_python / max(lines, 1):.0%}) to the Python reader"
              + (f"; native {best['native']:.2f} s ({med['native']:.2f}), python "
                 f"{best['python']:.2f} s ({med['python']:.2f}): "
                 f"{best['python'] / best['native']:.2f}x" if native.decoder() is not None or
                 "_decode" in native.modules() else " (not built)"))


def replay(n: int, repeat: int, tmp: str) -> None:
    """Replay CPU of the reader's three logs (and a default check's fix re-run of the random
    program) on the compiled replay and on the engine, and whether the compiled replay took each
    (issue 26: a recorded log should not drop to the engine)."""
    sys.path.insert(0, ROOT)
    from streamsim import native
    from streamsim.analysis.checks import analyse, distinct_fixes
    from streamsim.gcpause import gc_paused
    from streamsim.oplog import load_oplog, replay as oplog_replay, simulate_oplog
    from streamsim.sim.inject import key_fixes
    random_log, recorded_log, threaded_log = (os.path.join(tmp, f"{k}{n}.jsonl")
                                              for k in ("random", "rec", "threads"))
    write_random_program(random_log, n)
    write_recorded_program(recorded_log, n)
    write_threaded_program(threaded_log, n)
    print(f"op-log replay, CPU best of {repeat} alternating (median), gc paused:")
    for label, log in {"random program": random_log,
                       "recorded-like pipeline (gloo isend/irecv, waits, allocations)":
                       recorded_log, "random program, all its fixes (a fix re-run)":
                       random_log, "two threads of a rank (a loader's put, the loop's get)":
                       threaded_log}.items():
        oplog = load_oplog(log)
        fixes = ()
        if "fix" in label:
            os.environ["STREAMSIM_NATIVE"] = "1"
            trace = simulate_oplog(oplog)
            fixes = key_fixes(trace, distinct_fixes(analyse(trace).hazards))
            del trace
        os.environ["STREAMSIM_NATIVE"] = "1"
        compiled = native.replayer() is not None and oplog_replay._replayed_natively(
            oplog, None, 0.0, 5_000_000, 1e12, fixes) is not None
        times: dict[str, list[float]] = {"native": [], "python": []}
        for _ in range(repeat):
            for p in times:
                os.environ["STREAMSIM_NATIVE"] = "1" if p == "native" else "0"
                with gc_paused():
                    t0 = time.process_time()
                    trace = simulate_oplog(oplog, fixes=fixes)
                    times[p].append(time.process_time() - t0)
                ops = len(trace.ops)
                del trace
        os.environ.pop("STREAMSIM_NATIVE", None)
        best = {p: min(v) for p, v in times.items()}
        med = {p: statistics.median(v) for p, v in times.items()}
        print(f"  {label}: {len(oplog.lines):,} lines, {ops:,} ops"
              + (f" ({len(fixes):,} fixes)" if fixes else "")
              + f"; {'the compiled replay' if compiled else 'the engine (not covered)'}: "
              f"native {best['native']:.2f} s ({med['native']:.2f}), engine "
              f"{best['python']:.2f} s ({med['python']:.2f}): "
              f"{best['python'] / best['native']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vs-csan", type=int, metavar="N", help="ops of the random program")
    ap.add_argument("--startup", action="store_true")
    ap.add_argument("--reader", type=int, metavar="N", help="lines of the reader's logs")
    ap.add_argument("--replay", type=int, metavar="N", help="lines of the replay's logs")
    ap.add_argument("--memory", type=int, metavar="N", help="lines of the random program")
    ap.add_argument("--stages", type=int, metavar="N", help="lines of the random program")
    ap.add_argument("--jobs-ab", nargs="+", metavar="N", type=lambda x: x if x == "model"
                    else int(x), help="lines of the random programs to check by default with "
                    "--jobs 1 and --jobs 2 (\"model\": split.py's model run)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--csan-python", help="a Python with torch==2.13.0 (default: "
                    "benchmarks/.csan-venv, made when missing)")
    args = ap.parse_args()
    everything = not (args.vs_csan or args.startup or args.memory or args.stages or args.reader
                      or args.replay or args.jobs_ab)
    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        if args.vs_csan or everything:
            vs_csan(args.vs_csan or 200_000, args.repeat, csan_python(args.csan_python), tmp)
        if args.startup or everything:
            startup(max(args.repeat, 10), tmp)
        if args.memory or everything:
            memory(args.memory or 1_000_000, tmp)
        if args.stages or everything:
            stages(args.stages or 200_000, tmp)
        if args.reader or everything:
            reader(args.reader or 200_000, args.repeat, tmp)
        if args.replay or everything:
            replay(args.replay or 200_000, args.repeat, tmp)
        if args.jobs_ab or everything:
            jobs_ab(args.jobs_ab or [100_000, 200_000], args.repeat, tmp)


if __name__ == "__main__":
    main()
