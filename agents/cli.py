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
import sys
from pathlib import Path

from agents.exits import failed


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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["status"]:
        return status(args[1:])
    from agents.commands import main as full

    return full(argv)


if __name__ == "__main__":
    sys.exit(main())
