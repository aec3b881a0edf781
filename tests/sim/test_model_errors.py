"""Model-file errors: each is one ModelError line naming the file and line, or the field."""
from __future__ import annotations

import re
import textwrap

import pytest

from streamsim import BoundExceeded, ModelError, load_model, simulate
from streamsim.cli.main import cli_message

GOOD = '''\
"""A tiny valid model."""
from streamsim import Param

PARAMS = [Param("pp", int, 2, "pipeline stages"), Param("scale", float, 1.0),
          Param("fast", bool, False), Param("mode", str, "a", choices=("a", "b"))]
VARIANTS = {"racy": "no wait", "fixed": "wait the handle"}


def build(sim, p, variant):
    def prog(host):
        host.launch("k", dur=10 * p.scale)
    for r in range(p.pp):
        sim.spawn(r, prog)
'''


def write(tmp_path, text, name="model.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def one_line(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg


def test_good_model_runs(tmp_path):
    """The fixture model itself loads and runs (so the error tests below test only their error)."""
    path = write(tmp_path, GOOD)
    tr = simulate(path, "fixed", ["pp=3", "scale=2.5", "fast=yes", "mode=b"])
    assert len([op for op in tr.ops if op.agent.kind == "stream"]) == 3
    assert tr.meta["params"] == {"pp": 3, "scale": 2.5, "fast": True, "mode": "b"}
    assert tr.ops[1].duration == 25.0


def test_syntax_error_names_file_and_line(tmp_path):
    """A syntax error is `path:LINE: syntax error: ...`."""
    path = write(tmp_path, "def build(sim, p, variant):\n    x = (1,\n\n")
    with pytest.raises(ModelError) as err:
        load_model(path)
    msg = one_line(err)
    assert msg.startswith(f"{path}:2: syntax error: "), msg


def test_syntax_error_on_a_later_line(tmp_path):
    """The line is the offending one, not the first line of the file."""
    path = write(tmp_path, GOOD + "\n\ndef broken(:\n    pass\n")
    line = GOOD.count("\n") + 3
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err).startswith(f"{path}:{line}: syntax error: ")


def test_error_while_loading_names_the_line(tmp_path):
    """An exception raised at import time names the model's line and the exception."""
    path = write(tmp_path, "import streamsim\nX = 1 / 0\ndef build(sim, p, v): pass\n")
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert one_line(err) == f"{path}:2: error while loading: ZeroDivisionError: division by zero"


def test_missing_file_and_missing_build(tmp_path):
    """A missing file or a file without build() is named in one line."""
    with pytest.raises(ModelError) as err:
        load_model(str(tmp_path / "nope.py"))
    assert one_line(err) == f"{tmp_path / 'nope.py'}: no such model file"
    path = write(tmp_path, "X = 1\n")
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert "must define build(sim, params, variant)" in one_line(err)


@pytest.mark.parametrize("declaration, expected", [
    ('VARIANTS = ["racy", "fixed"]', "VARIANTS must be a dict of variant name -> description"),
    ('VARIANTS = {1: "one"}', "VARIANTS must be a dict of variant name -> description"),
    ('from streamsim import Param\nPARAMS = Param("pp", int, 2)',
     "PARAMS must be a list of streamsim.Param"),
    ('from streamsim import Param\nPARAMS = [Param("steps", list, [])]',
     "parameter 'steps': type must be int, float, str or bool, not list"),
    ('from streamsim import Param\nPARAMS = [Param("pp", int, 2), Param("pp", int, 4)]',
     "parameter 'pp' is declared twice"),
])
def test_ill_typed_declarations_are_one_line(tmp_path, declaration, expected):
    """VARIANTS or PARAMS of the wrong shape: one line, not a traceback from deep in the loader."""
    path = write(tmp_path, declaration + "\ndef build(sim, p, v): pass\n")
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert one_line(err) == f"{path}: {expected}"


def test_only_py_files_are_run_as_models(tmp_path):
    """Issue 19 item 10 (this test said the opposite before): any file was executed as Python,
    so `streamsim graph evil.txt` ran its first line. Only a .py file (any case) is a model;
    nothing of another file is executed."""
    ran = tmp_path / "ran"
    evil = write(tmp_path, f"open({str(ran)!r}, 'w').close()\n" + GOOD, name="model.txt")
    with pytest.raises(ModelError) as err:
        load_model(evil)
    assert one_line(err) == (f"{evil}: not a model file: only .py files are run as models (a "
                             "model is Python, executed with your rights)")
    assert not ran.exists()
    model = load_model(write(tmp_path, GOOD, name="Model.PY"))
    assert list(model.variants) == ["racy", "fixed"]


