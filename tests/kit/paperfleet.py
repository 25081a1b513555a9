"""A fleet on paper for reconcile tests: records, assignments and readiness moved along by the
actions reconcile.diff returns, step by step, the way the controller and agents would move them.

A launched instance is ready `boot_steps` steps later; a server assigned at one step reports ready
at the next (it starts, then serves). After every step the capacity each workload has (by the
fleet's `judge`; by default the model-free one: a GPU's ready servers carry their planned
throughput while their shares fit) is recorded, so a test can check the invariant over a whole
move, not just one diff.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from autoscaler.core.fleet.lifecycle import Record, State
from autoscaler.core.layout.layout_types import Layout, PlannedServer, SlotSpec
from autoscaler.core.rollout.reconcile import Configure, Diff, Drain, FleetView, Launch, Limits, Terminate, diff
from autoscaler.core.rollout.rollout import Judge, shares_judge

NOW = 10_000.0


@dataclass
class PaperFleet:
    layout: Layout
    records: dict[str, Record]
    applied: dict[str, tuple[PlannedServer, ...]]
    limits: Limits = field(default_factory=Limits)
    rates: dict[str, float] = field(default_factory=dict)
    prices: Mapping[str, float] = field(default_factory=lambda: {"p3": 3.0, "g5": 1.0})
    drained: frozenset[str] | None = None
    boot_steps: int = 2
    ready: set[str] = field(default_factory=set)
    baseline: Mapping[str, float] | None = None
    now: float = NOW
    launched: dict[str, int] = field(default_factory=dict)  # slot -> step it launched at
    attempts: dict[str, int] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)  # capacity after each step
    diffs: list[Diff] = field(default_factory=list)
    steps: int = 0
    judge: Judge = shares_judge  # what a GPU's ready servers carry (the capacity recorded after each step)

    def view(self) -> FleetView:
        return FleetView(
            records=list(self.records.values()),
            applied=dict(self.applied),
            ready_servers=frozenset(self.ready),
            max_attempt={**self.attempts, **{s: r.attempt for s, r in self.records.items()}},
            prices=self.prices,
            rates=self.rates,
            drained=self.drained,
            baseline=self.baseline,
        )

    def step(self) -> Diff:
        """One diff and its actions; servers assigned before this step are ready now."""
        self.steps += 1
        self.now += 15.0
        self._boot()
        self.ready = {s.name for slot, v in self.applied.items() if self._up(slot) for s in v}
        d = diff(self.layout, self.view(), self.now, self.limits)
        self.baseline = d.baseline
        for a in d.actions:
            self._act(a)
        self.ready &= {s.name for v in self.applied.values() for s in v}
        self.history.append(self.capacity())
        self.diffs.append(d)
        return d

    def run(self, steps: int = 30) -> list[Diff]:
        """Step until a diff has nothing to do (or `steps`)."""
        for _ in range(steps):
            if not self.step().actions and self.diffs[-1].converged:
                break
        return self.diffs

    def capacity(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for slot, servers in self.applied.items():
            if not self._up(slot):
                continue
            for gpu in {s.gpu_index for s in servers}:
                busy = [s for s in servers if s.gpu_index == gpu and s.name in self.ready]
                for s, (ok, thr) in zip(busy, self.judge(self.records[slot].instance_type, busy)):
                    if ok:
                        out[s.workload] = out.get(s.workload, 0.0) + thr
        return out

    def _up(self, slot: str) -> bool:
        rec = self.records.get(slot)
        return rec is not None and rec.state is State.READY

    def _boot(self) -> None:
        for slot, rec in list(self.records.items()):
            if rec.state is State.PENDING and self.steps - self.launched.get(slot, 0) >= self.boot_steps:
                self.records[slot] = replace(rec, state=State.READY)

    def _act(self, a: object) -> None:
        if isinstance(a, Launch):
            self.records[a.slot] = Record(
                slot=a.slot,
                attempt=a.attempt,
                instance_type=a.instance_type,
                state=State.PENDING,
                created_at=self.now,
                updated_at=self.now,
                instance_id=f"i-{a.slot}",
            )
            self.launched[a.slot] = self.steps
            self.attempts[a.slot] = a.attempt
        elif isinstance(a, Configure):
            old = {s.name: s.agent_key() for s in self.applied.get(a.slot, ())}
            self.ready -= {s.name for s in a.servers if old.get(s.name, s.agent_key()) != s.agent_key()}
            self.applied[a.slot] = a.servers
        elif isinstance(a, Drain):
            self.applied[a.slot] = ()
        elif isinstance(a, Terminate):
            self.records.pop(a.slot, None)
            self.applied.pop(a.slot, None)


def fleet(slots: list[SlotSpec], applied: dict[str, tuple[PlannedServer, ...]], **kw: object) -> PaperFleet:
    """Every slot in `applied` is a ready instance running its servers, all of them ready."""
    records = {
        s: Record(
            slot=s,
            attempt=0,
            instance_type="p3",
            state=State.READY,
            created_at=NOW - 60,
            updated_at=NOW - 60,
            instance_id=f"i-{s}",
        )
        for s in applied
    }
    pf = PaperFleet(Layout("x", tuple(slots)), records, dict(applied), **kw)  # type: ignore[arg-type]
    pf.ready = {s.name for v in applied.values() for s in v}
    pf.history.append(pf.capacity())
    return pf
