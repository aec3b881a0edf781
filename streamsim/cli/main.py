"""The ``streamsim`` command line: argument parsing for every command (bodies in ``commands``
and ``explore_commands``).

Run as a program, the command works in a supervised child process (:mod:`.supervise`), so that a
model cannot outlive its wall-clock bound.

Exit codes: 0 nothing found, 1 hazards or a deadlock found, 2 bad input (one line on stderr),
3 an internal error of streamsim (one line that says so; the traceback saved), 130 interrupted.

One module because it is the one parser of the command line: every command's options and help
texts (and the shared option groups they reuse) are declared here, and what a user sees in
``--help`` is read in one place.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import Sequence

from ..pipeline import strategies
from ..sim.errors import InputError, InternalError, ModelError
from ..sim.model import is_model_path


# What the timing metrics mean (compare and sweep --help; report.json's "metrics"), stated from
# streamsim.analysis.metrics.compute_metrics. Times are simulated microseconds.
METRICS_HELP = """\
metrics (simulated time, microseconds):
  makespan    end of the run's last op.
  steps       the step labels ops carry (host.step in a model, "step" in an op log).
  mean step,  step k's latency runs from the start of the first stream op (kernel, NCCL op,
  p99 step    event record or wait; gloo excluded) labelled k, on any rank, to the end of the
              last one; mean and nearest-rank p99 over the steps. A sync that delays a step's
              first op but not its last shortens that step: a fix can lower "mean step" at
              equal makespan (the work still ends when the bottleneck stage ends).
  bubble      share of the makespan a rank's compute streams (every stream but nccl:/gloo:)
              are idle, averaged over ranks.
  overlap     share of comm-stream (nccl:, gloo:) transfer time during which a compute stream
              of the same rank is busy too, over all ranks. A comm op transfers from when its
              peers are there (a rendezvous send once its receive is posted, a receive once the
              data left, a collective once every rank joined) to its end: not while it waits.
  peak memory the largest rank's peak live bytes: a buffer is live from host.buffer (an op
              log's alloc line) to its free (docs/cli.md, Memory); sweep: peak_bytes.
"""

COMMANDS = (  # name, one line: the bare `streamsim` usage lists them
    ("run", "simulate one variant of a model and report hazards, deadlock, metrics"),
    ("check", "analyse a recorded op log (JSON Lines) with the same engine"),
    ("compare", "run a model's variants side by side: hazards and what they cost"),
    ("variants", "list a model's variants and parameters"),
    ("graph", "draw the happens-before slice of the featured hazard"),
    ("timeline", "draw the run's timeline (Gantt chart)"),
    ("explore", "run many seeds: how often each hazard strikes, and its replay command"),
    ("sweep", "run a parameter grid: verdict and metrics per point"),
    ("shrink", "cut an op log down to the few ops a hazard needs"),
    ("record", "run a PyTorch program and record every rank's ops into an op log"),
)
EXIT_CODES = ("exit codes: 0 nothing found, 1 hazards or a deadlock found, 2 bad input, "
              "3 internal error of streamsim, 130 interrupted.")
SAFETY = ("A model file (.py) is Python: streamsim executes it with your rights, like any script; "
          "only .py files are ever run as models. An op log (any other file) is only read: "
          "`check` never executes anything.")


def short_usage() -> str:
    """What bare ``streamsim`` prints: the command list and where to read more."""
    width = max(len(n) for n, _ in COMMANDS)
    lines = ["usage: streamsim COMMAND [options]   (streamsim COMMAND --help for its options)",
             "", "commands:"]
    lines += [f"  {name:{width}}  {what}" for name, what in COMMANDS]
    lines += ["", EXIT_CODES, "Docs in the repository's docs/: models.md (writing a model), oplog.md "
              "(op logs),", "cli.md (every command and output), semantics.md (what the verdicts "
              "mean)."]
    return "\n".join(lines) + "\n"


class _Once(argparse.Action):
    """Store an option's value, refusing a second one: argparse's plain store keeps the last, so
    ``--variant a --variant b`` ran ``b`` alone and said nothing."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        given = namespace.__dict__.setdefault("_given", set())  # (options seen in this parse)
        if self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} given twice: it takes one value "
                         f"(first {getattr(namespace, self.dest)!r}, then {values!r})")
        given.add(self.dest)
        setattr(namespace, self.dest, values)


