"""One leader per fleet: the Lease contract every backend implements, and the Fence that every
mutating call goes through. Pure: time is passed in (a monotonic clock), no I/O.

Contract (after the standard DynamoDB lease, amazon-dynamodb-lock-client, and Kubernetes'
leader election):
- `Lease.attempt(now)` is one round trip: a holder renews, a candidate tries to take the lease. It
  returns a Term: leader or not, the fencing token of the tenure, who holds the record.
- The fencing token grows with every new tenure, so a leader that was replaced can tell (its
  renewal names the token it had, and fails).
- A term is valid until `valid_until` on the holder's own monotonic clock: the time its request
  was *sent* plus the lease, less a margin. A candidate takes over only once it has seen the same
  record version unchanged for a whole lease on its own clock, so the old term ends at least a
  margin before the new one can begin, whatever the two hosts' wall clocks say.
- `release()` gives the lease up at once (a clean shutdown: the standby need not wait).

The Fence turns that into the one check before every mutating call: `fence.check("launch")`
raises NotLeader once the term is over. A paused process (SIGSTOP, a long GC, a VM migration)
that wakes up after its term finds the fence closed before it can act. wiring.py wraps the
Provider and the Transport (loop/service/fence.py); anything else that mutates the fleet (a gateway)
takes the same Fence and calls `check` first, or is wrapped with `Fence.guard(obj, methods)`.
A check before a call still leaves the time between it and the request: loop/service/fence.py's
`bind_aws` checks the same Fence again inside each AWS client, just before a mutating request is
written to the socket, and raises LeaseLost there.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol


class NotLeader(Exception):
    """A mutating call refused: this process does not hold the fleet's lease (any more)."""


class LeaseLost(NotLeader):
    """A request refused on its way to the cloud: the term ran out after the tick's own fence check
    passed (the process was paused, or the call was slow to build). The tick stops as for any
    NotLeader; the name says the refusal came at the last moment, not before the work began."""


class LeaseError(Exception):
    """The lease's backend could not be asked (network, throttling): the term runs out on its own.
    `permanent`: a configuration problem (no such table, access denied) that waiting will not fix."""

    permanent = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Term:
    """The outcome of one attempt: `leader` with `token` until `valid_until` (monotonic seconds),
    or a standby that saw `holder` (empty: nobody) holding tenure `token`."""

    leader: bool
    token: int
    holder: str
    valid_until: float = 0.0
    note: str = ""  # why a standby is one, for logs and /healthz
    holder_alive: bool = False  # a standby's attempt proved the holder alive (it holds the lock, or renewed)


class Lease(Protocol):
    """A fleet's lease in some backend (local.py: an OS lock; dynamodb.py: a lease record)."""

    owner: str  # this process's identity, as the record shows it
    kind: str  # "local" | "dynamodb"
    lease_s: float

    def attempt(self, now: float) -> Term:
        """Renew (when holding) or try to take the lease; raises LeaseError if the backend is unreachable."""
        ...

    def release(self) -> None:
        """Give the lease up now (idempotent); the next candidate may take it at once."""
        ...


class Fence:
    """The current term, and the check before every mutating call. Thread-safe: the lease thread
    grants and revokes, the tick thread checks."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._term: Term | None = None
        self._why = "the lease was never held"

    @classmethod
    def always(cls) -> Fence:
        """A fence that always holds (token 0): for a controller used as a library, or in a test."""
        fence = cls(lambda: 0.0)
        fence.grant(Term(leader=True, token=0, holder="", valid_until=math.inf))
        return fence

    def grant(self, term: Term) -> None:
        with self._lock:
            self._term = term if term.leader else None
            if not term.leader:
                self._why = term.note or f"the lease is held by {term.holder or 'nobody'}"

    def revoke(self, why: str) -> None:
        with self._lock:
            self._term, self._why = None, why

    @property
    def held(self) -> bool:
        with self._lock:
            return self._term is not None and self._clock() < self._term.valid_until

    @property
    def token(self) -> int | None:
        with self._lock:
            return self._term.token if self._term is not None else None

    @property
    def why(self) -> str:
        """Why the fence does not hold now, in a refusal's words; "" while it holds. A term granted
        after it ran out (its holder paused between the reply and the grant) says so."""
        with self._lock:
            return self._why_not(self._clock())

    def _why_not(self, now: float) -> str:
        term = self._term
        if term is None:
            return self._why
        if now < term.valid_until:
            return ""
        return f"the term of token {term.token} ran out {now - term.valid_until:.1f} s ago"

    def check(self, action: str) -> int:
        """The fencing token, if the term still holds; else NotLeader naming the action refused."""
        with self._lock:
            term, why = self._term, self._why_not(self._clock())
            if term is not None and not why:
                return term.token
        raise NotLeader(f"{action} refused: not the leader ({why})")

    def guard(self, target: Any, mutating: Iterable[str]) -> Any:
        """`target` with each method named in `mutating` checked first (reads pass through): the
        hook for a component whose interface this module does not know, e.g. the gateway."""
        return _Guarded(target, frozenset(mutating), self)


class _Guarded:
    def __init__(self, target: Any, mutating: frozenset[str], fence: Fence) -> None:
        self._target, self._mutating, self._fence = target, mutating, fence

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name not in self._mutating:
            return value

        def fenced(*args: Any, **kwargs: Any) -> Any:
            self._fence.check(name)
            return value(*args, **kwargs)

        return fenced
