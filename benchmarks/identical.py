"""Before/after check that a change leaves every report byte-identical (a speed change must).

Runs the same commands with two versions of streamsim, the working tree and a git ref (default
``main``), and compares what they print (stdout, stderr, exit code) and the files ``--out`` writes:

* ``check`` (text and ``--format json``, with and without fix costing) on every op log the test
  suite parses (collected by running the suite once with a pytest plugin that copies each parsed
  text, valid or not, so error messages are compared too), and on the benchmarks' random program
  (``--lines``, default 200,000; text and JSON with ``--no-fix-cost``, text with fix costing);
* the demo: ``run models/vllm_pp.py --variant regressed_49274 --out DIR`` (report.md, report.json,
  report.html, ...), and ``run --format json`` of every variant of the model.

    python benchmarks/identical.py [--base main] [--lines 200000] [--oplogs DIR]
    python benchmarks/identical.py --base REF --head-json-version 3   # against a base before JSON v4

Prints one line per difference and a summary; the exit status is 0 when everything is identical.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

DEMO = ("run", "models/vllm_pp.py", "--variant", "regressed_49274")
PLUGIN = '''
import hashlib, os
def pytest_configure(config):
    import streamsim.oplog as pkg
    from streamsim.oplog import read
    out, orig = os.environ["STREAMSIM_COLLECT_OPLOGS"], read.parse_oplog
    def parse_oplog(data, path="<oplog>", *a, **k):
        raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
        with open(os.path.join(out, hashlib.sha256(raw).hexdigest()[:20] + ".jsonl"), "wb") as f:
            f.write(raw)
        return orig(data, path, *a, **k)
    read.parse_oplog = pkg.parse_oplog = parse_oplog
'''


def collect_oplogs(folder: str) -> None:
    """Run the test suite (notebooks excepted) with a plugin that copies every parsed op log."""
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "collect_oplogs_plugin.py"), "w") as f:
            f.write(PLUGIN)
        env = {**os.environ, "STREAMSIM_COLLECT_OPLOGS": folder,
               "PYTHONPATH": os.pathsep.join([d, ROOT])}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "collect_oplogs_plugin",
                        "-p", "no:cacheprovider", "--ignore=tests/test_notebooks.py", "tests"],
                       cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)


def commands(oplogs: list[str], big: str | None, model_variants: list[str]) -> list[tuple]:
    """(name, argv, out dir or None) of every command compared."""
    cmds = []
    for path in oplogs:
        base = os.path.basename(path)
        for fmt in ("text", "json"):
            cmds.append((f"{base} {fmt}", ["check", path, "--format", fmt], None))
            cmds.append((f"{base} {fmt} no-fix-cost",
                         ["check", path, "--format", fmt, "--no-fix-cost"], None))
    if big:
        cmds.append(("random text", ["check", big, "--no-fix-cost"], None))
        cmds.append(("random json", ["check", big, "--no-fix-cost", "--format", "json"], None))
        cmds.append(("random text fix-cost", ["check", big], None))
    cmds.append(("demo", [*DEMO], "demo"))
    for v in model_variants:
        cmds.append((f"model {v}", ["run", "models/vllm_pp.py", "--variant", v, "--format",
                                    "json"], None))
    return cmds


def worker(tree: str, out: str, cmds: list[tuple]) -> None:
    """In this process (streamsim imported from ``tree``): run each command, store its outputs."""
    sys.path.insert(0, tree)
    from streamsim.cli.main import main
    os.chdir(ROOT)
    for i, (name, argv, outdir) in enumerate(cmds):
        folder = os.path.join(out, f"{i:05d}")
        os.makedirs(folder)
        shared = os.path.join(os.path.dirname(out), "outdir")  # one path for both versions
        extra = ["--out", shared] if outdir else []
        so, se = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            try:
                code = main([*argv, *extra])
            except SystemExit as e:
                code = e.code
            except Exception as e:  # a crash is an outcome to compare too
                code = f"crash: {type(e).__name__}: {e}"
        for part, text in (("stdout", so.getvalue()), ("stderr", se.getvalue()),
                           ("code", str(code))):
            with open(os.path.join(folder, part), "w", encoding="utf-8",
                      errors="surrogatepass") as f:
                f.write(text)
        if outdir:
            shutil.move(shared, os.path.join(folder, "outdir"))


def digests(folder: str) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="git ref to compare the working tree with")
    ap.add_argument("--lines", type=int, default=200_000, help="ops of the random program (0: none)")
    ap.add_argument("--oplogs", help="folder of op logs (collected from the tests when it is missing or empty; "
                    "default: a temporary one)")
    ap.add_argument("--head-json-version", type=int, metavar="N",
                    help="pass --json-version N to the working tree's commands that write JSON "
                    "(--format json, --out): e.g. 3, to hold its version 3 to a base whose "
                    "default JSON was version 3")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)  # TREE OUT CMDS-FILE
    args = ap.parse_args()
    if args.worker:
        import json
        tree, out, cmds_file = args.worker
        with open(cmds_file) as f:
            worker(tree, out, json.load(f))
        return
    import json
    from programs import write_random_program
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = os.path.join(tmp, "base-tree")
        os.makedirs(base_tree)
        archive = subprocess.run(["git", "archive", args.base], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", base_tree], input=archive, check=True)
        folder = args.oplogs or os.path.join(tmp, "oplogs")
        if not os.path.isdir(folder) or not os.listdir(folder):
            collect_oplogs(folder)
        logs = sorted(os.path.join(folder, n) for n in os.listdir(folder))
        big = None
        if args.lines:
            big = os.path.join(tmp, "random.jsonl")
            write_random_program(big, args.lines)
        sys.path.insert(0, ROOT)
        from streamsim.sim.model import load_model
        variants = list(load_model(os.path.join(ROOT, "models", "vllm_pp.py")).variants)
        cmds = commands(logs, big, variants)
        head_cmds = cmds if args.head_json_version is None else [
            (name, [*argv, "--json-version", str(args.head_json_version)]
             if "json" in argv or outdir else argv, outdir) for name, argv, outdir in cmds]
        results = {}
        for label, tree, these in (("base", base_tree, cmds), ("head", ROOT, head_cmds)):
            cmds_file = os.path.join(tmp, f"cmds-{label}.json")
            with open(cmds_file, "w") as f:
                json.dump(these, f)
            out = os.path.join(tmp, label)
            os.makedirs(out)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            subprocess.run([sys.executable, __file__, "--worker", tree, out, cmds_file],
                           check=True, env=env, cwd=ROOT)
            results[label] = digests(out)
        base, head = results["base"], results["head"]
        differ = sorted(k for k in base.keys() | head.keys() if base.get(k) != head.get(k))
        for k in differ:
            i = int(k.split(os.sep)[0])
            print(f"DIFFERS: {cmds[i][0]}: {k}")
        print(f"{len(cmds)} commands ({len(logs)} op logs from the tests, "
              f"{'a random program of %d ops, ' % args.lines if big else ''}the demo, "
              f"{len(variants)} model variants); {len(base)} outputs compared with "
              f"{args.base}: {'all identical' if not differ else f'{len(differ)} differ'}")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