class _Parser(argparse.ArgumentParser):
    built = False  # build_parser is done with it (see _get_formatter)

    def _get_formatter(self):
        """Until :func:`build_parser` is done, argparse makes a formatter at each option only to
        check its metavar: that one is given a width, not the terminal's (asking for it imported
        ``shutil``, ~3 ms of a one-line log's start-up). Help is formatted at the terminal's."""
        if not self.built:
            return self.formatter_class(prog=self.prog, width=80)
        return super()._get_formatter()

    def error(self, message: str) -> None:  # one line, exit 2, as for every user mistake
        self.exit(2, f"{self.prog}: error: {message}\n")

    def add_argument(self, *args, **kwargs):
        """Every single-valued option (argparse's default "store") takes one value: a repeat is
        an error (:class:`_Once`), not a silent last-one-wins. Positionals are left alone."""
        if args and args[0].startswith("-") and kwargs.get("action", "store") == "store":
            kwargs["action"] = _Once
        return super().add_argument(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        ns.__dict__.pop("_given", None)  # (bookkeeping of _Once, not an option)
        return ns, rest


def _help(name: str) -> str:
    return dict(COMMANDS)[name]


def _add_run_options(p: argparse.ArgumentParser, *, variant_many: bool = False) -> None:
    p.add_argument("model", help="model file (.py): Python, executed with your rights")
    if variant_many:
        p.add_argument("--variant", action="append", help="variant to compare (repeatable; "
                       "default: all)")
    else:
        p.add_argument("--variant", help="variant to run (default: the model's first)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a model parameter (repeatable; `streamsim variants MODEL` lists them)")
    _add_sim_options(p)


def _add_sim_options(p: argparse.ArgumentParser, *, strategy: str = "model") -> None:
    """--seed, --jitter, the run bounds; --strategy/--depth unless ``strategy`` is "none" (an op
    log cannot take them), with "(model input only)" when the command takes either input."""
    draws = "jitter" if strategy == "none" else "jitter, PCT"
    p.add_argument("--seed", type=int, default=None,
                   help=f"seed of the random draws ({draws}); default 0 when the run draws any, "
                   "else none; the report shows the seed used")
    p.add_argument("--jitter", type=_finite(0, strict=False), default=0.0,
                   help="multiplicative duration jitter F: factors in [e^-F, e^F] (default 0)")
    p.add_argument("--max-ops", type=_positive_int, default=5_000_000,
                   help="stop a runaway run after this many ops (default 5,000,000)")
    p.add_argument("--max-time", type=_finite(0, strict=True), default=1e12,
                   help="stop a runaway run at this simulated time in us (default 1e12)")
    if strategy == "none":
        return
    only = " (model input only: an op log refuses it)" if strategy == "either" else ""
    told = "; ".join(f"{n} = {strategies.get(n).help}" for n in strategies.names())
    p.add_argument("--strategy", choices=strategies.names(), default=strategies.DEFAULT,
                   help=f"schedule perturbation: {told} (default {strategies.DEFAULT}){only}")
    p.add_argument("--depth", type=int, default=2,
                   help=f"PCT bug depth d, with --strategy pct (default 2){only}")
    p.add_argument("--max-wall", type=_finite(0, strict=True), default=None, metavar="SECONDS",
                   help="stop a model run after this much wall-clock time, even one that "
                   f"issues no ops (default: 600 s, or 100 us per op --max-ops allows){only}")


def _add_report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="what to print: text (default), json (stable and versioned: see "
                   "docs/cli.md) or markdown")
    p.add_argument("--json-version", type=int, choices=(3, 4), default=None, metavar="{3,4}",
                   help="the JSON format version of --format json and report.json: 4 (default: "
                   "each op listed once in \"ops\", findings name ops by id) or 3 (each op "
                   "described where it is named; goes away in the next release)")
    p.add_argument("--out", metavar="DIR", help="also write report.md, report.json, report.html, "
                   "the HB slice (hb.svg, hb.png, hb.dot), timeline.png and trace.json (Perfetto) "
                   "into DIR")


