"""The local gateway's listening socket, held by the autoscaler and lent to haproxy.

Why: a listening socket lives as long as some process holds it. When haproxy alone holds it and
dies (kill -9, a crash), the port closes and every client is refused until a new haproxy binds it
again. When `igniter run` created it and holds it too, haproxy's death closes nothing: the
kernel goes on completing handshakes and queues the connections in the socket's backlog, and the
replacement haproxy, started on the same socket (`bind fd@N`, the descriptor inherited through
subprocess's pass_fds), accepts them. Clients wait for the restart instead of being refused.

- `bind_listener`: bind and listen as haproxy would (SO_REUSEADDR, so connections of a dead
  gateway in TIME_WAIT do not block it; never SO_REUSEPORT, so a second gateway cannot quietly
  share the port), with a backlog that holds the connections of a restart;
- `adopt`: a later `igniter run` takes a duplicate of the socket from the haproxy it finds
  running (pidfd_getfd(2), Linux 5.6; the caller must be allowed to ptrace it: the same user
  without Yama's restriction, or root). haproxy does not hand out sockets it inherited
  (`_getsocks` exports only those it bound), so this is the one way back to it;
- `wait_exit`: block until a process exits (a pidfd becomes readable): the restart is driven by
  the exit itself, not by polling.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import select
import socket
import time

from autoscaler.fleet.procs import alive

BACKLOG = 4096  # connections queued while no haproxy accepts (the kernel caps it at net.core.somaxconn)
SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture (the unified syscall table)
_FD_BIND = re.compile(r"^\s*bind fd@(\d+)\b", re.MULTILINE)


class ListenError(OSError):
    """The listen address cannot be bound (another process holds it, or it is not this host's)."""


def bind_listener(host: str, port: int, backlog: int = BACKLOG) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ListenError(exc.errno, exc.strerror or str(exc)) from None
    return sock


def listens_on(sock: socket.socket, host: str, port: int) -> bool:
    """Whether `sock` is a listening TCP socket bound to host:port."""
    try:
        addr = sock.getsockname()
        listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
    except OSError:
        return False
    return listening and sock.type == socket.SOCK_STREAM and addr[1] == port and _same_host(addr[0], host)


def _same_host(bound: str, host: str) -> bool:
    try:
        return socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host) == socket.inet_pton(
            socket.AF_INET6 if ":" in bound else socket.AF_INET, bound
        )
    except OSError:
        return bound == host


def fd_in_config(text: str) -> int | None:
    """The descriptor number a configuration's frontend binds (`bind fd@N`); None for an address."""
    found = _FD_BIND.search(text)
    return int(found.group(1)) if found else None


def adopt(pid: int, fd: int, host: str, port: int) -> socket.socket | None:
    """A duplicate of descriptor `fd` of process `pid`, if it is a socket listening on host:port;
    None when it cannot be had (not permitted, no such descriptor, another kernel)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        got = int(libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0))
    except (AttributeError, OSError):
        return None
    finally:
        os.close(pidfd)
    if got < 0:
        return None
    try:
        sock = socket.socket(fileno=got)
    except OSError:
        os.close(got)
        return None
    if listens_on(sock, host, port):
        return sock
    sock.close()
    return None


def wait_exit(pid: int, timeout_s: float) -> bool:
    """Block until process `pid` exits, at most `timeout_s`; True when it is gone."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
            raise
        return _poll_gone(pid, timeout_s)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(max(0, round(timeout_s * 1000))))
    finally:
        os.close(pidfd)


def _poll_gone(pid: int, timeout_s: float) -> bool:
    """Where pidfds are missing (a kernel before 5.3): look every 50 ms."""
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
