"""Exploring schedules (issue 7): explore with replays, executors, PCT's rate, sweeps, shrinking."""
from __future__ import annotations

import csv
import json
import os
import shlex

import pytest

from streamsim.cli.main import main
from streamsim.explore.hunt import explore_schedules
from streamsim.pipeline.pct import OpsEstimate, PCTPerturb, estimate_ops, pct_bound
from streamsim.explore.runs import run_seeds
from streamsim.oplog import load_oplog, simulate_oplog
from streamsim.explore.shrink import ddmin, hazard_keys, shrink
from streamsim.explore.sweep import plot_sweep, rows_csv, sweep
from streamsim.report.jsonread import op_of

# A producer on a side stream and a consumer on the compute stream, with no event between them:
# a RAW hazard in every timing. The consumer nominally starts `margin` us after the producer ends,
# so the hazard is latent in the nominal timing and manifests only when jitter stretches the
# producer past the pad kernel.
MARGIN_MODEL = '''\
"""A side-stream producer and a compute-stream consumer with no event between them."""
from streamsim import Param

PARAMS = [Param("margin", float, 5.0, "us from the producer's end to the consumer's start"),
          Param("produce_us", float, 100.0, "producer kernel duration")]
VARIANTS = {"racy": "no event between producer and consumer",
            "fixed": "record an event after the producer and wait it on compute"}


def build(sim, p, variant):
    def main(host):
        x = host.buffer("x", 4096)
        side = host.stream("side")
        host.launch("produce", writes=[x], dur=p.produce_us, stream=side)
        if variant == "fixed":
            ev = host.event("produced")
            ev.record(side)
            ev.wait()
        host.launch("pad", dur=p.produce_us + p.margin)
        host.launch("consume", reads=[x], dur=10.0)

    sim.spawn(0, main)
'''


@pytest.fixture(scope="module")
def margin_model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("models") / "margin.py"
    path.write_text(MARGIN_MODEL)
    return str(path)


def _replay_json(command: str, capsys) -> dict:
    argv = shlex.split(command)
    assert argv[:2] == ["streamsim", "run"], command
    capsys.readouterr()
    code = main(argv[1:] + ["--format", "json", "--no-fix-cost"])
    out = json.loads(capsys.readouterr().out)
    assert code == (1 if out["hazards"] else 0)
    return out


def _has(report: dict, kind: str, buffer: str, first: str, second: str) -> list[bool]:
    """Manifest flags of the report's hazards matching a pattern."""
    return [h["manifest"] for h in report["hazards"] if h["kind"] == kind and h["buffer"] == buffer
            and op_of(report, h["first"])["name"] == first
            and op_of(report, h["second"])["name"] == second]


def test_run_seeds_are_documented_and_prefix_stable():
    assert run_seeds(0, 3) == [0, 1, 2]
    assert run_seeds(3, 2) == [3_000_009, 3_000_010]
    assert run_seeds(7, 100)[:10] == run_seeds(7, 10)


def test_explore_finds_a_timing_dependent_hazard_and_its_replay_reproduces_it(margin_model, capsys):
    nominal = _replay_json(f"streamsim run {margin_model} --variant racy", capsys)
    assert _has(nominal, "RAW", "x", "produce", "consume") == [False]  # latent in nominal timing

    res = explore_schedules(margin_model, "racy", runs=40, seed=0, jitter=0.1, jobs=1)
    assert len(res.patterns) == 1
    p = res.patterns[0]
    assert (p.pattern.kind, p.pattern.buffer, p.pattern.first, p.pattern.second) == \
        ("RAW", "x", "produce", "consume")
    assert p.pattern.first_location.endswith("margin.py:14")
    assert 0 < p.manifest_runs < 40 and p.seen_runs == 40  # only some timings strike
    manifest_seeds = [r.seed for r in res.results if r.manifest]
    assert p.first_seed == manifest_seeds[0]
    assert p.replay == (f"streamsim run {margin_model} --variant racy --seed {p.first_seed} "
                        "--jitter 0.1 --strategy random")

    # the printed replay command reproduces the run exactly: manifest, same timing
    assert _has(_replay_json(p.replay, capsys), "RAW", "x", "produce", "consume") == [True]
    # and a seed where it stayed latent replays as latent
    latent_seed = next(r.seed for r in res.results if not r.manifest)
    again = _replay_json(res.replay(latent_seed), capsys)
    assert _has(again, "RAW", "x", "produce", "consume") == [False]

    # the CLI prints the same counts, first seed and replay command
    capsys.readouterr()
    assert main(["explore", margin_model, "--variant", "racy", "--runs", "40", "--jitter", "0.1",
                 "--jobs", "1", "--quiet"]) == 1
    text = capsys.readouterr().out
    assert f"manifest in {p.manifest_runs}/40 runs" in text
    assert f"first manifest seed: {p.first_seed}" in text
    assert f"replay: {p.replay}" in text


