"""Keeps a process's Fence in step with its fleet's lease, on a thread of its own.

The leader renews every `renew_s` (a third of the lease), whatever its ticks are doing: a tick
that outlasts the lease must not lose it. A standby tries every `poll_s` (at most a third of a
tick), so it takes over within `lease_s` plus one tick of the leader's death. Every change of
role is logged, counted, and passed to `on_change` (the service ticks at once on taking over).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from autoscaler.leader.base import Fence, Lease, LeaseError, Term

log = logging.getLogger(__name__)


class Leadership:
    def __init__(
        self,
        lease: Lease,
        fence: Fence,
        *,
        fleet: str,
        poll_s: float,
        renew_s: float,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.lease, self.fence, self.fleet = lease, fence, fleet
        self.poll_s, self.renew_s = poll_s, renew_s
        self.clock = clock
        self.on_change = on_change
        self.term: Term | None = None
        self.leader = False  # the role last logged
        self.error: str | None = None
        self.changes = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def attempt(self, strict: bool = False) -> Term | None:
        """One round trip to the lease; the fence follows. A failed one leaves the term to run out
        (`strict`, at start: a permanent failure, e.g. no such table, is raised instead)."""
        with self._lock:
            try:
                term = self.lease.attempt(self.clock())
            except LeaseError as exc:
                if strict and exc.permanent:
                    raise
                self.error = str(exc)
                log.warning("lease of fleet %s: %s (a held term runs out by itself)", self.fleet, exc)
                self._settle()
                return None
            self.term, self.error = term, None
            self.fence.grant(term)
            self._settle()
            return term

    def _settle(self) -> None:
        """Log and report a change of role (the fence decides: a term may just have run out)."""
        leader = self.fence.held
        if leader == self.leader and self.changes:
            return
        self.leader, self.changes = leader, self.changes + 1
        term = self.term
        if leader and term is not None:
            log.info("leader: %s holds the lease of fleet %s (token %d)", self.lease.owner, self.fleet, term.token)
        else:
            why = self.error or self.fence.why
            log.warning("standby: %s acts on nothing for fleet %s (%s)", self.lease.owner, self.fleet, why)
        if self.on_change is not None:
            self.on_change(leader)

    def wait_for_term(self, timeout_s: float) -> bool:
        """For `--once`: try until leader, or until the holder is shown alive, or `timeout_s`."""
        deadline = self.clock() + timeout_s
        while True:
            term = self.attempt()
            if self.fence.held or (term is not None and term.holder_alive) or self.clock() >= deadline:
                return self.fence.held
            self._stop.wait(self.poll_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="igniter-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.renew_s if self.fence.held else self.poll_s):
            self.attempt()

    def stop(self) -> None:
        """Stop trying, and give the lease up so a standby need not wait for it to run out."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            self.fence.revoke("this process is stopping")
            self.lease.release()

    def snapshot(self) -> dict[str, Any]:
        """What /healthz and /v1/leader show."""
        term = self.term
        return {
            "role": "leader" if self.fence.held else "standby",
            "kind": self.lease.kind,
            "owner": self.lease.owner,
            "holder": term.holder if term is not None else "",
            "token": term.token if term is not None else None,
            "lease_s": self.lease.lease_s if self.lease.kind != "local" else None,
            "note": self.error or self.fence.why,
        }