def test_unknown_variant(tmp_path):
    """An unknown variant names the model, the variant and the known variants."""
    path = write(tmp_path, GOOD)
    with pytest.raises(ModelError) as err:
        simulate(path, "nope")
    assert one_line(err) == f"{path}: unknown variant 'nope' (known: racy, fixed)"


def test_unknown_set_key(tmp_path):
    """An unknown `--set` key names the key and the known parameters."""
    path = write(tmp_path, GOOD)
    with pytest.raises(ModelError) as err:
        simulate(path, params=["stages=4"])
    assert one_line(err) == f"{path}: unknown parameter 'stages' (known: pp, scale, fast, mode)"


@pytest.mark.parametrize("setting, expected", [
    ("pp=abc", "pp=abc: expected int"),
    ("scale=fast", "scale=fast: expected a finite float"),
    ("fast=maybe", "fast=maybe: expected bool"),
    ("mode=c", "mode=c: must be one of a, b"),
    ("pp", "pp: expected key=value"),
])
def test_ill_typed_set_value_names_the_field(tmp_path, setting, expected):
    """An ill-typed or out-of-choices parameter value is one line naming the field and the type;
    the library names no flag, the command line says it came from ``--set``."""
    path = write(tmp_path, GOOD)
    with pytest.raises(ModelError) as err:
        simulate(path, params=[setting])
    assert one_line(err) == expected
    assert cli_message(err.value) == f"--set {expected}"


def test_exception_in_a_host_program_names_the_model_line(tmp_path):
    """An exception raised inside a host program while simulating becomes a ModelError naming the
    model file and the line that raised, with the exception's type and message."""
    path = write(tmp_path, '''\
        def build(sim, p, variant):
            def prog(host):
                host.launch("k", dur=1)
                host.synchronize()
                raise ValueError("bad shape")
            sim.spawn(0, prog)
        ''')
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err) == f"{path}:5: ValueError: bad shape"


def test_api_misuse_in_a_host_program_names_the_model_line(tmp_path):
    """A ModelError raised by the API inside a host program (unknown group) names the model line."""
    path = write(tmp_path, '''\
        def build(sim, p, variant):
            def prog(host):
                host.launch("k", dur=1)
                host.group("tp").all_reduce(host.buffer("x", 8))
            sim.spawn(0, prog)
        ''')
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err) == f"{path}:4: unknown process group 'tp'"


def test_exception_in_build_names_the_model_line(tmp_path):
    """An exception in build() itself (outside host programs) names its line too."""
    path = write(tmp_path, '''\
        def build(sim, p, variant):
            sim.group("g", [0, 1], backend="mpi")
        ''')
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err) == f"{path}:2: group 'g': backend must be 'nccl' or 'gloo', not 'mpi'"


def test_runaway_model_names_the_model_and_the_bound(tmp_path):
    """A runaway host loop stops with a BoundExceeded naming the model file and max_ops."""
    path = write(tmp_path, '''\
        def build(sim, p, variant):
            def prog(host):
                while True:
                    host.launch("k", dur=1)
            sim.spawn(0, prog)
        ''')
    with pytest.raises(BoundExceeded) as err:
        simulate(path, max_ops=1000)
    assert one_line(err).startswith(f"{path}: the model issued more than 1000 ops (max_ops)")


def test_the_first_thread_to_fail_is_the_one_named(tmp_path):
    """Two ranks' programs fail at the same simulated time: rank 0's runs first, and its
    mistake is the run's error, not rank 1's, which ran after it in the same step."""
    path = write(tmp_path, '''\
        def build(sim, p, variant):
            def first(host):
                host.launch("k", dur=-1)
            def second(host):
                host.launch("k", dur=float("nan"))
            sim.spawn(0, first)
            sim.spawn(1, second)
        ''')
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err) == f"{path}:3: negative duration -1 for k"


LOOP_IN_BUILD = '''\
def build(sim, p, variant):
    while True:
        pass
'''

LOOP_IN_HOST = '''\
def build(sim, p, variant):
    def prog(host):
        host.launch("k", dur=1)
        while True:
            pass
    sim.spawn(0, prog)
'''


@pytest.mark.parametrize("text, line", [(LOOP_IN_BUILD, 2), (LOOP_IN_HOST, 4)])
def test_a_loop_that_issues_no_ops_meets_the_wall_clock_bound(tmp_path, text, line):
    """No op, no simulated time: neither --max-ops nor --max-time can stop it; the wall-clock bound
    does, naming the line it interrupted, and leaves no timer or handler behind."""
    import signal
    import time
    path = write(tmp_path, text)
    handler = signal.getsignal(signal.SIGALRM)
    t0 = time.monotonic()
    with pytest.raises(BoundExceeded) as err:
        simulate(path, max_wall=0.3)
    assert time.monotonic() - t0 < 5
    assert one_line(err).startswith(f"{path}:{line}: the run took more than 0.3 s")
    assert signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert simulate(write(tmp_path, GOOD, "good.py"), max_wall=0.3).ops  # a quick run is unaffected


