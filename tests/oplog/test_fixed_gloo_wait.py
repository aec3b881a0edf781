"""`check --fixed-out` on a gloo send whose handle the program waits later: the fix moves that
wait before the racing write instead of adding a second one (a second wait() on a gloo isend's
handle hangs: the engine warns gloo-send-waited-twice). Found by recording
examples/pp_send_overwrite.py under torchrun: its fixed log gave three such warnings."""
from __future__ import annotations

import json

from streamsim.cli.main import main

LOG = ('{"op":"group","group":"world","backend":"gloo","ranks":[0,1]}\n'
       '{"op":"host","rank":0,"name":"fill","writes":["x"],"dur":5}\n'
       '{"op":"isend","rank":0,"group":"world","tensors":["x"],"peer":1,"handle":"h",'
       '"nbytes":65536}\n'
       '{"op":"host","rank":0,"name":"refill","writes":["x"],"dur":5}\n'
       '{"op":"wait","rank":0,"handle":"h"}\n'
       '{"op":"irecv","rank":1,"group":"world","tensors":["y"],"peer":0,"handle":"r",'
       '"nbytes":65536}\n'
       '{"op":"wait","rank":1,"handle":"r"}\n')


def test_the_fixed_log_moves_the_programs_wait_of_a_gloo_send(tmp_path, capsys):
    src, fixed = tmp_path / "log.jsonl", tmp_path / "fixed.jsonl"
    src.write_text(LOG)
    assert main(["check", str(src), "--fixed-out", str(fixed), "--no-fix-cost"]) == 1
    lines = fixed.read_text().splitlines()
    ops = [json.loads(x) for x in lines if not x.startswith("#")]
    rank0 = [o.get("name", o["op"]) for o in ops if o.get("rank") == 0]
    assert rank0 == ["fill", "isend", "wait", "refill"]  # one wait of the send, before the refill
    assert any(x.startswith("# streamsim fix 1: moved before line 4:") and '"handle":"h"' in x
               for x in lines)
    capsys.readouterr()
    assert main(["check", str(fixed), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hazards"] == [] and report["warnings"] == []