def _add_jobs_option(p: argparse.ArgumentParser) -> None:
    """``--jobs`` of the commands that cost fixes (run, check, compare): processes for the
    fix-costing re-runs (``streamsim.pipeline.workers``)."""
    p.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                   help="processes that re-simulate the run with the proposed fixes side by "
                   "side to cost them (this one and N-1 forked workers); the report is the same "
                   "for every N (default: the CPUs this process may use, at most 4 and at most "
                   "one per re-run; 1: one re-run after the other in this process)")


def _version() -> str:
    """The installed package's version (setup.cfg's), as pip knows it."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("streamsim")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(version unknown: not installed)"


class _Version(argparse._VersionAction):
    """``--version``: the version (:func:`_version`, which imports ``importlib.metadata``) looked
    up when the option is given, not each time the parser is built."""

    @property
    def version(self) -> str:
        return f"streamsim {_version()}"

    @version.setter
    def version(self, value: object) -> None:  # (argparse's __init__ stores None here)
        pass


class _Skipped:
    """The parser of a command that this run does not parse (:func:`build_parser`'s ``only``):
    not made at all. It takes whatever the builder calls on it (options, argument groups,
    defaults) and drops it."""

    _actions = ()  # (no options: explore_commands rewords the help of a parser's options)

    def __getattr__(self, name: str):
        return self._take

    def _take(self, *args, **kwargs) -> "_Skipped":
        return self


_SKIPPED = _Skipped()


class _Subcommands(argparse._SubParsersAction):
    """``add_subparsers`` whose commands other than ``only`` (None: none) are not made
    (:class:`_Skipped`)."""

    only: str | None = None

    def add_parser(self, name, **kwargs):
        if self.only is None or name == self.only:
            return super().add_parser(name, **kwargs)
        return _SKIPPED


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``streamsim`` parser. ``only``: the command this run parses (``argv[0]``); the other
    commands are not made, which was most of the parser's cost. Nothing they would show can be
    shown in such a run: their one-line help is in the bare program's ``--help`` alone, and no
    ``invalid choice`` error can arise, ``argv[0]`` being a command (a command's own parsing and
    ``--help`` are those of the full parser)."""
    parser = _Parser(prog="streamsim", description="Deterministic simulator of GPU stream and "
                     "communication ordering: finds the data hazards that some legal timing "
                     "allows, deadlocks and never-waited handles, and proposes the sync that "
                     "fixes each hazard.", epilog=EXIT_CODES + " " + SAFETY)
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                action=_Subcommands)
    sub.only = only
    raw = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("variants", help=_help("variants"),
                       description="Print a model's docstring summary, its variants (VARIANTS) "
                       "and its parameters (PARAMS) with type, default and help.")
    p.add_argument("model", help="model file (.py): Python, executed with your rights")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="a text listing (default) or JSON: {model, name, summary, variants: "
                   "[{name, description}], baseline, params: [{name, type, default, help, "
                   "choices}]}")

    p = sub.add_parser("run", help=_help("run"), epilog=EXIT_CODES,
                       description="Simulate one variant of a model, analyse the trace (data "
                       "hazards manifest or latent, deadlock, warnings, metrics) and, unless "
                       "--no-fix-cost, re-simulate with every proposed fix to measure its cost.")
    _add_run_options(p)
    _add_report_options(p)
    p.add_argument("--no-fix-cost", action="store_true",
                   help="do not re-simulate with the proposed fixes to measure their cost")
    _add_jobs_option(p)
    p.add_argument("--apply-fixes", action="store_true",
                   help="report the fixed run instead: the run re-simulated with every proposed "
                   "fix inserted (with --out, its files), and what the fixes cost")

    p = sub.add_parser("check", help=_help("check"), epilog=EXIT_CODES + " " + SAFETY,
                       description="Replay a recorded op log (JSON Lines: one op a line, what each "
                       "host thread issued, in order; an optional integer \"step\" field labels "
                       "an op's step; docs/oplog.md describes the format) "
                       "through the engine and analyse it like a model's run.")
    p.add_argument("oplog", help="op log file (JSON Lines; lines end in \\n, \\r\\n or \\r): any "
                   "file but a .py model, read and never executed")
    _add_sim_options(p, strategy="none")
    _add_report_options(p)
    p.add_argument("--no-fix-cost", action="store_true",
                   help="do not re-simulate the log with the proposed fixes to measure their cost")
    _add_jobs_option(p)
    p.add_argument("--apply-fixes", action="store_true",
                   help="report the fixed run instead: the log replayed with every proposed fix "
                   "inserted (with --out, its files), and what the fixes cost")
    p.add_argument("--fixed-out", metavar="FILE.jsonl",
                   help="write the op log with every proposed fix inserted as lines (diff it "
                   "against the input to see what to change)")

    p = sub.add_parser("compare", help=_help("compare"), formatter_class=raw,
                       epilog=METRICS_HELP + "\n" + EXIT_CODES,
                       description="Run every variant (or those given) with the same parameters, "
                       "seed and\nperturbation; one row each: verdict (manifest / deadlock / latent / clean), "
                       "root causes,\nhazards (manifest, latent), deadlock, metrics,\nand the makespan change against the baseline variant. Then, for each root cause of\nthe baseline, the variants without it: where each one's sync sits against the\nproposed fix's, and what each costs (makespan, peak memory).")
    _add_run_options(p, variant_many=True)
    p.add_argument("--baseline", default=None,
                   help="variant the costs are relative to (default: the model's BASELINE, else "
                   "the first variant)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="a text table (default), JSON, or a Markdown table")
    _add_jobs_option(p)

    for name, what, formats in (
            ("graph", "Draw the happens-before slice of the featured hazard (the first manifest "
             "one, else the first), else of the deadlock; with neither, the run's first 24 ops "
             "(a .dot: the whole graph).",
             ".png .svg .pdf .jpg, or .dot for the graph itself"),
            ("timeline", "Draw the run's timeline: one lane per rank and stream or host thread, "
             "the featured hazard's access windows in red.", ".png .svg .pdf .jpg")):
        p = sub.add_parser(name, help=_help(name), description=what, epilog=EXIT_CODES)
        p.add_argument("input", help="model file (.py, executed) or op log (any other file, "
                       "only read)")
        p.add_argument("--variant", help="variant to run (model input only; default: the "
                       "model's first)")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="set a model parameter (repeatable; model input only)")
        _add_sim_options(p, strategy="either")
        p.add_argument("-o", "--output", required=True,
                       help=f"picture file; the format from its extension ({formats})")
        p.add_argument("--window", type=int, default=None, metavar="STEPS",
                       help="keep only the steps within STEPS of the featured hazard")
    from . import explore_commands as explore_cli
    explore_cli.add_parsers(sub, _add_run_options, _add_sim_options, _help, EXIT_CODES,
                            METRICS_HELP)

    p = sub.add_parser("record", help=_help("record"), formatter_class=raw,
                       description="Run a PyTorch program (torchrun or python) with every rank "
                       "recorded from\ninit_process_group on, the program left as it is; merge "
                       "the ranks into one op log\nand print the command that checks it "
                       "(docs/recording.md). Needs torch (pip install 'streamsim[record]').",
                       epilog="exit code: the program's own (2 if streamsim cannot record it).\n"
                       "example: streamsim record -o run.jsonl -- torchrun --nproc-per-node 2 "
                       "train.py")
    p.add_argument("-o", "--output", required=True, metavar="FILE.jsonl",
                   help="the merged op log to write")
    p.add_argument("--steps", metavar="N:M", help="keep only steps N to M (the steps a "
                   "program labels with streamsim.record.step(k)), and lines of no step")
    p.add_argument("--comm-buffers-only", action="store_true",
                   help="keep only the buffers some communication op touches (smaller logs)")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the command to run, after --")
    for made in (parser, *sub.choices.values()):
        made.built = True
    return parser


