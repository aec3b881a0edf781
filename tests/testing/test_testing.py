"""streamsim.testing: each assertion passes on what it claims, and fails with the report's text
(the text ``streamsim run`` prints) on anything else; the pytest plugin gives the fixture through
its entry point, with no conftest."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from streamsim import ModelError, load_model, render_text, run_model
from streamsim.testing import (assert_hazard, assert_root_causes, assert_safe, root_cause_names,
                               run)

REPO = Path(__file__).resolve().parents[2]
RACY_LOG = ('{"op":"launch","rank":0,"name":"forward","writes":["hidden"],"dur":900,"step":0}\n'
            '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400,'
            '"step":0}\n'
            '{"op":"launch","rank":0,"name":"forward","writes":["hidden"],"dur":900,"step":1}\n'
            '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","step":0}\n')


def test_assert_safe_fails_with_the_text_streamsim_run_prints(pipeline_model):
    path = pipeline_model()
    with pytest.raises(AssertionError) as e:
        assert_safe(path, "racy")
    assert str(e.value) == render_text(run_model(path, "racy"))  # fix costs included, as `run`


def test_assert_safe_passes_parameters_and_returns_the_report(pipeline_model):
    """One step has no later write to race its send: safe; a loaded Model works as a path does."""
    model = load_model(pipeline_model())
    report = assert_safe(model, "racy", steps=1)
    assert report.params["steps"] == 1 and report.findings.clean
    with pytest.raises(AssertionError):
        assert_safe(model, "racy", params={"steps": 3})


def test_assert_hazard_matches_kind_buffer_and_manifest(pipeline_model):
    path = pipeline_model()
    report = assert_hazard(path, kind="WAR", buffer="hidden")
    assert report.findings.hazards
    with pytest.raises(AssertionError) as e:
        assert_hazard(path, kind="WAW", buffer="hidden", manifest=True)
    first, _, rest = str(e.value).partition("\n\n")
    assert first == "expected a manifest WAW on 'hidden'; the run found none:"
    assert rest == render_text(report)


def test_assert_root_causes_names_the_missing_and_the_unexpected(pipeline_model):
    path = pipeline_model()
    found = root_cause_names(run(path))
    assert found == [("WAR", "hidden", "isend(hidden)", "forward")]
    assert_root_causes(path, expected=found)
    with pytest.raises(AssertionError) as e:
        assert_root_causes(path, expected=[("WAR", "hidden", "isend(hidden)", "backward")])
    assert str(e.value).startswith(
        "the root causes differ from the expected ones:\n"
        "  missing:    ('WAR', 'hidden', 'isend(hidden)', 'backward')\n"
        "  unexpected: ('WAR', 'hidden', 'isend(hidden)', 'forward')\n\n")


def test_the_helpers_take_an_op_log_but_no_variant_for_it(tmp_path):
    log = tmp_path / "racy.jsonl"
    log.write_text(RACY_LOG)
    assert_hazard(log, kind="WAR", buffer="hidden")
    with pytest.raises(AssertionError) as e:
        assert_safe(str(log))
    assert "1 root cause of 1 data hazard" in str(e.value).splitlines()[0]
    with pytest.raises(ModelError, match="an op log takes no variant"):
        run(log, "racy")


TESTS = '''\
def test_fix_54962_stays_safe(streamsim_check):
    streamsim_check.assert_safe("models/vllm_pp.py", "fixed_54962")


def test_the_fix_removed(streamsim_check):
    streamsim_check.assert_safe("models/vllm_pp.py", "regressed_49274")
'''


def test_the_pytest_plugin_gives_the_fixture_with_no_conftest(tmp_path, monkeypatch):
    """A user's test file, run by a fresh pytest (the plugin comes from the installed entry point,
    nothing else loads it): the fixed variant passes, the regressed one fails with the report's
    text, as `streamsim run` prints it, and no Python traceback."""
    monkeypatch.chdir(REPO)  # (the user's model path is relative to where pytest runs)
    (tmp_path / "test_user.py").write_text(TESTS)
    # pytest under CI (CI or BUILD_NUMBER set) repeats the whole assertion message in its short
    # summary; the inner run counts the report once, as a user's terminal shows it, wherever it runs.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_user.py")],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "1 failed, 1 passed" in out
    assert out.count(render_text(run_model("models/vllm_pp.py", "regressed_49274"))) == 1
    assert "Traceback" not in out and "streamsim/testing" not in out
