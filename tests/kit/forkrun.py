"""`igniter ARGS...` as real processes, forked from one that has already imported the product.

A kill -9 test runs `igniter run --once` a dozen times or more; each fresh interpreter spent about
0.85 s of CPU importing the CLI, the planner (scipy, numpy) and boto3 before its tick, which took
0.35 s: on a loaded 2-core machine that import was most of the test. Here one helper process (the
"zygote", `python -m tests.kit.forkrun`, one per module fixture) imports all of that, and fits the
bundled GPU profiles, once; each run is an `os.fork()` of it that sets the run's environment,
working directory and output files, then calls `autoscaler.cli.main(argv)` and exits with its
code, as `python -m autoscaler` does. The child is a process of its own: a fault point's SIGKILL
kills it and nothing else, the exit status is the kernel's (-9), and no state passes from one run
to the next (each starts from the same freshly imported zygote; the product reads its environment
when it runs, not when it is imported).

The zygote is single-threaded, so forking it is safe; pytest's process (moto's server threads) is
never forked.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PRELOAD = ("autoscaler.loop.service.wiring", "autoscaler.fleet.ec2", "autoscaler.loop.tick.controller", "boto3")


class ForkRunner:
    """One zygote; `run(argv, env)` forks a run from it and waits for its exit, like subprocess.run."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="forkrun-"))
        cmd = [sys.executable, "-m", "tests.kit.forkrun", *preload]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO, text=True)
        self.n, self.pending = 0, b""
        if self._read(120.0) != {"ready": True}:
            raise RuntimeError("the fork server did not start")

    def _read(self, timeout: float) -> dict[str, Any]:
        """The zygote's next answer line (read from its fd: no buffer hides a second line from select)."""
        assert self.proc.stdout is not None
        fd, deadline = self.proc.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                raise RuntimeError(f"the fork server answered nothing in {timeout} s (exit {self.proc.poll()})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return dict(json.loads(line))

    def run(
        self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 180.0
    ) -> subprocess.CompletedProcess[str]:
        """Run `igniter *argv` in a forked process; its stdout and stderr come back as text."""
        assert self.proc.stdin is not None
        self.n += 1
        out, err = self.dir / f"{self.n}.out", self.dir / f"{self.n}.err"
        request = {"argv": argv, "env": dict(os.environ if env is None else env), "cwd": str(REPO)}
        self.proc.stdin.write(json.dumps(request | {"stdout": str(out), "stderr": str(err)}) + "\n")
        self.proc.stdin.flush()
        pid = int(self._read(30.0)["pid"])
        try:
            rc = int(self._read(timeout)["rc"])
        except RuntimeError:
            os.kill(pid, signal.SIGKILL)
            self._read(30.0)
            raise subprocess.TimeoutExpired(["igniter", *argv], timeout) from None
        stdout, stderr = out.read_text(), err.read_text()
        out.unlink()
        err.unlink()
        return subprocess.CompletedProcess(["igniter", *argv], rc, stdout, stderr)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in self.dir.iterdir():
            f.unlink()
        self.dir.rmdir()


def once(runner: ForkRunner, policy: Path, state: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """`igniter run POLICY --once --state STATE`, killed at fault point `fault` if one is named."""
    env = {k: v for k, v in os.environ.items() if k != "IGNITER_FAULT"}
    if fault:
        env["IGNITER_FAULT"] = fault
    return runner.run(["run", str(policy), "--once", "--state", str(state)], env)


def _child(request: dict[str, Any]) -> int:
    """In the forked process: become the run (cwd, environment, fds 0-2), then `igniter ARGV`."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["igniter", *request["argv"]]
    from autoscaler.cli import main

    try:
        return main(request["argv"])
    except SystemExit as exc:  # what the interpreter makes of it
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # as the interpreter would: the traceback on stderr, exit 1
        traceback.print_exc()
        return 1


def _end(rc: int) -> int:
    """What the interpreter does at exit that a run could notice: wait for the threads it left
    running (a hung one hangs the run, as it would a fresh process), run atexit, flush the streams.
    Module teardown is skipped (os._exit): it cost 0.2 s of CPU a run and nothing reads it."""
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return rc & 0xFF


def _fit_bundled_profiles() -> None:
    """Fit the bundled GPU profiles here, once: every run's controller fitted them again (about
    half of a forked run's CPU). load_perf_model keys a fit by the file's path and modification
    time, so a run whose policy names other profiles, or a profile edited since, fits its own.
    Read from the fits kept on disk where the CLI would find them (loop/state/fit_files.py)."""
    from autoscaler.config.policy import BUNDLED_PROFILES
    from autoscaler.loop.state import fit_files
    from autoscaler.model.perfmodel import load_perf_model

    fit_files.keep_fits(os.environ)
    for path in sorted(BUNDLED_PROFILES.glob("*.yaml")):
        load_perf_model(path)


def _serve(preload: list[str]) -> None:
    """The zygote: import, then fork one run per request line, answering its pid and its exit."""
    import importlib

    from autoscaler.cli import build_parser

    build_parser()  # every subcommand's module
    for name in preload:
        importlib.import_module(name)
    _fit_bundled_profiles()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os._exit(_end(_child(request)))
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1:])