def _finite(low: float, strict: bool):
    """An argparse type: a finite number above ``low`` (``float`` alone takes 'inf' and 'nan')."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(
                f"expected a finite number {'>' if strict else '>='} {low:g}, got {text}")
        return value
    return parse


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected an integer > 0, got {text}")
    return value


def _console() -> None:
    """Reports carry names from models and op logs: where the console cannot encode a character
    (LC_ALL=C), write it escaped rather than die; with stdout closed, write nowhere."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if stream is not None and encoding != "utf8" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


MODEL_COMMANDS = ("variants", "run", "compare", "explore", "sweep")


def check_input_kind(args: argparse.Namespace) -> None:
    """The one input-kind rule (see :func:`streamsim.sim.model.is_model_path`): a command that runs
    a model takes only a .py file, ``check`` never takes one; a one-line hint names the command
    that fits the file."""
    if args.command in MODEL_COMMANDS and not is_model_path(args.model):
        raise ModelError(f"{args.model}: not a model file: only .py files are run as models; "
                         f"to analyse an op log, use `streamsim check {args.model}`")
    if args.command == "check" and is_model_path(args.oplog):
        raise ModelError(f"{args.oplog}: a model file, not an op log (check never executes "
                         f"anything): to simulate it, use `streamsim run {args.oplog}`")


