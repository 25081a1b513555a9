"""`make test`'s `--dist loadgroup` keeps an `xdist_group`'s tests on one worker (tests/kit/xdist_groups.py:
pytest 9 lost pytest-xdist's own way of naming the group), so a module-scoped fixture they share is built
once; tests outside a group still spread over the workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e  # starts pytest and its xdist workers

MODULE = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("shared")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass


@pytest.mark.parametrize("i", range(6))
@pytest.mark.xdist_group(name="other")
def test_other_group(i):
    pass
"""

SPREAD = """
import time
import pytest


@pytest.mark.parametrize("i", range(6))
def test_free(i):
    time.sleep(0.2)
"""


def test_a_groups_tests_run_on_one_worker_and_the_rest_spread(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "test_spread.py").write_text(SPREAD)
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.kit.xdist_groups", "-n", "2", "--dist", "loadgroup", "-v"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [*cmd, "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, test in re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", done.stdout):
        workers[test.split("::")[1].split("[")[0]].add(worker)
    assert set(workers) == {"test_grouped", "test_other_group", "test_free"}, done.stdout
    assert len(workers["test_grouped"]) == 1 and len(workers["test_other_group"]) == 1, dict(workers)
    assert len(workers["test_free"]) == 2, dict(workers)  # no group: both workers take some
