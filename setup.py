"""The optional compiled core (docs/native.md): streamsim/native/*.pyx (the HB pass, the op-log
reader's hot path, the run metrics, the op-log replay, the proposed fixes, the root
causes' grouping, the JSON report's tables, the command's heap policy), each built when it can be, each on its own.

Everything else is in setup.cfg. Cython rather than C with the CPython API: the compiled HB pass
is the pure-Python pass (streamsim/analysis/hb.py) with C types on its hot locals, so it reads
line for line against its reference, and Cython writes the reference counting and error paths that
hand-written CPython calls get wrong. The build is optional: where Cython or a C compiler is
missing or fails (``CC=false``), the install goes on in pure Python and says so on stderr.
"""
from __future__ import annotations

import os
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# the compiled modules: the HB pass, the op-log reader's per-line hot path, an op log's lines
# as C rows (which the reader makes and the replay reads: _decode and _replay cimport it), the run metrics,
# the replay of an op log, the hazards' proposed fixes and root causes' grouping, the JSON
# report's two large tables, and the command's heap policy (memory freed kept for reuse)
SOURCES = {"streamsim.native._hb": "streamsim/native/_hb.pyx",
           "streamsim.native._decode": "streamsim/native/_decode.pyx",
           "streamsim.native._lines": "streamsim/native/_lines.pyx",
           "streamsim.native._metrics": "streamsim/native/_metrics.pyx",
           "streamsim.native._replay": "streamsim/native/_replay.pyx",
           "streamsim.native._fixes": "streamsim/native/_fixes.pyx",
           "streamsim.native._jsonv4": "streamsim/native/_jsonv4.pyx",
           "streamsim.native._rootcause": "streamsim/native/_rootcause.pyx",
           "streamsim.native._heap": "streamsim/native/_heap.pyx"}


def _say(why: object, module: str = "streamsim.native") -> None:
    """Say on stderr that a compiled module (or all: ``streamsim.native``) was not built; the
    stages it would run take their pure-Python reference (each module is optional on its own)."""
    print(f"streamsim: the compiled core ({module}) was not built ({str(why).rstrip('.')}); "
          f"streamsim runs in pure Python", file=sys.stderr)


def _drop_stale(module: str) -> None:
    """Remove the copy of ``module`` an earlier editable build left in the tree, when its source
    no longer translates or compiles: else Python would import that stale copy where the
    install says pure Python runs. (Only then: a setup.py call without Cython, ``--version``
    say, leaves a working build alone.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    stale = os.path.join(here, *module.split(".")) + sysconfig.get_config_var("EXT_SUFFIX")
    if os.path.exists(stale):
        os.remove(stale)
        print(f"streamsim: removed {os.path.relpath(stale, here)}, built from an earlier source",
              file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed compile instead of failing the install."""

    failed = False

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # (distutils' CompileError, a missing compiler, ...)
            if not self.failed:  # (an editable install's copy of the module it did not build)
                _say(e)

    def build_extension(self, ext: Extension) -> None:
        if self.compiler.compiler_type == "unix":  # gcc, clang: x * y + z rounds twice, as in
            ext.extra_compile_args = ["-ffp-contract=off"]  # Python (no fused multiply-add)
        try:
            super().build_extension(ext)
        except Exception as e:
            self.failed = True
            _drop_stale(ext.name)
            _say(e, ext.name)


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError as e:  # (a build without the [build-system] requirements)
        _say(e)
        return []
    out: list[Extension] = []
    for name, src in SOURCES.items():  # (one at a time: a .pyx that does not translate loses
        try:  # its own module only, not the others)
            out += cythonize([Extension(name, [src])], language_level=3, quiet=True)
        except Exception as e:  # (Cython's CompileError: the .pyx does not translate)
            _drop_stale(name)
            _say(e, name)
    return out


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
