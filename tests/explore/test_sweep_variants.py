"""sweep: several variants on one grid, and counts written as counts."""
from __future__ import annotations

import csv
import io
import json

from streamsim import load_model, sweep
from streamsim.cli.main import main
from streamsim.explore.sweep import render_sweep, rows_csv

VLLM = "models/vllm_pp.py"
SMALL = ["--set", "pp=2", "--set", "decode_steps=3"]


def test_several_variants_share_one_grid_a_row_per_variant_and_point():
    """`sweep` could put only one variant on a grid (a repeated --variant kept the last): now each
    variant runs every point, variant by variant, and each row says which."""
    rows = sweep(load_model(VLLM), ["ring_no_wait", "fixed_54962"], {"ring_slots": [1, 3]},
                 ["pp=2", "decode_steps=3"], jobs=1)
    assert [(r.variant, r.point["ring_slots"], r.verdict) for r in rows] == [
        ("ring_no_wait", 1, "latent"), ("ring_no_wait", 3, "clean"),
        ("fixed_54962", 1, "clean"), ("fixed_54962", 3, "clean")]
    assert all(f"--variant {r.variant}" in r.replay for r in rows)
    table = render_sweep(rows).splitlines()
    assert table[0].split()[:3] == ["variant", "ring_slots", "verdict"]
    assert table[2].split()[:3] == ["ring_no_wait", "1", "LATENT"]
    assert next(csv.reader(io.StringIO(rows_csv(rows))))[:2] == ["variant", "ring_slots"]


def test_the_cli_takes_repeated_variant_and_variants(capsys):
    assert main(["sweep", VLLM, "--variant", "ring_no_wait", "--variants", "fixed_54962",
                 "--grid", "ring_slots=1,3", *SMALL, "-q", "--jobs", "1",
                 "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["variants"] == ["ring_no_wait", "fixed_54962"]
    assert [(r["variant"], r["ring_slots"], r["verdict"]) for r in d["rows"]] == [
        ("ring_no_wait", 1, "latent"), ("ring_no_wait", 3, "clean"),
        ("fixed_54962", 1, "clean"), ("fixed_54962", 3, "clean")]
    assert main(["sweep", VLLM, "--variants", "fixed_54962,", "--grid", "ring_slots=1",
                 *SMALL]) == 2
    assert "--variants fixed_54962,: an empty name" in capsys.readouterr().err


def test_one_variant_sweeps_keep_their_columns(capsys):
    """A single-variant sweep's table, CSV and JSON have no variant column (as before)."""
    assert main(["sweep", VLLM, "--variant", "fixed_54962", "--grid", "ring_slots=1", *SMALL,
                 "-q", "--jobs", "1", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["variant"] == "fixed_54962" and "variant" not in d["rows"][0]


def test_csv_writes_step_count_as_an_integer(capsys):
    """The CSV's step_count read "12.0" (a mean of one run's count): a count is written "12"."""
    assert main(["sweep", VLLM, "--variant", "fixed_54962", "--grid", "ring_slots=1", *SMALL,
                 "-q", "--jobs", "1", "--format", "csv"]) == 0
    (row,) = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert row["step_count"] == "12"
