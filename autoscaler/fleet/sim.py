"""A simulated Provider for `igniter simulate`: instances on a simulated clock, with a bill.

It keeps the Provider contract (fleet/base.py) so the real controller drives it unchanged:
launches are idempotent per (slot, attempt), terminate is idempotent, terminated instances leave
the listing. An instance is `pending` for `boot_s` of simulated time after its launch, then
`running`. Unlike the test fake it also keeps what a what-if question needs: every instance's
lifetime (launch to terminate) for cost and instance-hours, and the next time something changes
on its own (a boot completing), so the simulator can tell an idle tick from a busy one.

Spot interruptions: with `interruptions_per_hour` > 0, each spot instance draws, at launch, the
time of its interruption warning from a Poisson process of that rate per instance-hour (an
exponential wait; `rng` is seeded by the caller, so a run repeats exactly). `interruptions`
(an InterruptionSource) delivers the warning at the first tick after it; EC2 takes the instance
`warning_s` after the warning, whatever the autoscaler did: it leaves the listing then, and its
bill ends.

Warm pool (fleet/base.py WarmPool): a member is pending for `boot_s` (billed at the full price:
it boots and initialises like any instance), running until the loop stops it, then stopped at
`stopped_price_per_hour` (its EBS volumes); a claimed member is pending for `warm_boot_s`, then
running at the full price again. A member's warming and stopped spells are lifetimes of their own
(keyed `<id>/warming`, `<id>/stopped`), so `pool_cost_usd` is what the pool itself cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from autoscaler.config.offerings import ON_DEMAND, SPOT, offering_key
from autoscaler.fleet.base import (
    POOL_CLAIMED,
    POOL_MEMBER,
    TAG_ATTEMPT,
    TAG_POOL,
    TAG_SLOT,
    Instance,
    Notice,
    PermanentError,
    fleet_tags,
)


@dataclass
class Lifetime:
    """When an instance was held, and what it cost per hour (EC2 bills per second)."""

    instance_type: str
    price_per_hour: float
    start: float
    end: float | None = None
    capacity_type: str = ON_DEMAND
    slot: str = ""
    stopped: bool = False  # a stopped warm-pool member's spell: billed for its volumes, no instance-hours

    def hours(self, until: float) -> float:
        end = until if self.end is None else min(self.end, until)
        return max(0.0, end - self.start) / 3600.0


@dataclass
class SimProvider:
    fleet: str
    clock: Callable[[], float]
    prices: Mapping[str, float]  # offering (config.offerings.offering_key) -> $/h
    boot_s: float = 180.0
    interruptions_per_hour: float = 0.0  # per spot instance (Poisson)
    warning_s: float = 120.0  # from the interruption warning to EC2 taking the instance
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    launches: int = 0
    terminations: int = 0
    lifetimes: dict[str, Lifetime] = field(default_factory=dict)
    warnings: dict[str, float] = field(default_factory=dict)  # spot instance id -> when its warning comes (drawn)
    interrupted: int = 0  # spot instances EC2 took (after their warning)
    warm_boot_s: float = 45.0  # a claimed warm-pool member's start
    stopped_price_per_hour: float = 0.0  # a stopped member's volumes
    warm_starts: int = 0
    returned: int = 0  # retiring instances stopped into the pool instead of terminated
    spells: int = 0
    _spells: dict[str, str] = field(default_factory=dict)  # member id -> its current spell's key in lifetimes
    _pool: dict[str, Instance] = field(default_factory=dict)  # members not claimed
    _pool_names: dict[str, str] = field(default_factory=dict)  # member name -> id
    _boots: dict[str, float] = field(default_factory=dict)  # id -> its boot time, where not boot_s
    _live: dict[str, Instance] = field(default_factory=dict)
    _by_key: dict[tuple[str, str], str] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set)

    def list_instances(self) -> list[Instance]:
        now = self.clock()
        self._reclaim(now)
        for iid, inst in self._live.items():
            if inst.state == "pending" and now - inst.launched_at >= self._boots.get(iid, self.boot_s):
                self._live[iid] = replace(inst, state="running")
        return sorted(self._live.values(), key=lambda i: i.id)

    def launch(
        self,
        slot: str,
        instance_type: str,
        plan_generation: int,
        *,
        attempt: int = 0,
        salt: str = "",
        capacity_type: str = ON_DEMAND,
    ) -> Instance:
        """Start (or return the existing) instance of (slot, attempt); an offering the policy does
        not have is a permanent error."""
        found = self._by_key.get((slot, str(attempt)))
        if found is not None and found in self._live:
            return self._live[found]
        key = offering_key(instance_type, capacity_type)
        if key not in self.prices:
            raise PermanentError(f"{key}: not an offering of the policy")
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
            tags=fleet_tags(self.fleet, slot, plan_generation, attempt, capacity_type),
            capacity_type=capacity_type,
        )
        self._live[inst.id] = inst
        self._by_key[(slot, str(attempt))] = inst.id
        life = Lifetime(instance_type, self.prices[key], now, None, capacity_type, slot=slot)
        self.lifetimes[inst.id] = life
        if capacity_type == SPOT and self.interruptions_per_hour > 0:
            self.warnings[inst.id] = now + float(self.rng.exponential(3600.0 / self.interruptions_per_hour))
        return inst

    def terminate(self, instance_id: str) -> None:
        member = self._pool.pop(instance_id, None)
        if member is not None:
            self._end_spell(member)
            return
        inst = self._live.pop(instance_id, None)
        if inst is None:
            return
        self.terminations += 1
        self._by_key.pop((inst.tags[TAG_SLOT], inst.tags[TAG_ATTEMPT]), None)
        self.lifetimes[instance_id].end = self.clock()

    def close(self) -> None:
        return None

    # -- the warm pool (fleet/base.py WarmPool) ---------------------------------------------------
    def pool_members(self) -> list[Instance]:
        now = self.clock()
        for iid, m in self._pool.items():
            if m.state == "pending" and now - m.launched_at >= self.boot_s:
                self._pool[iid] = replace(m, state="running")
        return sorted(self._pool.values(), key=lambda i: i.id)

    def pool_launch(self, name: str, instance_type: str) -> Instance:
        found = self._pool_names.get(name)
        if found is not None and (found in self._pool or found in self._live):
            return self._pool.get(found) or self._live[found]
        if instance_type not in self.prices:
            raise PermanentError(f"{instance_type}: not an offering of the policy")
        now = self.clock()
        tags = {**fleet_tags(self.fleet, name, 0, 0), TAG_POOL: POOL_MEMBER}
        inst = Instance(
            id=f"sim-p{len(self._pool_names) + 1:05d}",
            instance_type=instance_type,
            slot=name,
            state="pending",
            launched_at=now,
            tags=tags,
        )
        self._pool[inst.id], self._pool_names[name] = inst, inst.id
        self._spell(inst, now)
        return inst

    def pool_stop(self, instance_id: str) -> None:
        m = self._pool.get(instance_id)
        if m is None or m.state in ("stopping", "stopped"):
            return
        self._end_spell(m)
        self._pool[m.id] = replace(m, state="stopped")
        self._spell(self._pool[m.id], self.clock())

    def start_pooled(
        self, member_id: str, slot: str, instance_type: str, plan_generation: int, *, attempt: int = 0
    ) -> Instance:
        found = self._by_key.get((slot, str(attempt)))
        member = self._pool.get(member_id)
        if found is not None and found in self._live:
            return self._live[found]
        if member is None or member.state != "stopped":
            return self.launch(slot, instance_type, plan_generation, attempt=attempt)
        self._end_spell(self._pool.pop(member_id))
        now = self.clock()
        tags = {**fleet_tags(self.fleet, slot, plan_generation, attempt), TAG_POOL: POOL_CLAIMED}
        inst = replace(
            member,
            slot=slot,
            state="pending",
            launched_at=now,
            plan_generation=plan_generation,
            attempt=attempt,
            tags=tags,
        )
        self._live[inst.id], self._by_key[(slot, str(attempt))] = inst, inst.id
        self._boots[inst.id] = self.warm_boot_s
        self.lifetimes[inst.id] = Lifetime(instance_type, self.prices[instance_type], now, slot=slot)
        self.launches += 1
        self.warm_starts += 1
        return inst

    def pool_return(self, instance_id: str, name: str) -> None:
        """A retiring fleet instance joins the pool as member `name`, stopped at once (its fleet
        life's bill ends, a stopped spell begins); a member already: nothing to do."""
        inst = self._live.pop(instance_id, None)
        if inst is None:
            return
        now = self.clock()
        self._by_key.pop((inst.tags[TAG_SLOT], inst.tags[TAG_ATTEMPT]), None)
        self._boots.pop(instance_id, None)
        life = self.lifetimes.pop(instance_id)
        life.end = now
        self.returned += 1
        self.lifetimes[f"{instance_id}@{self.returned}"] = life  # its fleet life, kept under a key of its own
        tags = {**fleet_tags(self.fleet, name, 0, 0), TAG_POOL: POOL_MEMBER}
        member = replace(inst, slot=name, state="stopped", plan_generation=0, attempt=0, tags=tags)
        self._pool[instance_id], self._pool_names[name] = member, instance_id
        self._spell(member, now)

    def _spell(self, member: Instance, now: float) -> None:
        """A member's spell in the pool begins: warming (at the full price) or stopped (volumes)."""
        stopped = member.state == "stopped"
        price = self.stopped_price_per_hour if stopped else self.prices[member.instance_type]
        self.spells += 1
        key = f"{member.id}/{'stopped' if stopped else 'warming'}/{self.spells}"
        self.lifetimes[key] = Lifetime(member.instance_type, price, now, slot=member.slot, stopped=stopped)
        self._spells[member.id] = key

    def _end_spell(self, member: Instance) -> None:
        """A member leaves the pool (claimed or terminated) or stops: its current spell's bill ends."""
        self.lifetimes[self._spells.pop(member.id)].end = self.clock()

    def pool_cost_usd(self, until: float) -> float:
        """What the pool's members cost while they warmed up and while they were stopped."""
        return sum(life.price_per_hour * life.hours(until) for key, life in self.lifetimes.items() if "/" in key)

    def _reclaim(self, now: float) -> None:
        """EC2 takes every spot instance whose warning came `warning_s` ago or more."""
        for iid in [i for i, t in self.warnings.items() if t + self.warning_s <= now and i in self._live]:
            inst = self._live.pop(iid)
            self._by_key.pop((inst.tags[TAG_SLOT], inst.tags[TAG_ATTEMPT]), None)
            self.lifetimes[iid].end = self.warnings[iid] + self.warning_s
            self.interrupted += 1

    def alive(self, instance_id: str, at: float) -> bool:
        """Whether the instance still runs at `at` (not terminated, not yet taken by EC2)."""
        warn = self.warnings.get(instance_id)
        return instance_id in self._live and (warn is None or warn + self.warning_s > at)

    def reclaims_between(self, start: float, end: float) -> list[float]:
        """When EC2 takes spot instances in (start, end), sorted: the fleet changes there on its own."""
        return sorted(
            {
                t + self.warning_s
                for i, t in self.warnings.items()
                if i in self._live and start < t + self.warning_s < end
            }
        )

    def next_warning(self, after: float) -> float | None:
        """When the next warning not yet delivered comes (after `after`), for an instance still held."""
        due = [t for i, t in self.warnings.items() if t > after and i in self._live and i not in self._warned]
        return min(due, default=None)

    def due_warnings(self, now: float) -> list[Notice]:
        """Interruption warnings that have come by `now` for instances still held (each once)."""
        due = [(iid, t) for iid, t in self.warnings.items() if t <= now and iid in self._live]
        out = []
        for iid, t in sorted(due, key=lambda x: x[1]):
            if iid not in self._warned:
                self._warned.add(iid)
                out.append(
                    Notice(
                        kind="interruption",
                        instance_ids=(iid,),
                        at=t,
                        deadline=t + self.warning_s,
                        detail="simulated spot interruption",
                    )
                )
        return out

    # -- what the simulator reads -------------------------------------------------------------------
    def boot_all(self) -> None:
        """Make every pending instance ready now: the fleet a simulation starts with is already up."""
        now = self.clock()
        for iid, inst in self._live.items():
            if inst.state == "pending":
                self._live[iid] = replace(inst, state="running", launched_at=now - self.boot_s)

    def next_boot(self) -> float | None:
        """When the next pending instance turns running, or None when none is pending."""
        times = [
            i.launched_at + self._boots.get(i.id, self.boot_s) for i in self._live.values() if i.state == "pending"
        ]
        return min(times, default=None)

    def cost_per_hour(self, at: float | None = None) -> float:
        """What the instances held right now (or still held at `at`) cost per hour (pending ones are
        billed too), the warm pool's members included."""
        pool = sum(
            self.stopped_price_per_hour if m.state == "stopped" else self.prices[m.instance_type]
            for m in self._pool.values()
        )
        return pool + sum(
            self.prices[offering_key(i.instance_type, i.capacity_type)]
            for i in self._live.values()
            if at is None or self.alive(i.id, at)
        )

    def instance_hours(self, until: float, slots: Callable[[str], bool] | None = None) -> dict[str, float]:
        """Hours per instance type, of every instance or of those whose slot `slots` accepts."""
        out: dict[str, float] = {}
        for life in self.lifetimes.values():
            if not life.stopped and (slots is None or slots(life.slot)):
                out[life.instance_type] = out.get(life.instance_type, 0.0) + life.hours(until)
        return out

    def interruptions(self, until: float) -> int:
        """Spot instances whose interruption warning came while the fleet held them."""
        return sum(
            1
            for iid, t in self.warnings.items()
            if t <= until and (self.lifetimes[iid].end is None or t < self.lifetimes[iid].end)
        )

    def spot_instance_hours(self, until: float) -> float:
        return sum(life.hours(until) for life in self.lifetimes.values() if life.capacity_type == SPOT)

    def cost_usd(self, until: float, slots: Callable[[str], bool] | None = None) -> float:
        """The bill, of every instance or of those whose slot `slots` accepts."""
        return sum(
            life.price_per_hour * life.hours(until)
            for life in self.lifetimes.values()
            if slots is None or slots(life.slot)
        )


@dataclass
class SimInterruptions:
    """The InterruptionSource of a simulated fleet: its provider's due warnings, at each tick."""

    provider: SimProvider
    delivered: int = 0

    def receive(self) -> list[Notice]:
        notices = self.provider.due_warnings(self.provider.clock())
        self.delivered += len(notices)
        return notices

    def done(self, notices: Sequence[Notice]) -> None:
        return None

    def poll(self) -> bool:
        first = self.provider.next_warning(-float("inf"))
        return first is not None and first <= self.provider.clock()
