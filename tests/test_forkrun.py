"""tests/kit/forkrun.py: a run forked from the pre-imported process answers as `python -m autoscaler`
does, byte for byte (exit code, stdout, stderr), one run after another from the same process. The
kill -9 tests that use it (tests/fleet/test_ec2_warm_pool.py) count the -9 exits themselves."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT
from tests.kit.forkrun import ForkRunner

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def forked() -> Iterator[ForkRunner]:
    runner = ForkRunner()
    yield runner
    runner.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["validate", "policies/example.yaml"],
        ["validate", "/nonexistent/policy.yaml"],  # exit 2, one line
        ["no-such-command"],  # argparse's exit 2 (SystemExit)
    ],
)
def test_a_forked_run_answers_as_a_fresh_interpreter(forked: ForkRunner, argv: list[str]) -> None:
    fresh = subprocess.run(
        [sys.executable, "-m", "autoscaler", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    fork = forked.run(argv)
    assert (fork.returncode, fork.stdout, fork.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
