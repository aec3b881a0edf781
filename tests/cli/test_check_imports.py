"""`check` imports only what it uses (issue 26): a check that draws no graph and writes no
picture (no --out, no stall) does not import networkx or matplotlib, whose imports were a third
of a one-line log's whole-process time (networkx alone 60 ms of 190)."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("networkx", "matplotlib")


def _imported_after(args: list[str], tmp_path) -> set[str]:
    code = ("import sys\nfrom streamsim.cli.main import main\n"
            f"code = main({args!r})\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    return set(eval(out.stderr.strip().splitlines()[-1]))


def test_a_check_with_a_hazard_and_its_fix_cost_imports_no_graph_or_plot_library(tmp_path):
    (tmp_path / "log.jsonl").write_text(
        '{"op":"launch","stream":"side","reads":["x"]}\n{"op":"launch","writes":["x"]}\n')
    assert _imported_after(["check", "log.jsonl"], tmp_path) == set()
    assert _imported_after(["check", "log.jsonl", "--format", "json"], tmp_path) == set()


def test_a_deadlock_still_imports_networkx_for_its_cycle(tmp_path):
    """(The test above can fail: a stall's wait-for cycle is found with networkx.)"""
    (tmp_path / "dead.jsonl").write_text(
        '{"op":"send_object","peer":1,"nbytes":100000000}\n'  # (above gloo's eager threshold)
        '{"op":"send_object","rank":1,"peer":0,"nbytes":100000000}\n'
        '{"op":"recv_object","peer":1}\n{"op":"recv_object","rank":1,"peer":0}\n')
    assert "networkx" in _imported_after(["check", "dead.jsonl"], tmp_path)


# What a check of a short clean log, text report, never uses (issue 26: a one-line log checked in
# <= 0.1 s, whole process): libraries, stages, and the reader's fast paths (a log under
# streamsim.oplog.read.SMALL_LOG is read by the checker alone)
UNUSED_BY_A_SHORT_CHECK = (
    "networkx", "matplotlib", "torch", "numpy", "msgspec", "ctypes", "orjson",
    "streamsim.explore", "streamsim.record", "streamsim.report.html",
    "streamsim.report.markdown", "streamsim.report.outputs", "streamsim.report.jsonout",
    "streamsim.report.atomic", "streamsim.oplog.write", "streamsim.oplog.fastpath",
    "streamsim.native._decode", "streamsim.pipeline.fixcost", "streamsim.analysis.why",
    # (the compiled stages of hazards and of the JSON report: imported on first use)
    "streamsim.native._fixes", "streamsim.native._rootcause", "streamsim.native._jsonv4")


def _loaded_by(argv: list[str], names: tuple[str, ...], tmp_path) -> set[str]:
    """Which of ``names`` are imported by ``streamsim ARGV`` run as the program is (``python -m
    streamsim``, supervised), read from ``-X importtime``'s list of every import."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "streamsim", *argv],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    return set(names) & imported


def test_a_one_line_check_imports_no_library_or_stage_it_does_not_use(tmp_path):
    """(Nor simpy, where the compiled replay runs: it makes no engine for a log without
    groups.)"""
    from streamsim import native
    (tmp_path / "one.jsonl").write_text(
        '{"op":"launch","stream":"s","name":"k","writes":["a"],"dur":1}\n')
    unused = UNUSED_BY_A_SHORT_CHECK + (("simpy",) if native.replayer() is not None else ())
    assert _loaded_by(["check", "one.jsonl"], unused, tmp_path) == set()


def test_the_import_list_sees_what_a_check_imports(tmp_path):
    """(The test above can fail: the same reading finds the fast paths of a long log, the JSON
    writer of --format json, and what a hazard's fix costing imports.)"""
    line = '{"op":"launch","stream":"s%d","name":"k","writes":["a"],"dur":1}\n'
    (tmp_path / "long.jsonl").write_text("".join(line % (i % 2) for i in range(1000)))  # (64 KB:
    # above read.SMALL_LOG, 16 KB)
    found = _loaded_by(["check", "long.jsonl", "--format", "json"], UNUSED_BY_A_SHORT_CHECK,
                       tmp_path)
    from streamsim import native
    reader = {"streamsim.native._decode"} if native.decoder() is not None else \
        {"msgspec", "streamsim.oplog.fastpath"}
    assert reader | {"streamsim.report.jsonout", "streamsim.pipeline.fixcost"} <= found


def test_a_long_log_the_lexer_takes_imports_msgspec_only_for_a_line_it_hands_over(tmp_path):
    """Where the compiled reader runs, msgspec and the Python fast path (~15 ms of a process)
    are imported only when a line needs them: its lexer takes the common lines, and a
    declaration goes to the checker, so a recorded log of such lines never imports them; a ref
    object (made as the fast path's Struct) does. Where it does not run, the Python fast path
    reads every long log with msgspec."""
    from streamsim import native
    common = ('{"op":"group","group":"pp","backend":"nccl","ranks":[0,1]}\n'
              + "".join('{"op":"launch","stream":"s%d","name":"k","writes":["a"],"dur":1,'
                        '"t":%d,"site":"m.py:3 f"}\n' % (i % 2, i) for i in range(1000)))
    (tmp_path / "common.jsonl").write_text(common)  # (above read.SMALL_LOG)
    (tmp_path / "refobj.jsonl").write_text(
        common + '{"op":"launch","writes":[{"buffer":"a","offset":0,"nbytes":1}]}\n')
    wanted = ("msgspec", "streamsim.oplog.fastpath")
    if native.decoder() is not None:
        assert _loaded_by(["check", "common.jsonl"], wanted, tmp_path) == set()
    else:
        assert _loaded_by(["check", "common.jsonl"], wanted, tmp_path) == set(wanted)
    assert _loaded_by(["check", "refobj.jsonl"], wanted, tmp_path) == set(wanted)


ENGINE = ("simpy", "greenlet", "streamsim.sim.engine", "streamsim.sim.api")


def test_a_log_with_groups_and_fixes_is_checked_without_the_engine(tmp_path):
    """A recorded log declares its groups and has fixes to cost. Where the compiled replay runs,
    its check makes no engine: a group's configuration is made by ``declare_group``, and the
    fixes are keyed without the engine module (until now a Simulation was made only to declare
    the groups, which imported simpy and greenlet). Where it does not, the engine runs."""
    from streamsim import native
    (tmp_path / "g.jsonl").write_text(
        '{"op":"group","group":"pp","backend":"nccl","ranks":[0,1]}\n'
        '{"op":"launch","rank":0,"name":"k","writes":["x"]}\n'
        '{"op":"isend","rank":0,"group":"pp","tensors":["x"],"peer":1,"handle":"h"}\n'
        '{"op":"irecv","rank":1,"group":"pp","tensors":["y"],"peer":0,"handle":"r"}\n'
        '{"op":"wait","rank":1,"handle":"r"}\n'
        '{"op":"launch","rank":0,"name":"k2","writes":["x"]}\n')  # (a WAR: a fix to cost)
    found = _loaded_by(["check", "--jobs", "1", "g.jsonl"], ENGINE, tmp_path)
    if native.replayer() is not None:
        assert found == set()
    else:
        assert "streamsim.sim.engine" in found
