"""The teaching notebooks in notebooks/ run clean from a fresh kernel, and are committed without outputs.

Each notebook is executed top to bottom with nbclient on the ``python3`` kernel (the ipykernel of this
interpreter: no kernelspec install needed), from the notebooks/ folder, as "Restart and run all" would.
Any exception fails the test, including a failed ``assert`` inside a notebook: the notebooks state facts
about the models ("the regressed variant has a manifest WAR", "with the event there is no hazard") and
check them, so a change in the engine, the analysis or a model that makes their prose wrong fails here.

Notebooks are committed with outputs stripped (see the README): ``.venv/bin/python notebooks/strip_outputs.py``
strips them in place after working in Jupyter.
"""
from __future__ import annotations

import os
import time

import nbformat
import pytest

NOTEBOOKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "notebooks")
NOTEBOOKS = sorted(f for f in os.listdir(NOTEBOOKS_DIR) if f.endswith(".ipynb"))
CELL_TIMEOUT = 120  # seconds per cell
BUDGET = 60  # seconds per notebook (the "under a minute"), checked loosely below

# What each notebook's run protects (shown with -v through the test id and on failure).
PROTECTS = {
    "01_streams_events_and_happens_before.ipynb":
        "two streams without an event: one latent RAW that jitter makes manifest in some seeds; the "
        "event removes it; vector clocks and the HB pictures (draw_timeline, draw_hb) as described",
    "02_the_vllm_pipeline_parallel_regression.ipynb":
        "models/vllm_pp.py tells the #49274/#54962 story: manifest WAR on the middle stages' "
        "receive buffer at 12k-token prefill, latent decode races, the fix clean and its cost, "
        "pre_49274 deadlocks with fold_back, handles[1:] and the reaper",
    "03_proposing_a_scheduling_change.ipynb":
        "a model written in a notebook runs through load_model and the CLI; ring_no_wait is clean iff "
        "ring_slots >= pp + 1 (sweep); the regression test it writes passes under pytest",
    "04_recording_a_real_program.ipynb":
        "streamsim record on examples/pp_send_overwrite.py (2 gloo ranks on 127.0.0.1): the racy run "
        "really corrupts the receiver and checks as one WAR root cause at the example's own lines with "
        "its fix; the fixed run is clean and intact; the racy log with the fixes inserted is clean",
}
# Notebooks that record real programs need torch: without it they skip on a developer's machine,
# and fail under CI (``CI`` set), as the recorder's tests do (tests/record/conftest.py).
NEEDS_TORCH = {"04_recording_a_real_program.ipynb"}


def test_every_notebook_says_what_it_protects():
    assert NOTEBOOKS, "no notebooks found"
    assert set(NOTEBOOKS) == set(PROTECTS), "add the new notebook to PROTECTS (or remove a stale entry)"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_clean(name):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    if name in NEEDS_TORCH:
        try:
            import torch  # noqa: F401
        except ImportError:
            msg = f"{name} needs torch: make venv installs it (pip install torch==2.13.0)"
            if os.environ.get("CI"):
                pytest.fail(f"CI: {msg}; it must run in CI", pytrace=False)
            pytest.skip(msg)
    path = os.path.join(NOTEBOOKS_DIR, name)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": NOTEBOOKS_DIR}})
    start = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"{name} ({PROTECTS.get(name, '')}): a cell failed:\n{e}", pytrace=False)
    elapsed = time.monotonic() - start
    # a loose guard (slow CI machines): a notebook that takes far longer than its budget has grown
    assert elapsed < 3 * BUDGET, f"{name} took {elapsed:.0f} s (budget {BUDGET} s)"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_committed_without_outputs(name):
    """Consistency: every notebook is stored stripped (no outputs, no execution counts)."""
    nb = nbformat.read(os.path.join(NOTEBOOKS_DIR, name), as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{name}: cells {dirty} have outputs or execution counts; run "
                       f"`.venv/bin/python notebooks/strip_outputs.py` before committing")