def test_the_default_wall_clock_bound_grows_with_max_ops():
    from streamsim.sim.wallclock import default_wall_bound
    assert default_wall_bound(5_000_000) == 600.0  # the default --max-ops: ~50 s of engine time
    assert default_wall_bound(100_000_000) == 10_000.0


@pytest.mark.parametrize("body, expected", [
    ("    def prog(host):\n        import sys\n        sys.exit(0)\n    sim.spawn(0, prog)\n",
     "the model called sys.exit(0)"),
    ("    def prog(host):\n        host.launch('k', dur=float('nan'))\n    sim.spawn(0, prog)\n",
     "non-finite duration nan for k"),
    ("    def prog(host):\n        host.launch('k', dur=float('inf'))\n    sim.spawn(0, prog)\n",
     "non-finite duration inf for k"),
    ("    def prog(host):\n        host.buffer('b', -16)\n    sim.spawn(0, prog)\n",
     "buffer 'b': nbytes must be a non-negative int, got -16"),
    ("    sim.spawn(-1, lambda host: None)\n", "spawn: rank must be a non-negative int, got -1"),
])
def test_model_mistakes_that_used_to_pass_silently(tmp_path, body, expected):
    """sys.exit ended the tool with no output (exit 0); nan durations ran as 0 and inf ones as a
    false deadlock; a negative buffer size or rank was accepted. Each is now one line."""
    path = write(tmp_path, "def build(sim, p, variant):\n" + body)
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err).startswith(path) and expected in one_line(err)


def test_sys_exit_or_an_endless_loop_while_loading(tmp_path, monkeypatch):
    import streamsim.sim.wallclock
    path = write(tmp_path, "import sys\nsys.exit(3)\n")
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert one_line(err) == f"{path}:2: the model called sys.exit(3) while loading"
    monkeypatch.setattr(streamsim.sim.wallclock, "default_wall_bound", lambda max_ops: 0.3)
    path = write(tmp_path, "X = 0\nwhile True:\n    X += 1\n", name="loop.py")
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert re.match(rf"{re.escape(path)}:[23]: the run took more than 0.3 s", one_line(err))


def test_float_parameters_must_be_finite(tmp_path):
    path = write(tmp_path, GOOD)
    for text in ("nan", "inf", "-inf", "1e400"):
        with pytest.raises(ModelError) as err:
            simulate(path, params=[f"scale={text}"])
        assert one_line(err) == f"scale={text}: expected a finite float"


SENDS = '''\
def build(sim, p, variant):
    sim.group("pp", [0, 1], {costs})

    def stage0(host):
        host.group("pp").isend(host.buffer("x", 1 << 20), dst=1)

    def stage1(host):
        host.group("pp").irecv(host.buffer("y", 1 << 20), src=0).wait()
    sim.spawn(0, stage0)
    sim.spawn(1, stage1)
'''


@pytest.mark.parametrize("costs, expected", [
    ("bandwidth=0", "group 'pp': bandwidth must be a finite number > 0 (bytes per µs), not 0"),
    ("bandwidth=-1.0", "group 'pp': bandwidth must be a finite number > 0 (bytes per µs), not -1.0"),
    ("bandwidth=float('inf')", "group 'pp': bandwidth must be a finite number > 0"),
    ("latency=float('nan')", "group 'pp': latency must be a finite number >= 0 (µs), not nan"),
    ("latency=-5", "group 'pp': latency must be a finite number >= 0 (µs), not -5"),
    ("latency='10'", "group 'pp': latency must be a number, not '10'"),
    ("eager_bytes=-1", "group 'pp': eager_bytes must be an int >= 0 (bytes), not -1"),
    ("eager_bytes=float('inf')", "group 'pp': eager_bytes must be an int >= 0 (bytes), not inf"),
])
def test_a_group_cost_model_that_makes_no_transfer_time_is_refused_where_declared(
        tmp_path, costs, expected):
    """``sim.group(bandwidth=0)`` was accepted and the first send raised ZeroDivisionError,
    blamed on the model's isend line; NaN or infinite costs made NaN or infinite times. The
    declaration itself is now the one-line error, naming the group and the field."""
    path = write(tmp_path, SENDS.format(costs=costs))
    with pytest.raises(ModelError) as err:
        simulate(path)
    assert one_line(err).startswith(f"{path}:2: ") and expected in one_line(err)


def test_a_group_with_sane_costs_still_runs(tmp_path):
    path = write(tmp_path, SENDS.format(costs="latency=0, bandwidth=1e3, eager_bytes=0"))
    assert simulate(path).end_time == pytest.approx((1 << 20) / 1e3)
