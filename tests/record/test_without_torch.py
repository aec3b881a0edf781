"""Without torch the recorder's tests skip on a developer's machine and fail under CI: each of
them, including a module whose parameters need torch at import (which once stopped the whole
collection with an error instead). Run in a child whose ``import torch`` fails."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NO_TORCH = ("import sys, pytest; sys.modules['torch'] = None; "  # (None: `import torch` fails)
            "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-o', 'addopts=', "
            "'--import-mode=importlib', *sys.argv[1:]]))")
MODULES = sorted(str(p) for p in HERE.glob("test_*.py") if p.name != Path(__file__).name)


def run(ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-c", NO_TORCH, *MODULES], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_without_torch_they_skip_on_a_developers_machine():
    got = run(ci=False)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    assert "error" not in got.stdout.splitlines()[-1] and "skipped" in got.stdout.splitlines()[-1]


def test_without_torch_they_fail_under_ci():
    got = run(ci=True)  # (a module failing at import stops the collection: exit 2, not 1)
    assert got.returncode != 0, got.stdout[-2000:]
    assert "the recorder tests must run in CI" in got.stdout
