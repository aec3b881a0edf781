"""The command line's contract: exit 0 clean, 1 findings, 2 bad input with one line on stderr."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamsim.cli.main import main
from streamsim.report.jsonread import op_of

ROOT = Path(__file__).resolve().parents[2]
VLLM = str(ROOT / "models" / "vllm_pp.py")
RACE = ('{"op":"launch","rank":0,"name":"forward[t]","writes":["hidden"],"dur":900}\n'
        '{"op":"isend","rank":0,"tensors":["hidden"],"peer":1,"handle":"send_t","dur":400}\n'
        '{"op":"launch","rank":0,"name":"forward[t+1]","writes":["hidden"],"dur":900}\n'
        '{"op":"irecv","rank":1,"tensors":["hidden_in"],"peer":0,"handle":"recv_t","dur":400}\n')


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("streamsim: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv, expected", [
    (["run", VLLM, "--variant", "nope"], "unknown variant 'nope'"),
    (["run", VLLM, "--set", "pp=abc"], "--set pp=abc: expected int"),
    (["run", VLLM, "--set", "nope=1"], "unknown parameter 'nope'"),
    (["run", VLLM, "--out", "/proc/streamsim-cannot-write-here"], "/proc/"),
    (["run", "no/such/model.py"], "no/such/model.py: no such model file"),
])
def test_user_mistakes_are_one_line_and_exit_2(argv, expected, capsys):
    """Bad input never shows a traceback: one line naming the field or file, exit code 2."""
    assert main(argv) == 2
    assert expected in _one_error_line(capsys)


@pytest.mark.parametrize("flag, value, expected", [
    ("--jitter", "nan", "expected a finite number >= 0, got nan"),
    ("--jitter", "inf", "expected a finite number >= 0, got inf"),
    ("--max-time", "inf", "expected a finite number > 0, got inf"),  # no bound: sums overflow
    ("--max-time", "0", "expected a finite number > 0, got 0"),
    ("--max-ops", "0", "expected an integer > 0, got 0"),
])
def test_bounds_and_jitter_must_be_finite_numbers(flag, value, expected, capsys):
    """float() takes 'nan' and 'inf': nan jitter ran silently, an infinite --max-time let a huge
    dur reach an infinite end time that the timeline could not draw."""
    with pytest.raises(SystemExit) as exc:
        main(["run", VLLM, flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"argument {flag}: {expected}" in err


def test_a_console_that_cannot_encode_a_name_gets_it_escaped(tmp_path):
    """LC_ALL=C: names from an op log (any Unicode) are written escaped, not a UnicodeEncodeError."""
    import os
    import subprocess
    import sys
    log = tmp_path / "names.jsonl"
    log.write_text('{"op":"launch","name":"前向","writes":["x"],"dur":1}\n'
                   '{"op":"launch","name":"后向","stream":"s2","writes":["x"],"dur":1}\n',
                   encoding="utf-8")
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "LC_ALL": "C"}
    done = subprocess.run([sys.executable, "-m", "streamsim", "check", str(log), "--format",
                           "markdown"], capture_output=True, env=env, cwd=ROOT)
    assert done.returncode == 1, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"\\u524d\\u5411" in done.stdout  # 前向, escaped


def test_bad_op_log_names_file_and_line(tmp_path, capsys):
    log = tmp_path / "bad.jsonl"
    log.write_text(RACE + '{"op":"lunch"}\n')
    assert main(["check", str(log)]) == 2
    assert f"{log}:5: unknown op 'lunch'" in _one_error_line(capsys)


def test_check_exit_codes_and_json(tmp_path, capsys):
    """OPLOG.md's example is a WAR (exit 1); with the wait added it is clean (exit 0)."""
    log = tmp_path / "race.jsonl"
    log.write_text(RACE)
    assert main(["check", str(log), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    (h,) = out["hazards"]
    assert (h["kind"], h["buffer"], op_of(out, h["first"])["line"],
            op_of(out, h["second"])["line"]) == ("WAR", "hidden", 2, 3)
    lines = RACE.splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + '{"op":"wait","rank":0,"handle":"send_t"}\n'
                   + "".join(lines[2:]))
    assert main(["check", str(log), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["hazards"] == []


def test_run_json_is_byte_identical_across_runs(capsys):
    """Determinism: the same model, parameters and seed give the same bytes."""
    argv = ["run", VLLM, "--variant", "regressed_49274", "--format", "json", "--seed", "3",
            "--jitter", "0.1"]
    assert main(argv) == 1
    first = capsys.readouterr().out
    assert main(argv) == 1
    assert capsys.readouterr().out == first


def test_an_empty_out_folder_is_an_error_not_ignored(tmp_path, capsys):
    log = tmp_path / "race.jsonl"
    log.write_text(RACE)
    assert main(["check", str(log), "--out", ""]) == 2
    assert "--out: empty folder name" in _one_error_line(capsys)


def test_a_write_error_names_the_users_file_not_the_temp_file(tmp_path, monkeypatch, capsys):
    """A read-only folder failed with 'streamsim: DIR/.report.md.wtak8u2n.tmp: Permission denied'
    (simulated here: the tests may run as root, for whom no folder is read-only)."""
    import streamsim.report.atomic as atomic

    def refuse(*args, **kw):  # (issue 19: --out stages a sibling folder, no longer temp files)
        raise PermissionError(13, "Permission denied", str(tmp_path / ".out.streamsim-x"))
    monkeypatch.setattr(atomic.tempfile, "mkdtemp", refuse)
    log = tmp_path / "race.jsonl"
    log.write_text(RACE)
    assert main(["check", str(log), "--out", str(tmp_path / "out")]) == 2
    err = _one_error_line(capsys)
    assert ".tmp" not in err and "Permission denied" in err and str(tmp_path / "out") in err


STATEFUL = '''\
VARIANTS = {"a": "first", "b": "second"}
CALLS = [0]


def build(sim, p, variant):
    CALLS[0] += 1  # state kept between runs: a second run would differ from a first one
    def prog(host):
        host.launch("k", writes=[host.buffer("x", 16)], dur=1)
    sim.spawn(0, prog)
'''


def test_a_model_that_keeps_state_between_runs_is_refused(tmp_path, capsys):
    """compare (and explore) reuse the loaded model: a model that changes its globals in a run made
    'compare' disagree with 'run --variant b'. Each run now checks that the globals are as before."""
    model = tmp_path / "stateful.py"
    model.write_text(STATEFUL)
    assert main(["compare", str(model)]) == 2
    assert "the run changed the model's global 'CALLS'" in _one_error_line(capsys)
    model.write_text(STATEFUL.replace("CALLS[0] += 1", "calls = [1]"))
    assert main(["compare", str(model)]) == 0


def test_compare_baseline_is_checked_and_run(tmp_path, capsys):
    """An unknown --baseline (or BASELINE) left the cost column blank; one outside --variant was
    dropped; a variant named twice was run twice."""
    assert main(["compare", VLLM, "--baseline", "nope"]) == 2
    assert "--baseline 'nope': unknown variant" in _one_error_line(capsys)
    bad = tmp_path / "bad_baseline.py"
    bad.write_text(STATEFUL.replace("CALLS[0] += 1", "pass") + 'BASELINE = "zzz"\n')
    assert main(["compare", str(bad)]) == 2
    assert f"{bad}: BASELINE 'zzz': unknown variant" in _one_error_line(capsys)
    assert main(["compare", VLLM, "--variant", "regressed_49274", "--variant", "regressed_49274",
                 "--baseline", "pre_49274", "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [v["variant"] for v in out["variants"]] == ["regressed_49274", "pre_49274"]


def test_an_op_log_is_known_by_its_extension_in_any_case(tmp_path, capsys):
    """graph/timeline executed race.JSONL as Python (and said it lacked build()); shrink took any
    non-.py file as an op log. One rule now: .jsonl/.ndjson/.json in any case is an op log."""
    log = tmp_path / "race.JSONL"
    log.write_text(RACE)
    assert main(["graph", str(log), "-o", str(tmp_path / "g.dot")]) == 1
    assert "1 data hazard" in capsys.readouterr().out


@pytest.mark.parametrize("argv, flag", [
    (["run", "{model}", "--variant", "racy", "--variant", "racy"], "--variant"),
    (["explore", "{model}", "--variant", "racy", "--var", "racy", "--runs", "1"], "--variant"),
    (["graph", "{model}", "--variant", "racy", "--variant=racy", "-o", "{tmp}/g.dot"], "--variant"),
    (["timeline", "{model}", "--variant", "racy", "--variant", "racy", "-o", "{tmp}/t.png"],
     "--variant"),
    (["run", "{model}", "--seed", "1", "--seed", "2"], "--seed"),
    (["run", "{model}", "--format", "json", "--format", "text"], "--format"),
    (["timeline", "{model}", "-o", "{tmp}/a.png", "--output", "{tmp}/b.png"], "-o/--output"),
    (["compare", "{model}", "--baseline", "racy", "--baseline", "racy"], "--baseline"),
])
def test_a_single_valued_option_given_twice_is_an_error(argv, flag, pipeline_model, tmp_path,
                                                       capsys):
    """A repeated ``--variant`` silently kept the last one (run, explore, graph, timeline; a sweep
    then said "clean"), and so did every other single-valued option: a repeat is a one-line error
    naming the option, exit 2, before anything runs."""
    model = pipeline_model()
    with pytest.raises(SystemExit) as exc:
        main([a.format(model=model, tmp=tmp_path) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {flag} given twice: it takes one value" in err, err
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.dot"))


def test_repeatable_options_still_repeat(pipeline_model, capsys):
    """--set (and compare's --variant) are lists: giving them twice is what they are for."""
    model = pipeline_model()
    assert main(["run", model, "--set", "steps=1", "--set", "steps=2", "--no-fix-cost"]) == 1
    assert main(["compare", model, "--variant", "racy", "--variant", "racy"]) == 1
    from streamsim.cli.main import build_parser
    args = build_parser().parse_args(["run", model, "--variant", "racy"])
    assert not hasattr(args, "_given")  # (the repeat check's bookkeeping is not an option)


def test_variants_format_json_says_what_the_listing_says(capsys):
    """`variants` had no --format json: a script had to parse the listing. The JSON names every
    variant in order with its description, the baseline and each parameter's type and default."""
    assert main(["variants", VLLM]) == 0
    text = capsys.readouterr().out
    assert main(["variants", VLLM, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["name"], d["baseline"]) == ("vllm_pp", "regressed_49274")
    names = [v["name"] for v in d["variants"]]
    assert names[:3] == ["pre_49274", "regressed_49274", "fixed_54962"]
    assert all(f"  {v['name']}" in text and v["description"] in text for v in d["variants"])
    pp = next(p for p in d["params"] if p["name"] == "pp")
    assert (pp["type"], pp["default"]) == ("int", 4)
    assert d["summary"] and d["summary"].split()[0] in text
