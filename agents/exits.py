"""How `igniter-agent`'s commands end on an error they have no better answer for (agents/cli.py for
`status`, agents/commands.py for the rest): light, so that `status` stays light."""

from __future__ import annotations

import os
import sys
import traceback


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
