"""Shared fixtures: repository paths and a helper to run the `igniter` CLI in-process or as a process."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# fixtures shared across packages: real backends (moto, sshd, a tiny model), small sim policies
pytest_plugins = ["tests.kit.backends", "tests.kit.sim"]

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "policies" / "profiles"
DATA = ROOT / "tests" / "data"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def igniter(capsys: pytest.CaptureFixture[str]):
    """Run `igniter ARGS...` in-process (fast); returns exit code, stdout and stderr."""
    from autoscaler.cli import main

    def run(*args: str) -> Result:
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        cap = capsys.readouterr()
        return Result(code, cap.out, cap.err)

    return run


def run_cli(*args: str, stdin: str | None = None, timeout: float = 120) -> Result:
    """Run `python -m autoscaler ARGS` as a real process, as a user would."""
    proc = subprocess.run(
        [sys.executable, "-m", "autoscaler", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
