"""The work behind each CLI command: load, simulate, analyse, report."""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..pipeline import check_oplog, run_model, strategies
from ..gcpause import pipeline_entry
from .progress import progress
from .supervise import keep
from ..report.escape import terminal, terminal_lines
from ..report.report import Report, render_text
from ..sim.errors import ModelError
from ..sim.model import Model, load_model


def _model_report(model: Model, variant: str | None, sets, args, *, fix_cost: bool = True,
                  progress=None) -> Report:
    return run_model(model, variant, sets, seed=args.seed, jitter=args.jitter,
                     strategy=getattr(args, "strategy", strategies.DEFAULT),
                     depth=getattr(args, "depth", 2),
                     max_ops=args.max_ops, max_time=args.max_time, fix_cost=fix_cost,
                     apply_fixes=getattr(args, "apply_fixes", False), progress=progress,
                     jobs=getattr(args, "jobs", 1))


def oplog_report(path: str, args, *, fix_cost: bool = False, progress=None) -> Report:
    if not strategies.get(getattr(args, "strategy", strategies.DEFAULT)).applies_to_oplog:
        raise ModelError("--strategy applies to a model input (.py), not an op log")
    return check_oplog(path, seed=args.seed, jitter=args.jitter, max_ops=args.max_ops,
                       max_time=args.max_time, fix_cost=fix_cost,
                       apply_fixes=getattr(args, "apply_fixes", False), progress=progress,
                       jobs=getattr(args, "jobs", 1))


def _phases(*first: str, fix_cost: bool):
    """The progress line of a check or run (on a terminal only)."""
    return progress((*first, "simulate", "analyse", *(("cost fixes",) if fix_cost else ()),
                     "report"))


def _check_out(out: str | None) -> None:
    """Refuse a ``--out`` folder that could not be written before the run, not after it."""
    if out is None:
        return
    if not out.strip():
        raise ModelError("--out: empty folder name")
    from ..report.atomic import check_folder
    from ..report.outputs import ALL_FILES
    check_folder(out, ALL_FILES)


def _json_version(args: argparse.Namespace) -> int | None:
    """``--json-version``, refused where nothing JSON is written (it would be ignored); None: not
    given (the default version, which the JSON writers take)."""
    if args.json_version is None:
        return None
    if args.format != "json" and not args.out:
        raise ModelError(f"--json-version applies to --format json and to --out's report.json, "
                         f"not to --format {args.format}")
    return args.json_version


def _emit(report: Report, args: argparse.Namespace, shown=None) -> int:
    """Write ``--out``'s files and the report on stdout; ``shown``: the progress line, cleared
    before the report reaches the terminal."""
    version = _json_version(args)
    if shown is not None:
        shown("report")
    try:
        text = None if args.format == "json" and not args.out else \
            _render(report, args.format, args.out, version)
    finally:
        if shown is not None:
            shown.close()
    if text is None:
        _write_json(report, version)
    else:
        sys.stdout.write(text)
    keep(report)  # (the child exits without freeing it: see supervise.keep)
    return report.exit_code


@pipeline_entry  # (as _render: the encoder makes many short-lived objects)
def _write_json(report: Report, version: int | None) -> None:
    """``--format json`` without ``--out``: the text written to stdout a block at a time as it
    is made, never held whole (the same bytes; on a 200,000-line log, peak RSS 449 MB instead of
    502 MB). With ``--out`` the report.json already made is printed instead."""
    from ..report.jsonout import JSON_VERSION, write_json  # (here: a text report needs no JSON)
    write_json(report, sys.stdout, JSON_VERSION if version is None else version)


@pipeline_entry  # the run's last stage, after run_model's pause: millions of short-lived objects
def _render(report: Report, fmt: str, out: str | None, json_version: int | None) -> str:
    files = None
    if out:
        from ..report.jsonout import JSON_VERSION
        from ..report.outputs import render_outputs, write_outputs
        files = render_outputs(report, JSON_VERSION if json_version is None else json_version)
        write_outputs(report, out, files)
    if fmt == "json":  # (with --out: the report.json just written, not encoded a second time)
        return files["report.json"].decode()
    if fmt == "markdown":
        from ..report.markdown import render_markdown
        return render_markdown(report)
    return render_text(report) + (terminal(f"wrote {out}/\n") if out else "")


def summary_of(model: Model) -> str:
    """``PATH: `` and the first paragraph of the model's docstring, whole (a sentence may span
    lines), wrapped to 100 columns; the model's name when it has no docstring."""
    import textwrap
    para = model.doc.split("\n\n", 1)[0].split() if model.doc else []
    return "\n".join(textwrap.wrap(" ".join(para) or model.name, 100, break_on_hyphens=False,
                                   initial_indent=f"{model.path}: ", subsequent_indent="  "))


def variants_json(model: Model) -> dict:
    """``variants --format json``: what the text listing says, as data (docs/cli.md)."""
    baseline = getattr(model.module, "BASELINE", None)
    return {"model": model.path, "name": model.name,
            "summary": " ".join(model.doc.split("\n\n", 1)[0].split()) if model.doc else "",
            "variants": [{"name": k, "description": v} for k, v in model.variants.items()],
            "baseline": baseline if isinstance(baseline, str) else None,
            "params": [{"name": p.name, "type": p.type.__name__, "default": p.default,
                        "help": p.help, "choices": list(p.choices) or None}
                       for p in model.params.values()]}


