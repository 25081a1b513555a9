"""A simulated Provider for `igniter simulate`: instances on a simulated clock, with a bill.

It keeps the Provider contract (fleet/base.py) so the real controller drives it unchanged:
launches are idempotent per (slot, attempt), terminate is idempotent, terminated instances leave
the listing. An instance is `pending` for `boot_s` of simulated time after its launch, then
`running`. Unlike the test fake it also keeps what a what-if question needs: every instance's
lifetime (launch to terminate) for cost and instance-hours, and the next time something changes
on its own (a boot completing), so the simulator can tell an idle tick from a busy one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from autoscaler.fleet.base import TAG_ATTEMPT, TAG_SLOT, Instance, PermanentError, fleet_tags


@dataclass
class Lifetime:
    """When an instance was held, and what it cost per hour (EC2 bills per second)."""

    instance_type: str
    price_per_hour: float
    start: float
    end: float | None = None
    slot: str = ""

    def hours(self, until: float) -> float:
        end = until if self.end is None else min(self.end, until)
        return max(0.0, end - self.start) / 3600.0


@dataclass
class SimProvider:
    fleet: str
    clock: Callable[[], float]
    prices: Mapping[str, float]  # instance type -> $/h
    boot_s: float = 180.0
    launches: int = 0
    terminations: int = 0
    lifetimes: dict[str, Lifetime] = field(default_factory=dict)
    _live: dict[str, Instance] = field(default_factory=dict)
    _by_key: dict[tuple[str, str], str] = field(default_factory=dict)

    def list_instances(self) -> list[Instance]:
        now = self.clock()
        for iid, inst in self._live.items():
            if inst.state == "pending" and now - inst.launched_at >= self.boot_s:
                self._live[iid] = replace(inst, state="running")
        return sorted(self._live.values(), key=lambda i: i.id)

    def launch(
        self, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0, salt: str = ""
    ) -> Instance:
        """Start (or return the existing) instance of (slot, attempt); unknown types are permanent errors."""
        found = self._by_key.get((slot, str(attempt)))
        if found is not None and found in self._live:
            return self._live[found]
        if instance_type not in self.prices:
            raise PermanentError(f"{instance_type}: not an instance type of the policy")
        self.launches += 1
        now = self.clock()
        inst = Instance(
            id=f"sim-{self.launches:06d}",
            instance_type=instance_type,
            slot=slot,
            state="pending",
            launched_at=now,
            address=None,
            plan_generation=plan_generation,
            attempt=attempt,
            tags=fleet_tags(self.fleet, slot, plan_generation, attempt),
        )
        self._live[inst.id] = inst
        self._by_key[(slot, str(attempt))] = inst.id
        self.lifetimes[inst.id] = Lifetime(instance_type, self.prices[instance_type], now, slot=slot)
        return inst

    def terminate(self, instance_id: str) -> None:
        inst = self._live.pop(instance_id, None)
        if inst is None:
            return
        self.terminations += 1
        self._by_key.pop((inst.tags[TAG_SLOT], inst.tags[TAG_ATTEMPT]), None)
        self.lifetimes[instance_id].end = self.clock()

    def close(self) -> None:
        return None

    # -- what the simulator reads -------------------------------------------------------------------
    def boot_all(self) -> None:
        """Make every pending instance ready now: the fleet a simulation starts with is already up."""
        now = self.clock()
        for iid, inst in self._live.items():
            if inst.state == "pending":
                self._live[iid] = replace(inst, state="running", launched_at=now - self.boot_s)

    def next_boot(self) -> float | None:
        """When the next pending instance turns running, or None when none is pending."""
        times = [i.launched_at + self.boot_s for i in self._live.values() if i.state == "pending"]
        return min(times, default=None)

    def cost_per_hour(self) -> float:
        """What the instances held right now cost per hour (pending ones are billed too)."""
        return sum(self.prices[i.instance_type] for i in self._live.values())

    def instance_hours(self, until: float, slots: Callable[[str], bool] | None = None) -> dict[str, float]:
        """Hours per instance type, of every instance or of those whose slot `slots` accepts."""
        out: dict[str, float] = {}
        for life in self.lifetimes.values():
            if slots is None or slots(life.slot):
                out[life.instance_type] = out.get(life.instance_type, 0.0) + life.hours(until)
        return out

    def cost_usd(self, until: float, slots: Callable[[str], bool] | None = None) -> float:
        """The bill, of every instance or of those whose slot `slots` accepts."""
        return sum(
            life.price_per_hour * life.hours(until)
            for life in self.lifetimes.values()
            if slots is None or slots(life.slot)
        )
