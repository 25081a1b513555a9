"""`igniter-agent`: run | apply | status | profile (agents/commands.py).

Exit codes: 0 ok; 1 internal error (or a wait that did not succeed); 2 bad input, printed as
`FILE: field.path: what is wrong` with no traceback.

`status` is answered here without importing the other commands (the daemon, the servers'
specs, pydantic): the controller runs it on every node every tick (over SSH, or as a process
per local instance), where the full import cost more than the answer. Its arguments are parsed
as the full parser parses them; anything else goes to agents/commands.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path


def _status_parser() -> argparse.ArgumentParser:
    """The `status` subcommand's own parser (the same arguments as in commands._parser)."""
    stat = argparse.ArgumentParser(prog="igniter-agent status", description="what the agent runs and how it is doing")
    stat.add_argument("--state-dir", type=Path, required=True)
    stat.add_argument("--json", action="store_true")
    return stat


def status(argv: list[str]) -> int:
    from agents.node.status import print_status

    args = _status_parser().parse_args(argv)
    try:
        return print_status(args.state_dir, args.json)
    except Exception as exc:
        return failed(exc)


def failed(exc: Exception) -> int:
    """What every command does with an error it has no better answer for: a reader that left
    (`status --json | head`) is no error; the rest is one line, the traceback only on request."""
    if isinstance(exc, BrokenPipeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    print(f"igniter-agent: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
    if os.environ.get("IGNITER_DEBUG"):
        traceback.print_exc()
    return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["status"]:
        return status(args[1:])
    from agents.commands import main as full

    return full(argv)


if __name__ == "__main__":
    sys.exit(main())
