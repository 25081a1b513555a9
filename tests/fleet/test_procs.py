"""fleet/procs.py: a pid file's pid is ours only while it runs and names our marker."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autoscaler.fleet import procs


@pytest.mark.unit
def test_this_process_is_alive_but_not_owned_without_its_marker() -> None:
    assert procs.alive(os.getpid())
    assert not procs.owned(os.getpid(), "/no/such/state-dir-marker")


@pytest.mark.e2e
def test_no_pid_and_a_gone_pid_are_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not procs.alive(proc.pid)
    assert not procs.alive(0) and not procs.alive(-1)


@pytest.mark.e2e
def test_a_zombie_counts_as_gone(tmp_path) -> None:
    marker = str(tmp_path / "state")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(0)", marker])
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped
        assert not procs.alive(proc.pid)
        assert not procs.owned(proc.pid, marker)
    finally:
        proc.wait()


@pytest.mark.e2e
def test_a_running_child_is_owned_only_by_its_marker(tmp_path) -> None:
    marker = str(tmp_path / "state")
    code = "import time; print('up', flush=True); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code, marker], stdout=subprocess.PIPE, text=True)
    try:
        # the kernel shows an empty command line for a moment while execve sets up the new image
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        assert procs.owned(proc.pid, marker)
        assert not procs.owned(proc.pid, str(tmp_path / "other"))
    finally:
        proc.kill()
        proc.wait()
