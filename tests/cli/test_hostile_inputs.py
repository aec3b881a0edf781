"""Hostile and unlucky models through the command line (issue 19 items 5, 6, 10).

A model is Python run with the user's rights: streamsim cannot sandbox it, but its failures must
read like every other mistake (one line, exit 2), its output must not corrupt a report, its bound must
hold whatever it does, and nothing but a ``.py`` file is ever executed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from streamsim.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("streamsim: ") and "Traceback" not in err, err
    return err.rstrip("\n")


def streamsim(*argv: str, cwd: Path, **kw) -> subprocess.Popen:
    """``python -m streamsim argv`` as a user runs it (supervised), in its own session so that a
    test can interrupt its process group like a terminal's Ctrl-C."""
    return subprocess.Popen([sys.executable, "-m", "streamsim", *argv], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kw)


# --- item 5: a wall-clock bound the model cannot swallow -----------------------------------------

EVASIONS = {
    "except_exception.py": """\
        import time
        def build(sim, p, variant):
            while True:
                try:
                    time.sleep(0.01)  # (where the interrupt lands: inside the try)
                except Exception:
                    continue
        """,
    "except_baseexception.py": """\
        def build(sim, p, variant):
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    continue
        """,
    "sigalrm_ignored.py": """\
        import signal
        def build(sim, p, variant):
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            while True:
                pass
        """,
}