def test_fixed_variant_is_clean_under_every_seed(margin_model):
    res = explore_schedules(margin_model, "fixed", runs=20, jitter=0.3, jobs=1)
    assert res.patterns == () and res.deadlock_runs == 0 and not res.found


def test_same_seeds_same_results_under_jobs_1_2_and_dask(margin_model, monkeypatch):
    distributed = pytest.importorskip(
        "distributed", reason="dask[distributed] is not installed (pip install 'streamsim[dask]')")
    kw = dict(runs=24, seed=5, jitter=0.1)
    one = explore_schedules(margin_model, "racy", jobs=1, **kw)
    two = explore_schedules(margin_model, "racy", jobs=2, **kw)
    pct1 = explore_schedules(margin_model, "racy", strategy="pct", jobs=1, **kw)
    pct2 = explore_schedules(margin_model, "racy", strategy="pct", jobs=2, **kw)
    # dask workers import streamsim from wherever this test process did
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root,
                                                                   os.environ.get("PYTHONPATH")])))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        dask = explore_schedules(margin_model, "racy", scheduler=cluster.scheduler_address, **kw)
        with distributed.Client(cluster) as client:
            pct_dask = explore_schedules(margin_model, "racy", strategy="pct", scheduler=client, **kw)
    assert [r.seed for r in one.results] == run_seeds(5, 24)
    assert one.results == two.results == dask.results
    assert one.patterns == two.patterns == dask.patterns
    assert pct1.results == pct2.results == pct_dask.results
    assert one.patterns[0].manifest_runs > 0


# A depth-2 ordering bug: the consumer starts 200 us after the producer ends, far beyond what
# jitter can close; only a producer that is descheduled mid-kernel (a PCT change point on it) lets
# the consumer read while it writes.
def test_pct_finds_a_depth_2_bug_at_least_at_its_theoretical_rate(margin_model):
    params = {"margin": 200.0}
    est = estimate_ops(margin_model, "racy", params)
    assert est == OpsEstimate(ops=6, agents=3, makespan_us=310.0)
    runs = 300
    res = explore_schedules(margin_model, "racy", params, runs=runs, seed=11, strategy="pct", depth=2,
                  jobs=1)
    hits = res.patterns[0].manifest_runs
    bound = pct_bound(est, 2)  # 1/(n*k) = 1/18
    assert res.bound == bound
    assert hits >= bound * runs, (hits, bound * runs)
    # the adaptation does better than PCT's bound here: one op of k=6 is the right one
    assert hits >= 0.5 * runs / est.ops
    # jitter alone never closes a 200 us gap
    rnd = explore_schedules(margin_model, "racy", params, runs=100, seed=11, jitter=0.2, jobs=1)
    assert rnd.patterns[0].manifest_runs == 0


def test_pct_change_points_and_replay(margin_model, capsys):
    est = OpsEstimate(ops=6, agents=3, makespan_us=310.0)
    p = PCTPerturb(3, 42, est)
    assert p.change_points == PCTPerturb(3, 42, est).change_points  # deterministic in the seed
    assert 1 <= len(p.change_points) <= 2 and all(0 <= c < 6 for c in p.change_points)
    assert max(p.delays.values()) in (2 * p.unit, p.unit)
    res = explore_schedules(margin_model, "racy", {"margin": 200.0}, runs=30, seed=1, strategy="pct",
                  depth=3, jobs=1)
    pat = res.patterns[0]
    assert pat.first_seed is not None and "--strategy pct --depth 3" in pat.replay
    assert _has(_replay_json(pat.replay, capsys), "RAW", "x", "produce", "consume") == [True]


