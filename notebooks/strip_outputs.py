"""Strip outputs and execution counts from notebooks, in place (the form they are committed in).

    python notebooks/strip_outputs.py              # every notebook in notebooks/
    python notebooks/strip_outputs.py A.ipynb ...  # the ones given

Also drops per-cell execution metadata (timings) that Jupyter adds. Prints the notebooks it changed.
"""
from __future__ import annotations

import glob
import os
import sys

import nbformat


def strip(path: str) -> bool:
    """Strip ``path`` in place; True when it changed."""
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            cell.outputs, cell.execution_count = [], None
            changed = True
        if "execution" in cell.get("metadata", {}):
            del cell.metadata["execution"]
            changed = True
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    paths = argv or sorted(glob.glob(os.path.join(here, "*.ipynb")))
    for path in paths:
        if strip(path):
            print(f"stripped {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
