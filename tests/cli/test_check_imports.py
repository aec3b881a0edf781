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
