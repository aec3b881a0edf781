"""The README's example model runs and prints exactly the output the README shows."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:python)?\n(.*?)```", text, flags=re.S)


def test_readme_model_output_is_what_the_readme_shows(tmp_path):
    """A newcomer copying the README's model gets the README's report, byte for byte: the
    example and its output cannot drift from the code."""
    readme = (ROOT / "README.md").read_text()
    model = next(b for b in _blocks(readme) if "def build(sim, p, variant)" in b)
    shown = next(b for b in _blocks(readme) if b.startswith("$ streamsim run overwrite.py"))
    (tmp_path / "overwrite.py").write_text(model)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "streamsim", "run", "overwrite.py", "--variant",
                          "racy"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert run.returncode == 1, run.stderr
    assert run.stdout == shown.split("\n", 1)[1]
    fixed = subprocess.run([sys.executable, "-m", "streamsim", "run", "overwrite.py", "--variant",
                            "fixed"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert fixed.returncode == 0 and "no data hazard" in fixed.stdout


def test_readme_api_example_runs(tmp_path):
    """The README's Python API example runs as shown, from a folder next to nothing but the model."""
    readme = (ROOT / "README.md").read_text()
    code = next(b for b in _blocks(readme) if b.startswith("import streamsim as ss"))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "vllm_pp.py").write_text((ROOT / "models" / "vllm_pp.py").read_text())
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=env)
    assert run.returncode == 0, run.stderr
    assert "vllm_pp [regressed_49274]:" in run.stdout and (tmp_path / "pp2.jsonl").exists()


def test_readme_vllm_compare_tables_are_what_the_cli_prints():
    """The README's `streamsim compare models/vllm_pp.py` tables are the command's output, byte for
    byte: the costs and verdicts its prose discusses cannot drift from the model."""
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in _blocks(readme)
                 if b.startswith("$ streamsim compare models/vllm_pp.py"))
    shown = [c for c in block.split("$ ") if c]
    assert len(shown) == 2
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for command in shown:
        line, expected = command.split("\n", 1)
        args = line.split()[1:]  # after "streamsim"
        run = subprocess.run([sys.executable, "-m", "streamsim", *args], cwd=ROOT,
                             capture_output=True, text=True, env=env)
        assert run.returncode == 1, run.stderr  # some variant is unsafe
        assert run.stdout == expected.rstrip("\n") + "\n", line
