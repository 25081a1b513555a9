"""Shared fixtures: repository paths and a helper to run the `igniter` CLI in-process or as a process."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kit.examples import load_profile

# fixtures shared across packages: real backends (moto, sshd, a tiny model), small sim policies
pytest_plugins = ["tests.kit.backends", "tests.kit.sim", "tests.kit.xdist_groups"]

# The test tiers (pyproject.toml's markers): every test carries at least one. `make check` runs
# `-m "not e2e and not slow"`; `make test` runs them all.
TIERS = ("unit", "property", "e2e", "slow")

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "policies" / "profiles"
DATA = ROOT / "tests" / "data"

load_profile()  # `make check`: a share of each property's examples (tests/kit/examples.py)


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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse the run when a collected test has no tier, or a hypothesis test lacks `property`:
    a new test cannot land outside `make check`'s selection by forgetting its marker."""
    bad = []
    for item in items:
        tiers = {t for t in TIERS if item.get_closest_marker(t)}
        if not tiers:
            bad.append(f"{item.nodeid}: no tier marker")
        elif getattr(getattr(item, "obj", None), "is_hypothesis_test", False) and "property" not in tiers:
            bad.append(f"{item.nodeid}: a hypothesis test without the `property` marker")
    if bad:
        shown = "\n  ".join(bad[:20]) + (f"\n  ... and {len(bad) - 20} more" if len(bad) > 20 else "")
        raise pytest.UsageError(
            f"{len(bad)} test(s) outside the tiers {', '.join(TIERS)} (pyproject.toml's markers): mark each "
            f"module with `pytestmark = pytest.mark.<tier>` (or the test itself where a file mixes tiers):\n  {shown}"
        )
