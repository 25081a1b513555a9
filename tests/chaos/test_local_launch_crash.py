"""The local provider killed (SIGKILL) between starting an agent and writing its pid: the agent
is no orphan. A new provider over the same directory lists it, a relaunch of the slot returns it
instead of starting a second agent (which would find the directory locked and exit), and
terminate stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoscaler.fleet.local import LocalProvider
from autoscaler.fleet.procs import alive, find_owned
from tests.chaos.report import record

pytestmark = [pytest.mark.e2e, pytest.mark.chaos]

CRASH = """
import os, signal, sys
from pathlib import Path
from autoscaler.fleet.local import LocalProvider

prov = LocalProvider("lp", Path(sys.argv[1]), int(sys.argv[2]))
write = prov._write
def dies_after_the_spawn(state_dir, meta):
    if meta.get("pid"):
        os.kill(os.getpid(), signal.SIGKILL)
    write(state_dir, meta)
prov._write = dies_after_the_spawn
prov.launch("lp-p3-0", "p3.2xlarge", 1)
"""


def test_an_agent_started_by_a_launch_killed_before_its_pid_was_written_is_adopted(tmp_path: Path) -> None:
    from tests.kit.fleet import free_base

    root, base = tmp_path / "instances", free_base(100)
    done = subprocess.run([sys.executable, "-c", CRASH, str(root), str(base)], timeout=60, check=False)
    assert done.returncode == -9
    marker = f"run --state-dir {root.resolve() / 'local-lp-p3-0-a0'} --no-gpu"
    orphan = find_owned(marker)
    assert orphan is not None  # the agent runs on
    later = LocalProvider("lp", root, base)
    try:
        listed = later.list_instances()
        assert [i.id for i in listed] == ["local-lp-p3-0-a0"]
        again = later.launch("lp-p3-0", "p3.2xlarge", 1)
        assert again.id == "local-lp-p3-0-a0" and find_owned(marker) == orphan
    finally:
        for inst in later.list_instances():
            later.terminate(inst.id)
        left = find_owned(marker)
        if left is not None:  # a failed run leaves no process behind either
            os.killpg(left, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while alive(orphan) and time.monotonic() < deadline:
        time.sleep(0.1)
    record("local_launch_crash", orphans=int(alive(orphan) or find_owned(marker) is not None))
    assert not alive(orphan) and find_owned(marker) is None
