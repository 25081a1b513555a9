"""Start inference servers as forks of one process that has imported torch already: the zygote.

An exec'd server (`python -m agents.server`, supervisor.launch_server) spends most of its start
importing torch: 1.5 to 2.2 s of CPU on 2 vCPUs (benchmarks/server_start.py), on every start and
every restart after a crash, while the other servers of the VM serve beside it. The zygote is
multiprocessing's fork server with the servers' modules preloaded (agents/server/preload.py): a
server forked from it starts with torch imported, and shares the zygote's pages until it writes
them. The agent starts it at its first server start; it exits when the agent does.

To the agent a forked server is what an exec'd one is (supervisor.ServerProcess): a session of
its own; its log file as stdout and stderr; the agent's environment with the server's own (MPS,
MIG) on top, set before anything reads it; SIGKILLed when its parent, the zygote, dies; and its
exit status relayed by the zygote (minus the signal that killed it, as Popen says). Its command
line reads as the exec'd server's would (setproctitle, shell-quoted), for ps, pkill -f, and the
tools that find servers by it.

No CUDA before the fork: each forked server initialises CUDA itself (preload.py checks that the
zygote did not). Until a GPU machine has proven the forked server under MPS and MIG, `auto` (the
agent's default) forks only on a CPU node and execs on a GPU node; `--server-start fork` opts in.
"""

from __future__ import annotations

import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
from multiprocessing.context import ForkServerContext
from pathlib import Path

from agents.fsutil import open_private
from agents.node.supervisor import ServerFiles, die_with_parent, prepare_files, server_argv
from agents.spec import ServerLimits, ServerSpec

STARTS = ("auto", "fork", "exec")  # igniter-agent run --server-start
PRELOAD = "agents.server.preload"
ZYGOTE_GONE = 255  # multiprocessing's exit code for a child whose fork server died before telling
_context: ForkServerContext | None = None


def forks(start: str, device: str) -> bool:
    """Whether servers are forked from the zygote (`start` as --server-start gives it)."""
    return start == "fork" or (start == "auto" and device == "cpu")


def zygote() -> ForkServerContext:
    """The fork server's context, its preload set once per agent process (it starts on first use)."""
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        assert isinstance(ctx, ForkServerContext)
        ctx.set_forkserver_preload([PRELOAD])
        _context = ctx
    return _context


class ForkedServer:
    """A server forked from the zygote, read as a Popen is (supervisor.ServerProcess)."""

    def __init__(self, proc: multiprocessing.process.BaseProcess) -> None:
        self._proc = proc
        assert proc.pid is not None
        self.pid: int = proc.pid
        self._zygote = parent_of(proc.pid)

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        """The exit status the zygote relayed. A zygote that died relays none (multiprocessing
        says 255); its servers were SIGKILLed with it (die_with_parent), and that is said."""
        code = self._proc.exitcode
        if code == ZYGOTE_GONE and self._zygote is not None and not _running(self._zygote):
            return -signal.SIGKILL
        return code

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired(f"agents.server (pid {self.pid})", timeout or 0.0)
        return code

    def terminate(self) -> None:
        self._proc.terminate()

    def kill(self) -> None:
        self._proc.kill()


def fork_server(
    spec: ServerSpec, env: dict[str, str], device: str, files: ServerFiles, limits: ServerLimits = ServerLimits()
) -> ForkedServer:
    """Start one server as a fork of the zygote (supervisor.launch_server's fork twin)."""
    prepare_files(files)
    argv = server_argv(spec, device, files, limits)
    proc = zygote().Process(
        target=_serve, args=(argv, {**os.environ, **env}, str(files.log)), name=spec.name, daemon=True
    )
    proc.start()
    return ForkedServer(proc)


def _serve(argv: list[str], env: dict[str, str], log: str) -> None:
    """The forked server, before and as `python -m agents.server` (agents/server/__main__.py)."""
    _let_the_zygote_go()
    parent = os.getppid()  # the zygote: the server exits once it is gone, as an exec'd one does the agent
    os.setsid()
    die_with_parent()
    if os.getppid() != parent:  # the zygote died before the prctl took effect
        os._exit(3)
    fd = open_private(Path(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    argv = [*argv, "--parent-pid", str(parent)]
    from setproctitle import setproctitle  # before the environment changes: it reuses its memory

    setproctitle(shlex.join([sys.executable, "-m", "agents.server", *argv]))
    os.environ.clear()
    os.environ.update(env)  # before CUDA reads CUDA_VISIBLE_DEVICES and the MPS variables
    from agents.server.main import main

    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _let_the_zygote_go() -> None:
    """Close the fork server's keep-alive pipe that multiprocessing hands every child (a child may
    fork more processes through it): a server holding it would keep the zygote alive after the
    agent's death, and the zygote's life is what ends the server's (die_with_parent)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        os.close(fd)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent, ..., utime, stime at
    11 and 12); None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def parent_of(pid: int) -> int | None:
    """The parent of `pid` (a forked server's zygote); None once it is gone."""
    fields = proc_stat(pid)
    return int(fields[1]) if fields else None


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead and not yet reaped, does not)."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"
