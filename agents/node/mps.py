"""NVIDIA MPS: the control daemon's lifecycle and the environment that gives a server its GPU share.

A process's active-thread percentage is read once, when its CUDA context is created, so a share
change means restarting that server; the daemon does that because any spec change restarts.
The agent runs its own control daemon with its own pipe and log directories (under the state
directory), so it neither needs nor disturbs a system-wide MPS setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agents.fsutil import private_dir
from agents.spec import ServerSpec

CONTROL_BINARY = "nvidia-cuda-mps-control"


class MpsError(RuntimeError):
    """MPS could not be started or reached; the servers that need it count a failed start."""


class Mps(Protocol):
    """How the daemon prepares GPU sharing and each server's environment."""

    def ensure_running(self) -> None: ...

    def server_env(self, spec: ServerSpec) -> dict[str, str]: ...

    def stop(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class NoMps:
    """CPU mode: servers see no GPU at all, so torch cannot pick one up by accident."""

    def ensure_running(self) -> None:
        return None

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": ""}

    def stop(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"enabled": False}


class SliceDirsOnly:
    """A MIG slice on a machine without MPS (the fake device on a CPU machine): the server gets the
    slice's MIG-<uuid> and its own pipe and log directories, but no daemon runs."""

    def __init__(self, root: Path, visible: str) -> None:
        self.pipe_dir = root / "pipe"
        self.log_dir = root / "log"
        self.visible = visible

    def ensure_running(self) -> None:
        private_dir(self.pipe_dir)
        private_dir(self.log_dir)

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        return {
            "CUDA_VISIBLE_DEVICES": self.visible,
            "CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir),
            "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": share_text(spec.mps_percent),
        }

    def stop(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"enabled": False, "pipe_dir": str(self.pipe_dir), "log_dir": str(self.log_dir)}


def share_text(percent: float) -> str:
    """30.0 -> "30", 37.5 -> "37.5": the form CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is given in."""
    return f"{percent:g}"


Runner = Callable[..., subprocess.CompletedProcess]


class NvidiaMps:
    """The real thing: `nvidia-cuda-mps-control -d`, driven through subprocess."""

    def __init__(
        self, root: Path, binary: str = CONTROL_BINARY, run: Runner = subprocess.run, visible: str | None = None
    ) -> None:
        self.pipe_dir = root / "pipe"
        self.log_dir = root / "log"
        self._binary = binary
        self._run = run
        self.visible = visible  # a MIG slice's MIG-<uuid>: this daemon serves that slice only
        self.started_by_agent = False
        self.last_seen_running = False

    def _env(self) -> dict[str, str]:
        """The daemon must see every GPU (no CUDA_VISIBLE_DEVICES), or indices would be remapped;
        a slice's daemon sees its slice only (NVIDIA's MPS-on-MIG setup: one daemon per slice)."""
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        if self.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.visible
        env.update(CUDA_MPS_PIPE_DIRECTORY=str(self.pipe_dir), CUDA_MPS_LOG_DIRECTORY=str(self.log_dir))
        return env

    def _control(self, command: str) -> subprocess.CompletedProcess:
        """One command to the control daemon; exit status 0 means the daemon answered."""
        return self._run(
            [self._binary], input=command + "\n", env=self._env(), capture_output=True, text=True, timeout=10
        )

    def is_running(self) -> bool:
        try:
            self.last_seen_running = self._control("get_server_list").returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            self.last_seen_running = False
        return self.last_seen_running

    def ensure_running(self) -> None:
        """Start our control daemon unless it already answers on our pipe directory."""
        if self.is_running():
            return
        if shutil.which(self._binary) is None and os.sep not in self._binary:
            raise MpsError(f"{self._binary} not found on PATH (install the NVIDIA driver utilities)")
        private_dir(self.pipe_dir)
        private_dir(self.log_dir)
        done = self._run([self._binary, "-d"], env=self._env(), capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise MpsError(f"{self._binary} -d failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
        self.started_by_agent = True
        self._wait_until_running(5.0)

    def _wait_until_running(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.is_running():
            if time.monotonic() > deadline:
                raise MpsError(
                    f"MPS control daemon did not answer within {timeout_s:.0f} s; see {self.log_dir}/control.log"
                )
            time.sleep(0.1)

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        """The assigned GPU (in NVML / nvidia-smi order), our pipe directory and the thread share."""
        return {
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "CUDA_VISIBLE_DEVICES": self.visible if self.visible is not None else str(spec.gpu_index),
            "CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir),
            "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": share_text(spec.mps_percent),
        }

    def stop(self) -> None:
        """Quit the control daemon, only if this agent started it (or it serves a slice of ours,
        which an agent before a restart started)."""
        if self.started_by_agent or (self.visible is not None and self.last_seen_running):
            try:
                self._control("quit")
            except (OSError, subprocess.TimeoutExpired):
                pass
            self.started_by_agent = False

    def describe(self) -> dict[str, Any]:
        """For status; no subprocess here, it runs every loop."""
        return {
            "enabled": True,
            "pipe_dir": str(self.pipe_dir),
            "log_dir": str(self.log_dir),
            "running": self.last_seen_running,
            "started_by_agent": self.started_by_agent,
        }
