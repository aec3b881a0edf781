"""The ``streamsim`` command line: run | check | compare | variants | graph | timeline.

Exit codes: 0 nothing found, 1 hazards or a deadlock found, 2 bad input (one line on stderr).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Sequence

from ..sim.errors import ModelError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every user mistake
        self.exit(2, f"{self.prog}: error: {message}\n")


def _add_run_options(p: argparse.ArgumentParser, *, variant_many: bool = False) -> None:
    p.add_argument("model", help="model file (.py)")
    if variant_many:
        p.add_argument("--variant", action="append", help="variant to compare (repeatable; "
                       "default: all)")
    else:
        p.add_argument("--variant", help="variant to run (default: the model's first)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a model parameter (repeatable)")
    _add_sim_options(p)


def _add_sim_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=None, help="seed for jitter (default: none)")
    p.add_argument("--jitter", type=_finite(0, strict=False), default=0.0,
                   help="multiplicative duration jitter F: factors in [e^-F, e^F] (default 0)")
    p.add_argument("--max-ops", type=_positive_int, default=5_000_000,
                   help="stop a runaway model here")
    p.add_argument("--max-time", type=_finite(0, strict=True), default=1e12,
                   help="stop a runaway model at this simulated time (us)")
    p.add_argument("--strategy", choices=("random", "pct"), default="random",
                   help="schedule perturbation: random = jitter only; pct = PCT delays at "
                   "depth-1 seeded change points (see streamsim.explore.pct)")
    p.add_argument("--depth", type=int, default=2, help="PCT bug depth d (default 2)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="streamsim", description="Deterministic simulator of GPU stream and "
                     "communication ordering: finds hazards that some legal timing allows.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("variants", help="list a model's variants and parameters")
    p.add_argument("model")

    p = sub.add_parser("run", help="simulate one variant and report its findings")
    _add_run_options(p)
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--out", metavar="DIR", help="write report.{md,json,html}, pictures, trace")
    p.add_argument("--no-fix-cost", action="store_true",
                   help="do not re-simulate with the proposed fixes to measure their cost")

    p = sub.add_parser("check", help="analyse an op log (JSON Lines, see OPLOG.md)")
    p.add_argument("oplog")
    _add_sim_options(p)
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--out", metavar="DIR", help="write report.{md,json,html}, pictures, trace")
    p.add_argument("--no-fix-cost", action="store_true",
                   help="do not re-simulate the log with the proposed fixes to measure their cost")
    p.add_argument("--fixed-out", metavar="FILE.jsonl",
                   help="write the op log with every proposed fix inserted as lines (diff it "
                   "against the input to see what to change)")

    p = sub.add_parser("compare", help="run variants side by side: hazards and what they cost")
    _add_run_options(p, variant_many=True)
    p.add_argument("--baseline", default=None,
                   help="variant the costs are relative to (default: the model's BASELINE)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")

    for name, what in (("graph", "happens-before graph of the featured hazard (first manifest, else first)"),
                       ("timeline", "Gantt chart of the run")):
        p = sub.add_parser(name, help=f"draw the {what}")
        p.add_argument("input", help="model file (.py) or op log (.jsonl)")
        p.add_argument("--variant")
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
        _add_sim_options(p)
        p.add_argument("-o", "--output", required=True, help="output file; format from extension")
        p.add_argument("--window", type=int, default=None, metavar="STEPS",
                       help="keep only the steps within STEPS of the featured hazard")
    from . import explore_commands as explore_cli
    explore_cli.add_parsers(sub, _add_run_options, _add_sim_options)
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


def main(argv: Sequence[str] | None = None) -> int:
    _console()
    args = build_parser().parse_args(argv)
    from . import commands, explore_commands as explore_cli
    handler = getattr(commands, f"cmd_{args.command}", None) or \
        getattr(explore_cli, f"cmd_{args.command}")
    try:
        return handler(args)
    except ModelError as e:
        print(f"streamsim: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # (an OSError: before it) the reader went away, e.g. `| head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except OSError as e:  # an output folder that cannot be made, a file that cannot be read
        where = f"{e.filename}: " if e.filename else ""
        print(f"streamsim: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
