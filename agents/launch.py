"""How another process on this machine runs `igniter-agent` (the local provider and transport, tests).

`igniter-agent` from PATH, else the script next to this interpreter (an unactivated venv), else
`python -m agents.cli`: the same agent, however the package was installed.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def resolve_agent_command(command: str) -> list[str]:
    """The argv that runs `command` (a configured agent command such as "igniter-agent")."""
    argv = shlex.split(command)
    if argv and argv[0] == "igniter-agent" and shutil.which("igniter-agent") is None:
        beside = Path(sys.executable).parent / "igniter-agent"
        return [str(beside), *argv[1:]] if beside.exists() else [sys.executable, "-m", "agents.cli", *argv[1:]]
    return argv