FLAGS = {"params": "--set"}  # an API argument -> the flag that sets it, where it is not --NAME


def flag_of(argument: str) -> str:
    """The command-line flag that sets the API argument ``argument`` (``max_ops``: ``--max-ops``)."""
    return FLAGS.get(argument) or "--" + argument.replace("_", "-")


def cli_message(e: InputError) -> str:
    """``e``'s message as the command line says it: each API argument it names (``e.arguments``)
    as the flag that sets it (the first argument prefixed when the message does not name it: a
    parameter's ``k=v`` is ``--set k=v``), and, when a run passed a bound, the flag that raises
    it. The library's own messages name no flag (``streamsim.sim.errors``)."""
    msg, start = str(e), e.named_after
    head, body = msg[:start], msg[start:]
    named = False
    for arg in e.arguments:
        found = re.search(rf"(?<![\w-]){re.escape(arg)}(?![\w-])", body)
        if found:
            body = body[:found.start()] + flag_of(arg) + body[found.end():]
            named = True
    if e.arguments and not named:
        body = f"{flag_of(e.arguments[0])} {body}"
    msg = head + body
    bound = getattr(e, "bound", "")
    if bound:
        msg += f"{' ' if msg.endswith('?') else '; '}raise the bound with {flag_of(bound)}"
    return msg


def _error(message: str) -> None:
    """One line on stderr, whatever the message holds (a model's multi-line exception text, a
    name with control characters)."""
    from ..report.escape import visible
    from ..sim.guard import one_line
    print(f"streamsim: {visible(one_line(message))}", file=sys.stderr)