def cmd_variants(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    if args.format == "json":
        sys.stdout.write(json.dumps(variants_json(model), indent=2) + "\n")
        return 0
    lines = [*summary_of(model).split("\n"), "variants:"]
    width = max(map(len, model.variants))
    for name, text in model.variants.items():
        lines.append(f"  {name:{width}}  {text}")
    if model.params:
        lines.append("parameters (--set name=value):")
        w = max(map(len, model.params))
        for p in model.params.values():
            choices = f" [{'|'.join(map(str, p.choices))}]" if p.choices else ""
            lines.append(f"  {p.name:{w}}  {p.type.__name__:5} = {p.default!s:10} {p.help}"
                         f"{choices}")
    sys.stdout.write(terminal_lines(lines))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    _check_out(args.out)
    _json_version(args)
    model = load_model(args.model)
    shown = _phases(fix_cost=not args.no_fix_cost)
    try:
        report = _model_report(model, args.variant, args.set, args, fix_cost=not args.no_fix_cost,
                               progress=shown)
    except BaseException:
        shown.close()
        raise
    return _emit(report, args, shown)


def cmd_check(args: argparse.Namespace) -> int:
    _check_out(args.out)
    _json_version(args)
    if args.fixed_out is not None and args.apply_fixes:
        raise ModelError("--fixed-out and --apply-fixes: choose one (--fixed-out writes the log "
                         "with the run's fixes; --apply-fixes reports the fixed run)")
    if args.fixed_out is not None and not args.fixed_out.strip():
        raise ModelError("--fixed-out: empty file name")
    if args.fixed_out and os.path.exists(args.oplog) and not os.path.isfile(args.oplog):
        raise ModelError(f"--fixed-out: {args.oplog} is not a regular file (the log is read again "
                         "to write the fixed copy): save it to a file first")
    shown = _phases("parse", fix_cost=not args.no_fix_cost)
    try:
        report = oplog_report(args.oplog, args, fix_cost=not args.no_fix_cost, progress=shown)
        if args.fixed_out:
            from ..report.atomic import write_atomic  # (ctypes: imported where a file is written)
            write_atomic(args.fixed_out, fixed_log(args.oplog, report))
    except BaseException:
        shown.close()
        raise
    code = _emit(report, args, shown)
    if args.fixed_out and args.format == "text":
        sys.stdout.write(f"wrote {args.fixed_out}\n")
    return code


def fixed_log(path: str, report: Report) -> str:
    """The op log at ``path`` with every distinct fix of ``report`` inserted (``--fixed-out``)."""
    from ..analysis.checks import distinct_fixes
    from ..oplog.fixed import fixed_oplog_text
    from ..oplog.source import read_oplog_bytes
    text = read_oplog_bytes(path).decode("utf-8")  # (valid: the reader has just read it)
    return fixed_oplog_text(text, report.trace, distinct_fixes(report.findings))


def cmd_compare(args: argparse.Namespace) -> int:
    from ..explore.compare import compare_variants, render_compare, compare_json
    model = load_model(args.model)
    variants = list(dict.fromkeys(model.check_variant(v) for v in (args.variant or model.variants)))
    baseline = args.baseline or getattr(model.module, "BASELINE", None)
    if baseline is not None:
        where = "--baseline" if args.baseline else f"{model.path}: BASELINE"
        if baseline not in model.variants:
            raise ModelError(f"{where} {baseline!r}: unknown variant (known: "
                             f"{', '.join(model.variants)})")
        if baseline not in variants:  # the costs are relative to it: run it too
            variants.append(baseline)
    rows = compare_variants(model, variants, args.set, args, baseline=args.baseline)
    if args.format == "json":
        sys.stdout.write(json.dumps(compare_json(rows, model, args), indent=2) + "\n")
    else:
        sys.stdout.write(terminal(render_compare(rows, model, markdown=args.format == "markdown",
                                                 baseline=args.baseline)))
    return 1 if any(not r.report.findings.clean for r in rows) else 0


# --- graph and timeline: one picture ---------------------------------------------------------------

def _input_report(args: argparse.Namespace) -> Report:
    """Run the input of ``graph``/``timeline``: a model (.py) or an op log (.jsonl); fixes are not
    costed (a picture does not need them)."""
    from ..oplog import is_oplog_path
    if is_oplog_path(args.input):
        return oplog_report(args.input, args)
    return _model_report(load_model(args.input), args.variant, args.set, args, fix_cost=False)


def picture_format(path: str, formats: tuple[str, ...], flag: str = "") -> str:
    """The format an output file's extension names, one of ``formats``; else a one-line error."""
    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    if fmt not in formats:
        raise ModelError(f"{flag + ' ' if flag else ''}{path}: cannot tell the format from the "
                         f"extension (use {', '.join('.' + f for f in formats)})")
    return fmt


def _picture(args: argparse.Namespace, formats: tuple[str, ...], render) -> int:
    """Check ``-o``'s extension, run the input, write ``render(report, fmt, window)`` atomically."""
    fmt = picture_format(args.output, formats)
    if args.window is not None and args.window < 0:
        raise ModelError(f"--window must be >= 0, not {args.window}")
    report = _input_report(args)
    from ..report.atomic import write_atomic
    write_atomic(args.output, render(report, fmt, args.window))
    sys.stdout.write(terminal_lines([report.summary(), f"wrote {args.output}"]))
    return report.exit_code


def cmd_graph(args: argparse.Namespace) -> int:
    """Draw the HB slice of the featured hazard (else of the deadlock, else of the whole run)."""
    from ..report.figures import FORMATS
    from ..report.outputs import graph_file
    return _picture(args, FORMATS + ("dot",), graph_file)


def cmd_timeline(args: argparse.Namespace) -> int:
    """Draw the run's timeline, the featured hazard highlighted."""
    from ..report.figures import FORMATS
    from ..report.outputs import timeline_file
    return _picture(args, FORMATS, timeline_file)
