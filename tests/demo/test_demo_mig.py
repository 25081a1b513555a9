"""`make demo-mig` end to end: the real controller re-cuts a fake A100's slices under live HTTP load
(a stand-in on a surge instance first, the old slice drained, destroyed and cut again) with no
failed or refused request, and leaves no process behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from autoscaler.demo.procs import pids_with, sweep
from tests.conftest import ROOT
from tests.kit.agent import free_port
from tests.kit.mig import needs_shared

pytestmark = [pytest.mark.e2e, pytest.mark.slow, needs_shared]


def test_the_mig_demo_re_cuts_under_load_without_a_failed_request() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "autoscaler.demo.mig", "--port", str(free_port())],  # not 8000: the other demo's
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=330,
        check=False,
    )
    out = done.stdout + done.stderr
    root = re.search(r"\(state in (\S+?)\)", out.replace("\n", ""))
    if root is not None and pids_with(root.group(1)):  # a demo that failed its own teardown
        sweep(root.group(1))
        pytest.fail(f"processes left behind\n{out}")
    assert done.returncode == 0, out
    assert "re-cut completed; stand-ins a-1-s0" in out
    sent = re.search(r"requests: (\d+) sent, 0 failed, 0 refused; processes left: 0", out)
    assert sent is not None and int(sent.group(1)) > 500, out
    assert re.search(r"cut 0\[a-0:3g\.40gb@0 b-0:3g\.40gb@4\]", out)  # the first cut
    assert re.search(r"surge0\[a-1-s0\*:4g\.40gb@0\]", out)  # the stand-in on the surge instance
    assert re.search(r"cut 0\[b-0:3g\.40gb@4 a-1:4g\.40gb@0\]\s+surge -", out)  # re-cut, surge retired
