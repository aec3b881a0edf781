"""What the command line tells a newcomer: the command list, the version, help on every command
and option, the files and seeds it names being the true ones, pictures it can write."""
from __future__ import annotations

import argparse

import pytest

import streamsim
from streamsim.cli.main import COMMANDS, build_parser, main

DOC = """A racy two-rank pipeline whose summary sentence runs
over two lines of the docstring. A second sentence.

Details nobody needs in a one-line listing.
"""


@pytest.fixture
def model(pipeline_model):
    return pipeline_model(doc=DOC)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_bare_streamsim_lists_every_command_and_exits_2(capsys):
    """Bare `streamsim` said only 'the following arguments are required: command'. It now lists
    the commands; exit 2 because nothing was checked (a script must not read it as clean)."""
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: streamsim COMMAND")
    for name in _subparsers(build_parser()):
        assert f"\n  {name} " in err, name
    assert sorted(n for n, _ in COMMANDS) == sorted(_subparsers(build_parser()))  # no drift


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"streamsim {streamsim.__version__}\n"


def test_every_command_has_a_description_and_every_option_a_help():
    for name, p in _subparsers(build_parser()).items():
        assert p.description and len(p.description) > 30, name
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and len(action.help) > 10, (name, action.dest)


def test_compare_and_sweep_define_their_metrics(capsys):
    for command in ("compare", "sweep"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        for term in ("makespan", "mean step", "p99 step", "bubble", "overlap",
                     "a fix can lower \"mean step\""):
            assert term in out, (command, term)
    assert "perturbed" in out  # sweep: --runs N means are of perturbed runs under jitter or PCT


def test_variants_prints_the_first_paragraph_whole(model, capsys):
    """`variants` printed the docstring's first line, cutting a sentence that ran on."""
    assert main(["variants", model]) == 0
    out = capsys.readouterr().out
    head = " ".join(out.split("variants:")[0].split())
    assert head.endswith("summary sentence runs over two lines of the docstring. A second "
                         "sentence.")
    assert "Details" not in out


def test_shrink_on_a_model_names_the_run_and_the_file_it_wrote(model, tmp_path, capsys):
    """It printed 'shrunk pipe.racy.jsonl', a file it never wrote."""
    out_file = tmp_path / "small.jsonl"
    assert main(["shrink", model, "-o", str(out_file), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"shrunk {model} [racy]: ") and f"wrote {out_file}\n" in out
    assert "pipe.racy.jsonl" not in out and out_file.exists()
    assert f"from {model} [racy]" in out_file.read_text().splitlines()[0]


@pytest.mark.parametrize("ext", ["jpg", "jpeg"])
def test_jpeg_pictures_are_written(model, tmp_path, capsys, ext):
    for command in ("graph", "timeline"):
        out = tmp_path / f"{command}.{ext}"
        assert main([command, model, "-o", str(out)]) == 1
        assert out.read_bytes()[:3] == b"\xff\xd8\xff"  # a JPEG


def test_a_one_key_sweep_plot_keeps_its_title_inside_the_figure(model):
    """`sweep --grid steps=1..5 --plot` (one panel, a narrow figure) clipped its long title on
    both sides; it is wrapped to the figure's width now, and the legend fits too."""
    from streamsim import plot_sweep, sweep
    rows = sweep(model, "racy", {"steps": [1, 2, 3, 4, 5]})
    title = "pipe [racy]: makespan_us across the grid (one run a point, nominal timing)"
    fig = plot_sweep(rows, "makespan_us", title=title)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    texts = [fig._suptitle, *fig.legends[0].get_texts()]
    assert " ".join(fig._suptitle.get_text().split()) == title
    for text in texts:
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height, \
            text.get_text()


def test_sweep_labels_perturbed_means(model, capsys):
    """`sweep --runs N --strategy pct` printed a makespan far above the nominal one without
    saying it was a mean of perturbed runs."""
    assert main(["sweep", model, "--grid", "steps=1,2", "--runs", "3", "--strategy", "pct",
                 "-q"]) == 1
    out = capsys.readouterr().out
    assert "metrics: means of 3 runs a point, perturbed by PCT depth 2, not the nominal " \
           "timing" in out.splitlines()[0]
    assert "mean makespan_us" in out.splitlines()[1]
    assert main(["sweep", model, "--grid", "steps=1,2", "-q"]) == 1
    assert "metrics: one run a point, nominal timing" in capsys.readouterr().out


def test_a_count_over_runs_is_not_titled_a_mean(model, tmp_path, monkeypatch):
    """The vLLM prompt-sweep figure was titled 'means of 20 runs a point ... (not the nominal
    timing))' for manifest_runs, a count of runs, with a doubled parenthesis."""
    import streamsim.explore.sweep as sweep_module
    titles = []
    monkeypatch.setattr(sweep_module, "plot_sweep",
                        lambda rows, metric, path, title=None: titles.append(title))
    argv = ["sweep", model, "--grid", "steps=1,2", "--runs", "2", "--jitter", "0.2", "-q",
            "--plot", str(tmp_path / "s.png")]
    main([*argv, "--metric", "manifest_runs"])
    main([*argv, "--metric", "makespan_us"])
    assert "(counted over 2 runs a point, perturbed by jitter 0.2, not the nominal timing)" \
        in titles[0]
    assert "(means of 2 runs a point, perturbed by jitter 0.2, not the nominal timing)" \
        in titles[1]
    assert all(t.count("(") == t.count(")") == 1 for t in titles)


@pytest.mark.parametrize("command", [name for name, _ in COMMANDS])
def test_a_parser_built_for_one_command_parses_and_helps_as_the_full_one(command):
    """``main`` makes only the parser of the command it runs (``build_parser(only)``, a
    one-line log's start-up), and only when ``argv[0]`` is that command: its help and options
    are the full parser's. The other commands are not made: what they would show (their line
    in the bare program's help, an invalid choice) cannot be asked for in such a run."""
    full, one = build_parser(), build_parser(command)
    full_subs, one_subs = _subparsers(full), _subparsers(one)
    assert list(one_subs) == [command]
    assert one_subs[command].format_help() == full_subs[command].format_help()
    assert [a.dest for a in one_subs[command]._actions] == \
        [a.dest for a in full_subs[command]._actions]


def test_the_version_is_looked_up_only_when_asked(capsys, monkeypatch):
    import importlib
    cli = importlib.import_module("streamsim.cli.main")  # (streamsim.cli.main is the function)
    asked = []
    monkeypatch.setattr(cli, "_version", lambda: asked.append(1) or "9.9")
    build_parser("check").parse_args(["check", "log.jsonl"])
    assert asked == []
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--version"])
    assert capsys.readouterr().out == "streamsim 9.9\n" and asked == [1]