def test_sweep_rows_csv_and_plot(margin_model, tmp_path, capsys):
    rows = sweep(margin_model, "racy", {"margin": [-20.0, 5.0, 50.0], "produce_us": [50, 100]},
                 jobs=1)
    assert [(r.point["margin"], r.point["produce_us"]) for r in rows] == \
        [(-20.0, 50), (-20.0, 100), (5.0, 50), (5.0, 100), (50.0, 50), (50.0, 100)]
    assert [r.verdict for r in rows] == ["manifest", "manifest", "latent", "latent", "latent",
                                         "latent"]
    assert rows[0].metric("makespan_us") == 50.0  # the producer outlasts pad (30 us) + consume
    text = rows_csv(rows)
    assert text.splitlines()[0].startswith("margin,produce_us,verdict,runs,root_causes,hazards,"
                                           "manifest")
    fig = plot_sweep(rows, "makespan_us")
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2  # one panel per produce_us

    out_csv, out_png = tmp_path / "s.csv", tmp_path / "s.png"
    capsys.readouterr()
    code = main(["sweep", margin_model, "--variant", "racy", "--grid", "margin=-20,5,50",
                 "--grid", "produce_us=50,100", "--csv", str(out_csv), "--plot", str(out_png),
                 "--jobs", "1", "-q"])
    assert code == 1
    with open(out_csv, newline="") as f:
        got = list(csv.DictReader(f))
    assert [g["verdict"] for g in got] == [r.verdict for r in rows]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "MANIFEST" in capsys.readouterr().out


def _big_log(n_ops: int = 2000) -> str:
    """A two-rank op log of n_ops lines, properly synchronised (events, handle waits) except for
    one side-stream write and, hundreds of ops later, a compute read of the same buffer."""
    r0: list[dict] = []
    r1: list[dict] = []
    i = sends = 0
    while len(r0) + len(r1) < n_ops - 2:
        r0.append({"op": "launch", "name": f"k{i}", "writes": [f"a{i % 5}"],
                   "reads": [f"a{(i + 1) % 5}"], "dur": 5})
        if i % 10 == 3:
            r0 += [{"op": "record", "event": f"e{i}"},
                   {"op": "wait_event", "stream": "aux", "event": f"e{i}"},
                   {"op": "launch", "stream": "aux", "name": f"aux{i}", "reads": [f"a{i % 5}"],
                    "dur": 7},
                   {"op": "record", "stream": "aux", "event": f"f{i}"},
                   {"op": "wait_event", "event": f"f{i}"}]
        if i % 20 == 7:
            r0 += [{"op": "isend", "name": f"send{sends}", "tensors": ["a0"], "peer": 1,
                    "handle": f"s{sends}", "dur": 20},
                   {"op": "wait", "handle": f"s{sends}"}]
            r1 += [{"op": "irecv", "rank": 1, "name": f"recv{sends}", "tensors": ["b"], "peer": 0,
                    "handle": f"r{sends}", "dur": 20},
                   {"op": "wait", "rank": 1, "handle": f"r{sends}"},
                   {"op": "launch", "rank": 1, "name": f"use{sends}", "reads": ["b"],
                    "writes": ["c"], "dur": 30}]
            sends += 1
        if i == n_ops // 13:
            r0.append({"op": "launch", "stream": "side", "name": "bad_write", "writes": ["x"],
                       "dur": 50})
        if i == n_ops * 3 // 10:
            r0.append({"op": "launch", "name": "bad_read", "reads": ["x"], "dur": 5})
        i += 1
    while len(r0) + len(r1) < n_ops:
        r0.append({"op": "launch", "name": f"tail{len(r0)}", "writes": ["t"], "dur": 1})
    lines = (r0 + r1)[:n_ops]
    assert len(lines) == n_ops
    return "\n".join(json.dumps(x) for x in lines) + "\n"


