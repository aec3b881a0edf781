"""Start-up hook of ``streamsim record -- CMD`` (on PYTHONPATH only for the recorded command):
in a process with ``STREAMSIM_RECORD_DIR`` set, record from ``init_process_group`` on
(:func:`streamsim.record.launch.install_hook`); then run any ``sitecustomize`` this one hides."""
import os
import sys


def _install() -> None:
    directory = os.environ.get("STREAMSIM_RECORD_DIR")
    if not directory:
        return
    try:
        from streamsim.record.launch import install_hook
    except ImportError as e:  # (a Python without streamsim: run unrecorded, and say so)
        print(f"streamsim record: this Python cannot import streamsim ({e}); not recorded",
              file=sys.stderr)
        return
    install_hook(directory)


def _chain() -> None:
    """Run the next ``sitecustomize`` on sys.path, as Python would have without this one."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_install()
_chain()
