"""How another process on this machine runs `igniter-agent` (the local provider and transport, tests).

`igniter-agent` from PATH, else the script next to this interpreter (an unactivated venv), else
`python -m agents.cli`: the same agent, however the package was installed. `agent_env` is the
environment it gets: an allow-list, so the autoscaler's own secrets (AWS keys, tokens) never
reach an agent or the inference servers it starts (docs/agent.md, Environment).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

# What an agent and its servers read: the process basics, the locale, Python's own settings,
# thread counts of torch's maths libraries, and the variables the agent reads itself.
AGENT_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE", "NO_COLOR",
        "TMPDIR", "TEMP", "TMP", "XDG_RUNTIME_DIR",
        "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONHASHSEED",
        "PYTHONWARNINGS", "PYTHONFAULTHANDLER", "PYTHONMALLOC", "VIRTUAL_ENV", "COVERAGE_PROCESS_START",
        "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
        "IGNITER_FLEET", "IGNITER_DEBUG",
    }
)  # fmt: skip
# Prefixes kept whole: the locale, and the GPU stack (CUDA_VISIBLE_DEVICES, CUDA_MPS_*, NVIDIA_*, TORCH_*).
AGENT_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TORCH_")


def agent_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (default: this process's) an agent may see; every other one,
    AWS_SECRET_ACCESS_KEY among them, stays behind."""
    source = os.environ if environ is None else environ
    return {k: v for k, v in source.items() if k in AGENT_ENV or k.startswith(AGENT_ENV_PREFIXES)}


def resolve_agent_command(command: str) -> list[str]:
    """The argv that runs `command` (a configured agent command such as "igniter-agent")."""
    argv = shlex.split(command)
    if argv and argv[0] == "igniter-agent" and shutil.which("igniter-agent") is None:
        beside = Path(sys.executable).parent / "igniter-agent"
        return [str(beside), *argv[1:]] if beside.exists() else [sys.executable, "-m", "agents.cli", *argv[1:]]
    return argv
