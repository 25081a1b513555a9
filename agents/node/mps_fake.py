"""A CPU stand-in for MPS with its one failure that matters: a GPU's MPS server dies and takes
every client on that GPU with it (`igniter-agent --fake-mps run --no-gpu`).

On a real GPU a fatal error in one MPS client (or in the MPS server) ends every client of that
GPU's MPS server (NVIDIA's MPS documentation, "Fault containment"). Here each GPU index gets a
real small daemon process (`python -m agents.node.mps_fake DIR`), started the first time a server
of that GPU is launched, and again after it died. A server is its client the way a real one is:
its CUDA_MPS_PIPE_DIRECTORY names the daemon's directory. The fault: SIGUSR1 to a daemon ("a
fatal GPU exception") makes it SIGKILL every process whose environment names its pipe directory,
then exit; the agent's supervisor then finds its servers dead and restarts them, which starts a
new daemon. Tests inject that fault (tests/gateway/test_redundancy.py); nothing else sends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agents.fsutil import private_dir
from agents.node.env_clients import processes_with
from agents.spec import ServerSpec

PID_FILE = "daemon.pid"


class FakeMps:
    """Mps for `--fake-mps`: one fake MPS daemon per GPU index under `root`/gpu<N>."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.daemons: dict[int, subprocess.Popen[bytes]] = {}

    def pipe_dir(self, gpu: int) -> Path:
        return self.root / f"gpu{gpu}" / "pipe"

    def ensure_running(self) -> None:
        return None  # per GPU, in server_env: the Mps protocol names no GPU here

    def server_env(self, spec: ServerSpec) -> dict[str, str]:
        """No GPU (CPU mode), the GPU's daemon running, and its pipe directory: what makes the
        server its client."""
        self._ensure(spec.gpu_index)
        return {"CUDA_VISIBLE_DEVICES": "", "CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir(spec.gpu_index))}

    def _ensure(self, gpu: int) -> None:
        proc = self.daemons.get(gpu)
        if proc is not None and proc.poll() is None:
            return
        pipe = private_dir(self.pipe_dir(gpu))
        (pipe / PID_FILE).unlink(missing_ok=True)
        self.daemons[gpu] = subprocess.Popen([sys.executable, "-m", "agents.node.mps_fake", str(pipe)])
        deadline = time.monotonic() + 10
        while not (pipe / PID_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # its signal handler is set once the file exists

    def stop(self) -> None:
        for proc in self.daemons.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        self.daemons = {}

    def describe(self) -> dict[str, Any]:
        """For status: the pid of each GPU's daemon while it runs (what a test sends the fault to)."""
        alive = {str(g): p.pid for g, p in self.daemons.items() if p.poll() is None}
        return {"enabled": False, "fake": True, "daemons": alive}


def clients(pipe: Path) -> list[int]:
    """The processes whose CUDA_MPS_PIPE_DIRECTORY is `pipe` (STATE/mps/gpuN/pipe): its clients."""
    return processes_with("CUDA_MPS_PIPE_DIRECTORY", str(pipe), pipe.parents[2] / "run")


def crash(pipe: Path) -> None:
    """The fault: every client dies at once, then the daemon."""
    for pid in clients(pipe):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os._exit(1)


def main(pipe: Path) -> None:
    signal.signal(signal.SIGUSR1, lambda *_: crash(pipe))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    (pipe / PID_FILE).write_text(str(os.getpid()))
    while True:
        signal.pause()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