def _internal(e: InternalError, cause: BaseException) -> int:
    """A bug of ours: one line that says so, the traceback saved to a file that the line names
    (or, with STREAMSIM_DEBUG=1, printed), exit code 3."""
    import tempfile
    import traceback
    text = "".join(traceback.format_exception(cause))
    if os.environ.get("STREAMSIM_DEBUG") == "1":
        sys.stderr.write(text)
        _error(str(e))
        return INTERNAL_ERROR
    try:
        fd, path = tempfile.mkstemp(prefix="streamsim-internal-error-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
        where = f"; traceback in {path}"
    except OSError:
        where = "; set STREAMSIM_DEBUG=1 to see the traceback"
    _error(f"{e}{where}")
    return INTERNAL_ERROR


INTERNAL_ERROR = 3  # exit code of a bug of streamsim's (docs/cli.md)


def _record(args: argparse.Namespace) -> int:
    """``streamsim record``: the recorded program's exit code; 2 if it cannot be recorded."""
    from ..record.launch import parse_steps, record_command
    command = list(args.program)
    if command[:1] == ["--"]:
        command = command[1:]
    try:
        steps = parse_steps(args.steps) if args.steps else None
        return record_command(args.output, command, steps=steps,
                              comm_buffers_only=args.comm_buffers_only)
    except ModelError as e:
        _error(str(e))
        return 2
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except OSError as e:  # an output that cannot be written, a temporary folder that cannot be made
        _error(f"{e.filename + ': ' if e.filename else ''}{e.strerror or e}")
        return 2
    except Exception as e:  # anything else is a bug of streamsim's: exit 3, said so
        return _internal(InternalError("running `streamsim record`", e), e)


def main(argv: Sequence[str] | None = None, *, supervise: bool | None = None) -> int:
    """Run the command line (``argv``: the arguments, default ``sys.argv[1:]``); return the exit
    code: 0 nothing found, 1 hazards or a deadlock found, 2 bad input, 3 an internal error of
    streamsim, 130 interrupted.

    ``supervise`` (default: when run as the program, i.e. ``argv`` is None) does the work in a
    supervised child process (:mod:`.supervise`) so that the wall-clock bound holds whatever a
    model does; called with ``argv`` (tests, scripts), the work runs in this process.
    """
    _console()
    given = sys.argv[1:] if argv is None else list(argv)
    only = given[0] if given and given[0] in dict(COMMANDS) else None
    args = build_parser(only).parse_args(given)
    if args.command is None:  # bare `streamsim`: what it can do. Exit 2: nothing was checked,
        sys.stderr.write(short_usage())  # so a script that lost its command must not pass
        return 2
    if args.command == "record":  # (the program's own process: no supervisor, no time bound)
        return _record(args)
    from . import commands, explore_commands as explore_cli
    from ..sim.guard import watching_interrupts
    from ..sim.wallclock import default_bound
    handler = getattr(commands, f"cmd_{args.command}", None) or \
        getattr(explore_cli, f"cmd_{args.command}")

    def work() -> int:
        if supervise:  # the command line's own process, which exits when its command is done:
            from .. import native  # memory a stage frees is kept for the next (native/_heap.pyx)
            native.keep_freed_memory()
        try:
            with watching_interrupts(), default_bound(getattr(args, "max_wall", None)):
                check_input_kind(args)
                return handler(args)
        except InputError as e:
            _error(cli_message(e))
            return 2
        except InternalError as e:
            return _internal(e, e.cause)
        except BrokenPipeError:  # (an OSError: before it) the reader went away, e.g. `| head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error
            return 0
        except OSError as e:  # an output folder that cannot be made, a file that cannot be read
            where = f"{e.filename}: " if e.filename else ""
            _error(f"{where}{e.strerror or e}")
            return 2
        except KeyboardInterrupt:  # a real Ctrl-C (a model's own is a ModelError, see sim.guard)
            _error("interrupted")
            return 130
        except Exception as e:  # anything else is a bug of streamsim's, never the user's mistake
            return _internal(InternalError(f"running `streamsim {args.command}`", e), e)

    if supervise is None:
        supervise = argv is None
    if supervise:
        from .supervise import supervised
        return supervised(work)
    return work()


def program() -> int:
    """The ``streamsim`` program (its console script and ``python -m streamsim``): :func:`main`
    run as the program, its exit code the process's.

    Where the work ran in a supervised child (the default, :mod:`.supervise`), this process only
    waited for it, and it ends at once with ``os._exit`` once its own output is flushed: the
    interpreter's teardown (every module's objects freed one by one, then a full collection) was
    ~20 ms of a one-line log's ~130 ms check, for a process with nothing to tear down. Elsewhere
    (``STREAMSIM_SUPERVISE=0``, ``record``, no ``fork``) it returns the code, and the process
    exits as usual: the work ran here, and its atexit handlers and open files are finished."""
    code = main()
    from . import supervise
    if supervise.only_waited():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # (a reader that went away: nothing more to say)
                pass
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(program())
