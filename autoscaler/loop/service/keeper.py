"""The local gateway's keeper: a thread of `igniter run` that starts haproxy again the moment it exits.

Event-driven, not polled: the thread blocks on the running haproxy's exit (gateway/listener.py,
a pidfd) and, when it comes, calls the gateway's `revive` (the configuration last ensured, the
servers it routed to), then books a tick at once, which observes the new process and routes the
rest. With the listening socket held by this process (gateway/listener.py), the clients that
connect in between are queued by the kernel and served by the new haproxy rather than refused.

Only the leader keeps the gateway (`revive` is fenced like every change to it): a standby waits
for the lease and lets go of the socket, so its leader can bind the port should it need to.
A gateway that will not start is retried every RETRY_S, as each tick's `ensure` also does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
WAIT_S = 1.0  # the longest a wait on the haproxy lasts before leadership is looked at again
RETRY_S = 0.5  # after a start that failed, or while nothing was ensured yet


class GatewayKeeper:
    def __init__(
        self,
        gateway: Any,
        leads: Callable[[], bool],
        started: Callable[[], None],
        *,
        wait_s: float = WAIT_S,
        retry_s: float = RETRY_S,
    ) -> None:
        self.gateway = gateway  # a LocalHaproxy, through the fence (revive raises NotLeader on a standby)
        self.leads = leads
        self.started = started  # called after a revive (the service books a tick)
        self.wait_s, self.retry_s = wait_s, retry_s
        self.stop = threading.Event()
        self.revived = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gateway-keeper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(self.wait_s + 5)

    def _run(self) -> None:
        while not self.stop.is_set():
            if not self.leads():
                self.stop.wait(self.retry_s)
                continue
            try:
                if self.gateway.wait_gone(self.wait_s) and not self._revive():
                    self.stop.wait(self.retry_s)
            except Exception:
                log.exception("gateway keeper: starting the gateway again failed")
                self.stop.wait(self.retry_s)

    def _revive(self) -> bool:
        """True when the gateway runs (again) now; False when nothing can be done yet."""
        if self.stop.is_set() or not self.leads():
            return False
        if self.gateway.running():
            return True  # a reload replaced the process we waited on
        if not self.gateway.revive():
            return False
        self.revived += 1
        log.warning("the gateway had exited: started it again (pid %s)", self.gateway.pid())
        self.started()
        return True
