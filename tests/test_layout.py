"""The package layout follows the pipeline, and imports only point down it.

sim -> trace <- analysis <- report / explore <- cli and testing: each subpackage may import only the packages
below it (``ALLOWED``), so the tree a newcomer reads is the architecture, and no import cycle can
form between subpackages. Inside a subpackage, modules import one another without a circle either
(:func:`circles`): each module can then be read, and tested, knowing only those below it. Every
``import`` counts, including those inside functions and under ``TYPE_CHECKING``. The top-level
``streamsim/__init__.py`` (the public API) may import anything.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "streamsim"
LEAVES = {"kinds", "trace", "gcpause", "strided"}  # modules at the top of the package: the
# vocabulary and the byte sets of strided views, which import nothing of ours, and the modules that
# may import only them
ALLOWED: dict[str, set[str]] = {
    "kinds": set(), "trace": {"kinds", "strided"}, "gcpause": set(), "strided": set(),
    "native": LEAVES,  # the compiled core: below every stage that dispatches to it
    "sim": LEAVES,
    "oplog": {"sim", "native"} | LEAVES,  # (its reader dispatches to the compiled one)
    "analysis": {"native"} | LEAVES,
    "report": {"analysis", "native"} | LEAVES,  # (its JSON tables dispatch to the compiled ones)
    "pipeline": {"sim", "oplog", "analysis", "report", "native"} | LEAVES,  # the main path of every
    # command (native: fix costing dispatches its scans of the ops to the compiled ones)
    "explore": {"sim", "oplog", "analysis", "report", "pipeline"} | LEAVES,
    "record": {"sim", "oplog"} | LEAVES,  # a recorder writes op logs: beside explore
    "cli": {"sim", "oplog", "analysis", "report", "pipeline", "explore", "record", "native"}
    | LEAVES,  # (native: the command line's own process keeps the memory it frees, _heap.pyx)
    "testing": {"sim", "oplog", "analysis", "report", "pipeline", "explore"} | LEAVES,  # beside cli: a user's tests
}


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every streamsim import in ``source``, the text of ``module``
    (dotted, e.g. ``streamsim.analysis.hb``)."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("streamsim")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[:len(base) - node.level + 1]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("streamsim"):
                if node.module is None:  # from . import a, b: modules
                    out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
                else:
                    out.append((node.lineno, target))
    return out


def stage_of(module: str) -> str | None:
    """The pipeline stage of a dotted module name: its first component under streamsim."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` that point up the pipeline or sideways outside ``ALLOWED``."""
    here = stage_of(module)
    if here is None or here in ("__init__", "__main__"):
        return []  # the public facade and ``python -m streamsim`` may import anything
    bad = []
    for line, target in imported_modules(source, module, is_package):
        there = stage_of(target)
        if there is not None and there != here and there not in ALLOWED[here]:
            bad.append(f"{module}:{line} imports {target} ({here} may import only "
                       f"{', '.join(sorted(ALLOWED[here])) or 'nothing of streamsim'})")
    return bad


def all_modules() -> list[tuple[Path, str, bool]]:
    mods = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        mods.append((path, ".".join(parts), is_package))
    return mods


def test_every_stage_is_a_known_subpackage_or_leaf():
    """A new top-level module or subpackage must be placed in the pipeline (ALLOWED) on purpose."""
    stages = {stage_of(m) for _, m, _ in all_modules()} - {None, "__init__", "__main__"}
    assert stages == set(ALLOWED), f"place these in ALLOWED: {sorted(stages ^ set(ALLOWED))}"


def test_imports_point_down_the_pipeline():
    """No module imports a stage above its own (e.g. analysis importing report or sim)."""
    bad = [v for path, mod, pkg in all_modules() for v in violations(path.read_text(), mod, pkg)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module, source, is_package, ok", [
    ("streamsim.analysis.hb", "from ..report.report import Report\n", False, False),
    ("streamsim.analysis.hb", "def f():\n    from ..sim.engine import Engine\n", False, False),
    ("streamsim.sim.engine", "import streamsim.explore.hunt\n", False, False),
    ("streamsim.report", "from ..explore import cost_fixes\n", True, False),
    ("streamsim.report.outputs", "from ..analysis.slices import hb_graph\n", False, True),
    ("streamsim.cli.main", "from . import commands\n", False, True),
    ("streamsim.pipeline", "from ..oplog import load_oplog\n", True, True),
    ("streamsim.pipeline.fixcost", "from ..explore.hunt import explore\n", False, False),
])
def test_the_check_catches_an_upward_import(module, source, is_package, ok):
    """The checker itself: an upward import (top level, inside a function, absolute, from a package
    __init__) is reported; imports down the pipeline or within a stage are not."""
    assert (not violations(source, module, is_package)) == ok


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the modules of ``sources`` (module -> (text, is package)) it imports; an import
    of a name inside a module counts as an import of that module. The facade is left out."""
    graph: dict[str, set[str]] = {m: set() for m in sources if m != "streamsim"}
    for mod in graph:
        text, pkg = sources[mod]
        for _, target in imported_modules(text, mod, pkg):
            while target not in sources and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in graph and target != mod:
                graph[mod].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one
    module (Tarjan's algorithm), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circle():
    """No module imports, through any chain, a module that imports it back: within a subpackage
    too, where the stage rule allows any import (two halves of one abstraction that import each
    other are one module, or need a third below both)."""
    sources = {mod: (path.read_text(), pkg) for path, mod, pkg in all_modules()}
    found = circles(import_graph(sources))
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("sources, expected", [
    ({"streamsim.sim.a": ("from .b import x\n", False),
      "streamsim.sim.b": ("def f():\n    from . import a\n", False)},
     [["streamsim.sim.a", "streamsim.sim.b"]]),
    ({"streamsim.sim.a": ("from .b import x\n", False),
      "streamsim.sim.b": ("from .c import y\n", False),
      "streamsim.sim.c": ("import streamsim.sim.a\n", False)},
     [["streamsim.sim.a", "streamsim.sim.b", "streamsim.sim.c"]]),
    ({"streamsim.sim": ("from .a import x\n", True),
      "streamsim.sim.a": ("from .b import x\n", False),
      "streamsim.sim.b": ("", False)}, []),
])
def test_the_check_catches_a_circle(sources, expected):
    """The checker itself: a circle through a function-level import, or of three modules, is
    found; a package importing its modules is no circle."""
    assert circles(import_graph(sources)) == expected


def test_models_and_notebooks_import_only_the_public_api():
    """Models and notebooks use ``streamsim``'s public names, never a submodule, so the layout
    behind them can change without breaking them."""
    root = PACKAGE.parent
    texts = [(p, p.read_text()) for p in sorted((root / "models").glob("*.py"))]
    texts += [(p, p.read_text()) for p in sorted((root / "notebooks").glob("*.ipynb"))]
    bad = [f"{p.name}: {line.strip()}" for p, text in texts for line in text.splitlines()
           if ("import streamsim." in line or "from streamsim." in line)]
    assert not bad, "\n".join(bad)


def test_modules_stay_small_or_say_why():
    """A module over ~400 lines says in its docstring why it is one module."""
    long = []
    for path, mod, _ in all_modules():
        text = path.read_text()
        if text.count("\n") > 420:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "One module because" not in doc:
                long.append(f"{mod} ({text.count(chr(10))} lines)")
    assert not long, "split these or say why in their docstring ('One module because ...'): " \
        + ", ".join(long)