def test_shrinking_a_2000_op_log_keeps_the_hazard_in_at_most_10_ops(tmp_path, capsys):
    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    big.write_text(_big_log(2000))
    assert len(load_oplog(str(big))) == 2000
    assert list(hazard_keys(simulate_oplog(str(big)))) == [("RAW", "x", "bad_write", "bad_read")]

    res = shrink(str(big), str(small))
    assert res.original_ops == 2000 and res.ops <= 10
    assert res.hazard == ("RAW", "x", "bad_write", "bad_read")
    assert len(load_oplog(str(small))) == res.ops
    assert ("RAW", "x", "bad_write", "bad_read") in hazard_keys(simulate_oplog(str(small)))

    medium = tmp_path / "medium.jsonl"  # the CLI (on a shorter log) and `streamsim check` agree
    medium.write_text(_big_log(700))
    capsys.readouterr()
    assert main(["shrink", str(medium), "-o", str(tmp_path / "cli.jsonl"), "-q"]) == 0
    assert "700 ops -> " in capsys.readouterr().out
    assert main(["check", str(tmp_path / "cli.jsonl"), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert _has(report, "RAW", "x", "bad_write", "bad_read")


def test_shrink_a_model_run_dumped_as_an_op_log(margin_model, tmp_path, capsys):
    out = tmp_path / "m.jsonl"
    assert main(["shrink", margin_model, "--variant", "racy", "--set", "margin=-20",
                 "--manifest", "-o", str(out), "-q"]) == 0
    assert "(manifest) still appears" in capsys.readouterr().out
    kinds = hazard_keys(simulate_oplog(str(out)))
    assert kinds == {("RAW", "x", "produce", "consume"): True}
    assert len(load_oplog(str(out))) <= 3


def test_scheduler_without_dask_is_a_one_line_error(margin_model, monkeypatch):
    import sys
    from streamsim.sim.engine import ModelError
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask were not installed
    with pytest.raises(ModelError, match=r"needs Dask: pip install 'streamsim\[dask\]'"):
        explore_schedules(margin_model, "racy", runs=2, scheduler="tcp://127.0.0.1:8786")


def test_a_scheduler_that_is_not_an_address_is_a_one_line_error(margin_model, capsys):
    """Dask refuses 'bogus' with a ValueError (no port), not an OSError: still one line, exit 2."""
    from streamsim.cli.main import main
    assert main(["explore", margin_model, "--runs", "2", "--scheduler", "bogus", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--scheduler bogus: cannot connect" in err


def test_a_failing_run_names_its_seed(tmp_path):
    from streamsim.sim.engine import ModelError
    model = tmp_path / "flaky.py"
    model.write_text(MARGIN_MODEL.replace('        host.launch("consume"',
                                          '        side.synchronize()\n'
                                          '        if host.now > 1.1 * p.produce_us:\n'
                                          '            raise RuntimeError("late")\n'
                                          '        host.launch("consume"'))
    with pytest.raises(ModelError, match=r"^run with seed \d+: .*flaky.py:\d+: RuntimeError: late"):
        explore_schedules(str(model), "racy", runs=20, jitter=0.3, jobs=1)


def test_the_failing_run_reported_is_the_first_one_whatever_the_jobs(tmp_path):
    """With jobs=2 the error named whichever chunk of runs failed first in wall time (seed 0 or 32,
    from one invocation to the next); it is now the first failing seed, as with jobs=1."""
    from streamsim.sim.engine import ModelError
    model = tmp_path / "always.py"
    model.write_text(MARGIN_MODEL.replace(  # every run fails; seed 0's first, later in wall time
        '        host.launch("consume"',
        '        if sim.engine.seed == 0:\n'
        '            import time\n'
        '            time.sleep(0.5)\n'
        '        raise RuntimeError("always")\n'
        '        host.launch("consume"'))
    for jobs in (1, 2):
        with pytest.raises(ModelError, match=r"^run with seed 0: "):
            explore_schedules(str(model), "racy", runs=200, jitter=0.3, jobs=jobs)


def test_shrinking_a_clean_model_names_the_model_not_a_made_up_file(margin_model, tmp_path, capsys):
    """It said 'MODEL_STEM.fixed.jsonl: no data hazard to shrink', a file that does not exist."""
    assert main(["shrink", margin_model, "--variant", "fixed", "-o", str(tmp_path / "s.jsonl"),
                 "-q"]) == 2
    assert f"streamsim: {margin_model} [fixed]: no data hazard to shrink" in capsys.readouterr().err


def test_ddmin_is_1_minimal():
    need = {3, 17, 18, 40}
    got = ddmin(range(64), lambda xs: need <= set(xs))
    assert sorted(got) == sorted(need)


@pytest.mark.parametrize("argv, message", [
    (["explore", "{m}", "--runs", "0"], "--runs must be >= 1"),
    (["explore", "{m}", "--variant", "nope"], "unknown variant 'nope'"),
    (["explore", "{m}", "--jobs", "0"], "--jobs must be >= 1"),
    (["explore", "{m}", "--strategy", "pct", "--depth", "0"], "--depth must be >= 1"),
    (["explore", "{m}", "--strategy", "pct", "--depth", "100000000"],  # was 90 s of drawing
     "PCT delays depth - 1 of the run's"),
    (["run", "{m}", "--strategy", "pct", "--depth", "100000000"], "the depth can be at most"),
    (["sweep", "{m}", "--grid", "bogus=1,2"], "unknown parameter 'bogus'"),
    (["sweep", "{m}", "--grid", "margin=1,x"], "--grid margin=1,x: expected a finite float"),
    (["sweep", "{m}", "--grid", "margin=1,2", "--set", "margin=5"],
     "--set margin and --grid margin: a parameter is either fixed or swept, not both"),
    (["sweep", "{m}", "--grid", "margin=1,2", "--plot", "{tmp}/p.bmp"],
     "cannot tell the format from the extension (use .png, .svg, .pdf, .jpg, .jpeg)"),
    (["sweep", "{m}"], "at least one --grid"),
    (["sweep", "{m}", "--grid", "margin=1", "--metric", "speed"], "--metric speed: unknown"),
    (["shrink", "/nonexistent.jsonl", "-o", "/tmp/x.jsonl"], "cannot read the op log"),
    (["shrink", "{m}", "--variant", "fixed", "-o", "{tmp}/x.jsonl"], "no data hazard to shrink"),
])
def test_bad_input_is_one_line_and_exit_2(margin_model, tmp_path, capsys, argv, message):
    argv = [a.format(m=margin_model, tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_compare_applies_the_strategy_as_run_does(margin_model, capsys):
    """`compare --strategy pct --seed K` perturbs each variant exactly as `run` with those flags:
    the seed PCT found makes the latent RAW strike in both, and without the strategy it is latent."""
    res = explore_schedules(margin_model, "racy", {"margin": 200.0}, runs=30, seed=1, strategy="pct",
                  depth=3, jobs=1)
    seed = res.patterns[0].first_seed
    assert seed is not None

    def racy_row(*flags: str) -> dict:
        assert main(["compare", margin_model, "--variant", "racy", "--set", "margin=200",
                     "--format", "json", *flags]) == 1
        (row,) = json.loads(capsys.readouterr().out)["variants"]
        return row

    pct = racy_row("--strategy", "pct", "--depth", "3", "--seed", str(seed))
    run = _replay_json(f"streamsim run {margin_model} --variant racy --set margin=200 "
                       f"--strategy pct --depth 3 --seed {seed}", capsys)
    assert pct["manifest"] == sum(h["manifest"] for h in run["hazards"]) >= 1
    assert racy_row("--seed", str(seed))["manifest"] == 0


def test_an_op_log_refuses_a_strategy(tmp_path, capsys):
    """PCT perturbs a model's ops by their ids: an op log says so instead of ignoring the flag;
    `check` (op logs only) does not even offer it, and the commands that take either input say
    in their help that it is for models."""
    log = tmp_path / "x.jsonl"
    log.write_text('{"op":"launch","rank":0,"name":"k","writes":["x"],"dur":1}\n')
    for argv in (["graph", str(log), "-o", str(tmp_path / "g.png")],
                 ["timeline", str(log), "-o", str(tmp_path / "t.png")]):
        assert main([*argv, "--strategy", "pct"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--strategy applies to a model input" in err, err
    with pytest.raises(SystemExit) as e:
        main(["check", str(log), "--strategy", "pct"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "unrecognized arguments" in err
    for command in ("graph", "timeline", "shrink"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "(default random) (model input only" in text, command


def test_fix_cost_is_not_measured_under_pct(margin_model, capsys):
    """PCT's delays follow op creation order, which a fix's injected syncs shift: the re-simulated
    run would be another schedule, so `run --strategy pct` reports no fix cost (random does)."""
    base = ["run", margin_model, "--variant", "racy", "--format", "json", "--seed", "1"]
    assert main(base) == 1
    assert json.loads(capsys.readouterr().out)["fix_cost"] is not None
    assert main(base + ["--strategy", "pct", "--depth", "2"]) == 1
    assert json.loads(capsys.readouterr().out)["fix_cost"] is None