def test_the_three_evasions_of_the_issue_meet_the_bound(tmp_path):
    """A loop with `except Exception: continue`, with `except BaseException`, or with SIGALRM
    ignored outlived the bound (the one-shot timer never fired again). Each now stops at the bound
    (0.5 s here) plus the supervisor's grace (1 s): exit 2, one line naming the model."""
    procs = {}
    for name, text in EVASIONS.items():
        write(tmp_path, name, text)
        procs[name] = (time.monotonic(), streamsim("run", name, "--max-wall", "0.5", cwd=tmp_path))
    for name, (t0, proc) in procs.items():
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
        assert proc.returncode == 2, (name, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (name, err)
        assert err.startswith(f"streamsim: {name}") and "took more than 0.5 s" in err, (name, err)
        assert took < 20, (name, took)
    # the first is caught inside the process, so its message names the line it interrupted
    assert procs["except_exception.py"][1].returncode == 2


def test_the_timer_alone_is_not_swallowed_by_except_exception(tmp_path):
    """In a library call (no supervisor) the timer's interrupt is a BaseException: a model's
    `except Exception` no longer swallows it, and the error names the model's line."""
    from streamsim import BoundExceeded, simulate
    path = write(tmp_path, "m.py", EVASIONS["except_exception.py"])
    t0 = time.monotonic()
    with pytest.raises(BoundExceeded) as err:
        simulate(path, max_wall=0.3)
    assert time.monotonic() - t0 < 5
    assert str(err.value).startswith(f"{path}:") and "took more than 0.3 s" in str(err.value)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X")


def test_explore_workers_are_stopped_with_the_run(tmp_path):
    """explore runs models in worker processes: a worker whose model swallows the interrupt is
    killed with everything else, and no process is left behind."""
    pids = tmp_path / "pids"
    note_pid = (f"    with open({str(pids)!r}, 'a') as f:\n"
                "        f.write(f'{os.getpid()}\\n')\n")
    stubborn = textwrap.dedent(EVASIONS["except_baseexception.py"])
    write(tmp_path, "evade.py", "import os\n" + stubborn.replace(
        "def build(sim, p, variant):\n", "def build(sim, p, variant):\n" + note_pid))
    proc = streamsim("explore", "evade.py", "--runs", "4", "--jobs", "2", "--max-wall", "0.5",
                     "-q", cwd=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and "took more than 0.5 s" in err, err
    workers = [int(p) for p in pids.read_text().split()]
    assert workers and all(pid != proc.pid for pid in workers)
    deadline = time.monotonic() + 5
    while not all(map(_gone, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(map(_gone, workers)), workers


def test_a_real_ctrl_c_is_exit_130_with_one_line(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) of a run: exit 130, "interrupted"; and
    when the model swallows the interrupt, the supervisor still ends the run."""
    looping = tmp_path / "looping"
    start = f"    open({str(looping)!r}, 'w').close()\n"
    write(tmp_path, "slow.py", "def build(sim, p, variant):\n" + start +
          "    while True:\n        pass\n")
    write(tmp_path, "stubborn.py", "def build(sim, p, variant):\n" + start +
          "    while True:\n        try:\n            while True:\n                pass\n"
          "        except BaseException:\n            continue\n")
    for name in ("slow.py", "stubborn.py"):
        looping.unlink(missing_ok=True)
        proc = streamsim("run", name, cwd=tmp_path)
        deadline = time.monotonic() + 30
        while not looping.exists() and time.monotonic() < deadline:  # the model is in its loop
            time.sleep(0.05)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, (name, err)
        assert err == "streamsim: interrupted\n", (name, err)
        assert time.monotonic() - t0 < 10


# --- item 6: every failure of a model is one line, exit 2 ----------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("class Boom(BaseException):\n    pass\nraise Boom('at import')\n",
     "{path}:3: error while loading: Boom: at import"),
    ("class Boom(BaseException):\n    pass\n"
     "def build(sim, p, variant):\n    raise Boom('in build')\n",
     "{path}:4: Boom: in build"),
    ("def build(sim, p, variant):\n    def prog(host):\n        raise GeneratorExit('odd')\n"
     "    sim.spawn(0, prog)\n", "{path}:3: GeneratorExit: odd"),
    ("def build(sim, p, variant):\n    raise ValueError('first line\\n  second line\\n\\nthird')\n",
     "{path}:2: ValueError: first line / second line / third"),
    ("def build(sim, p, variant):\n    raise KeyboardInterrupt\n",
     "{path}:2: the model raised KeyboardInterrupt"),
    ("raise KeyboardInterrupt\n", "{path}:1: the model raised KeyboardInterrupt while loading"),
    ("class Odd(Exception):\n    def __init__(self, a, b):\n        super().__init__(f'{a}+{b}')\n"
     "def build(sim, p, variant):\n    def prog(host):\n        host.launch('k')\n"
     "        raise Odd(1, 2)\n    sim.spawn(0, prog)\n", "{path}:7: Odd: 1+2"),
])
def test_any_model_failure_is_one_line_and_exit_2(tmp_path, capsys, text, expected):
    """A BaseException subclass was a 20-line traceback with exit 1 (read as "hazards found"), a
    multi-line message several stderr lines, a model's KeyboardInterrupt exit 130 with no message;
    an exception whose constructor takes other arguments broke simpy's copy of it."""
    path = write(tmp_path, "m.py", text)
    assert main(["run", path]) == 2
    assert one_error_line(capsys) == "streamsim: " + expected.format(path=path)


def test_a_models_print_never_mixes_with_json(tmp_path, capsys):
    """A model's print() (while loading, in build, in a host program) goes to stderr: stdout is
    the report alone, valid JSON."""
    path = write(tmp_path, "chatty.py", """\
        print("loading")
        def build(sim, p, variant):
            print("building")
            def prog(host):
                print("running")
                host.launch("k")
            sim.spawn(0, prog)
        """)
    assert main(["run", path, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["model"] == "chatty"
    assert err.split() == ["loading", "building", "running"]


# --- item 10: only .py files are run as models ----------------------------------------------------

@pytest.mark.parametrize("command", [["graph", "-o", "g.svg"], ["timeline", "-o", "t.png"],
                                     ["shrink", "-o", "s.jsonl"]])
def test_a_file_that_is_not_py_is_never_executed(tmp_path, capsys, monkeypatch, command):
    """`graph evil.txt` ran the file's first line as Python before failing: any file but a .py is
    read as an op log (and fails as one)."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    evil = write(tmp_path, "evil.txt", f"open({str(marker)!r}, 'w').close()\n")
    assert main([command[0], evil, *command[1:]]) == 2
    assert one_error_line(capsys).startswith(f"streamsim: {evil}:1: malformed JSON")
    assert not marker.exists()


def test_the_wrong_command_gets_a_hint(tmp_path, capsys):
    """`run x.jsonl` said "a model must define build(...)", `check model.py` "malformed JSON":
    each now names the command that fits the file."""
    log = write(tmp_path, "x.jsonl", '{"op":"launch"}\n')
    model = write(tmp_path, "model.py", "def build(sim, p, variant):\n    pass\n")
    for argv in (["run", log], ["compare", log], ["variants", log], ["explore", log],
                 ["sweep", log, "--grid", "x=1"]):
        assert main(argv) == 2
        assert one_error_line(capsys) == (f"streamsim: {log}: not a model file: only .py files are "
                                          f"run as models; to analyse an op log, use `streamsim "
                                          f"check {log}`")
    assert main(["check", model]) == 2
    assert one_error_line(capsys) == (f"streamsim: {model}: a model file, not an op log (check "
                                      f"never executes anything): to simulate it, use "
                                      f"`streamsim run {model}`")


def test_help_says_models_are_code_and_check_runs_nothing(capsys):
    for argv in (["--help"], ["check", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = " ".join(capsys.readouterr().out.split())
        assert "executes it with your rights" in out and "`check` never executes anything" in out
