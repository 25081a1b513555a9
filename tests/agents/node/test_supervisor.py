"""Restart policy (pure) and the per-server state machine driven by a test clock, with real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.node.supervisor import ManagedServer, RestartPolicy, ServerFiles, describe_exit, last_line
from agents.spec import ServerSpec

SPEC = ServerSpec(name="s", workload="w", model_dir="/m", batch=1, mps_percent=10, port=1)


@pytest.mark.unit
def test_backoff_doubles_from_one_second_and_gives_up_at_five_crashes_in_five_minutes() -> None:
    policy = RestartPolicy()
    crashes: list[float] = []
    delays = []
    for now in (0.0, 1.0, 3.0, 7.0, 15.0):
        crashes.append(now)
        delays.append(policy.delay_after(crashes, now))
    assert delays == [1.0, 2.0, 4.0, 8.0, None]


@pytest.mark.unit
def test_old_crashes_leave_the_window_and_the_backoff_is_capped() -> None:
    policy = RestartPolicy(crash_limit=100)
    assert policy.delay_after([0.0, 10.0, 400.0], 400.0) == 1.0  # only the crash at 400 is recent
    assert policy.delay_after([float(t) for t in range(20)], 20.0) == 30.0


@pytest.mark.unit
def test_exit_descriptions() -> None:
    assert describe_exit(-9, "ignored") == "killed by SIGKILL"
    assert describe_exit(1, "ValueError: bad") == "exited with code 1: ValueError: bad"
    assert describe_exit(0, None) == "exited with code 0"


@pytest.mark.unit
def test_last_line_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("first\nigniter-server: fatal: boom\n\n")
    assert last_line(log) == "igniter-server: fatal: boom"
    assert last_line(tmp_path / "missing.log") is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0


def _crashing_launch(spec: ServerSpec, files: ServerFiles) -> subprocess.Popen:
    """A real process that dies at once, saying why on its log, as a broken server would."""
    files.log.parent.mkdir(parents=True, exist_ok=True)
    with open(files.log, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-c", "import sys; print('fatal: no GPU memory'); sys.exit(7)"], stdout=log
        )


def _tick_until_exit(server: ManagedServer, clock: Clock) -> None:
    assert server.proc is not None
    server.proc.wait(10)
    server.tick(clock.now)


@pytest.mark.e2e
def test_a_crash_looping_server_backs_off_then_fails_with_its_last_error(tmp_path: Path) -> None:
    clock = Clock()
    server = ManagedServer(SPEC, ServerFiles.under(tmp_path, "s"), _crashing_launch, RestartPolicy(), clock.now)
    server.tick(clock.now)  # first start
    for expected_delay in (1.0, 2.0, 4.0, 8.0):
        _tick_until_exit(server, clock)
        assert server.state == "starting" and server.next_start_at == pytest.approx(clock.now + expected_delay)
        server.tick(clock.now + expected_delay - 0.01)
        assert server.proc is None, "restarted before its backoff ran out"
        clock.now += expected_delay
        server.tick(clock.now)
    _tick_until_exit(server, clock)
    assert server.state == "failed" and server.restarts == 4
    assert server.last_error == "exited with code 7: fatal: no GPU memory"
    server.tick(clock.now + 1000)
    assert server.proc is None and server.state == "failed"


@pytest.mark.unit
def test_a_launch_that_raises_counts_as_a_crash(tmp_path: Path) -> None:
    def refuse(spec: ServerSpec, files: ServerFiles) -> subprocess.Popen:
        raise RuntimeError("MPS control daemon did not answer")

    server = ManagedServer(SPEC, ServerFiles.under(tmp_path, "s"), refuse, RestartPolicy(), 0.0)
    server.tick(0.0)
    assert server.state == "starting" and server.last_error == "could not start: MPS control daemon did not answer"
    assert server.next_start_at == 1.0


@pytest.mark.e2e
def test_terminate_and_wait_stop_a_live_process(tmp_path: Path) -> None:
    def sleeper(spec: ServerSpec, files: ServerFiles) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    server = ManagedServer(SPEC, ServerFiles.under(tmp_path, "s"), sleeper, RestartPolicy(), 0.0)
    server.tick(0.0)
    proc = server.proc
    assert proc is not None
    server.terminate()
    server.wait_stopped(deadline=time.monotonic() + 5)
    assert proc.returncode is not None and server.state == "stopped" and server.describe()["pid"] is None
