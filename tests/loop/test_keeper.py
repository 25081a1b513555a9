"""The gateway keeper (loop/service/keeper.py) against a fake gateway: it starts the gateway again when its
process exits, only while this process leads, books a tick after each start, and retries a start
that failed. (tests/gateway/test_held_socket.py and tests/chaos/test_gateway_kill.py: the real one.)"""

from __future__ import annotations

import threading

import pytest

from autoscaler.loop.service.keeper import GatewayKeeper
from tests.kit.agent import wait_until

pytestmark = pytest.mark.unit


class FakeGateway:
    """A process that runs until `kill()`; `revive` starts it again (or fails `failing` times)."""

    def __init__(self, failing: int = 0) -> None:
        self.up = True
        self.exited = threading.Event()
        self.revives = 0
        self.failing = failing

    def kill(self) -> None:
        self.up = False
        self.exited.set()

    def wait_gone(self, timeout_s: float) -> bool:
        return not self.up or self.exited.wait(timeout_s)

    def running(self) -> bool:
        return self.up

    def pid(self) -> int | None:
        return 1 if self.up else None

    def revive(self) -> bool:
        if self.failing:
            self.failing -= 1
            raise RuntimeError("haproxy would not start")
        self.revives += 1
        self.up = True
        self.exited.clear()
        return True


QUICK = 0.05  # the keeper's waits here (1 s and 0.5 s in the service): the steps are the same, sooner


def _keeper(gw: FakeGateway, leads: threading.Event, ticks: list[int]) -> GatewayKeeper:
    keeper = GatewayKeeper(gw, leads.is_set, lambda: ticks.append(1), wait_s=QUICK, retry_s=QUICK)
    keeper.start()
    return keeper


def test_an_exit_is_followed_by_a_start_and_a_tick() -> None:
    gw, leads, ticks = FakeGateway(), threading.Event(), []
    leads.set()
    keeper = _keeper(gw, leads, ticks)
    try:
        for n in (1, 2):
            gw.kill()
            wait_until(lambda n=n: gw.revives == n, 5, "the gateway to be started again")  # type: ignore[misc]
        wait_until(lambda: len(ticks) == 2, 5, "a tick booked per start")
        assert keeper.revived == 2
    finally:
        keeper.close()


def test_a_standby_starts_nothing() -> None:
    gw, leads, ticks = FakeGateway(), threading.Event(), []
    keeper = _keeper(gw, leads, ticks)
    try:
        gw.kill()
        assert not keeper.stop.wait(6 * QUICK)  # some six looks at the lease: it leads at none
        assert gw.revives == 0 and ticks == []
        leads.set()  # it takes the lease over
        wait_until(lambda: gw.revives == 1, 5, "the new leader to start the gateway")
    finally:
        keeper.close()


def test_a_start_that_failed_is_tried_again() -> None:
    gw, leads, ticks = FakeGateway(failing=2), threading.Event(), []
    leads.set()
    keeper = _keeper(gw, leads, ticks)
    try:
        gw.kill()
        wait_until(lambda: gw.revives == 1, 10, "the third try to start it")
        # the tick is booked after the start returns, on the keeper's thread: wait for it too
        wait_until(lambda: ticks == [1], 5, "a tick booked after the start")
        assert gw.revives == 1
    finally:
        keeper.close()
