"""`igniter`: the autoscaler's command line. Each subcommand lives in its own module.

Exit codes (contract): 0 ok; 1 internal error; 2 bad input (FILE: field: message, no traceback);
3 a plan that leaves workloads unplaced.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

import agents.logs as logs
import autoscaler
from autoscaler.cli import extras
from autoscaler.config.errors import InputError
from autoscaler.loop.state import fit_files
from autoscaler.loop.tick import collect

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_UNPLACED = 0, 1, 2, 3

# Subcommand modules; each exposes register(subparsers). Missing optional ones are skipped.
COMMANDS = (
    "validate",
    "predict",
    "plan",
    "run",
    "down",
    "simulate",
    "forecast",
    "trace",
    "profile",
    "models",
    "example",
)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message short and traceback-free."""


def add_log_format(parser: argparse.ArgumentParser, *, default: object = "text") -> None:
    """`--log-format text|json`, before the subcommand or (for `run`) after it."""
    parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=default,
        help="stderr log lines: text (default) or json, one object per line with time, level, logger, message, fleet, tick",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="igniter", description="Interference-aware autoscaler for GPU inference fleets (iGniter).")
    parser.add_argument("--version", action="version", version=f"igniter {autoscaler.__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    add_log_format(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"autoscaler.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"autoscaler.cli.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and map errors to the contract's exit codes. Without `argv`
    this process runs the command line it was started with (the `igniter` script, `python -m
    autoscaler`): its heap is the controller's own (loop/tick/collect.py), which a caller that
    passes `argv` (a test, a notebook) need not be."""
    if _version_asked(sys.argv[1:] if argv is None else list(argv)):
        print(f"igniter {autoscaler.__version__}")  # before the subcommands: an agent-only install has none
        raise SystemExit(EXIT_OK)  # as argparse's version action ends, and igniter-agent's
    try:
        args = build_parser().parse_args(argv)
    except ModuleNotFoundError as exc:  # before a command runs: the install lacks an extra
        if extras.extra_for(exc.name) is None:
            raise
        return _missing_extra(exc, None)
    logs.configure(getattr(args, "log_format", "text"), logging.DEBUG if args.verbose else logging.INFO)
    fit_files.keep_fits(os.environ)  # the fitted profiles kept between processes
    if argv is None:
        collect.own_heap()
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ModuleNotFoundError as exc:
        if extras.extra_for(exc.name) is None:
            logging.getLogger("igniter").exception("internal error: %s", exc)
            return EXIT_INTERNAL
        return _missing_extra(exc, args.command)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        logging.getLogger("igniter").exception("internal error: %s", exc)
        return EXIT_INTERNAL


def _version_asked(argv: Sequence[str]) -> bool:
    """`igniter [OPTIONS] --version`: answered without importing the subcommands, whose
    libraries (the service extra) an agent-only install lacks; the `igniter` script is there too."""
    args = iter(argv)
    for arg in args:
        if arg == "--version":
            return True
        if arg == "--log-format":
            next(args, None)
        elif not arg.startswith("-"):
            return False  # a subcommand: its own parser decides
    return False


def _missing_extra(exc: ModuleNotFoundError, command: str | None) -> int:
    """One line naming the extra to install (exit 2)."""
    extra = extras.extra_for(exc.name)
    what = f"igniter {command}" if command else "igniter"
    print(
        f"error: {what} needs the {extra} extra ({exc.name} is not installed): {extras.install_hint(extra)}",
        file=sys.stderr,
    )
    return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
