"""Bursting (`scaling.burst`, on by default; surge.py's module docstring, "Capacity that serves
sooner"). Pure.

Before any other stand-in, a short workload's late planned server (on an instance still booting)
gets stand-ins in the MPS share that ready GPUs at rest leave free (of the same GPU type, at its
share or the free share if less, at the largest batch up to its planned one that meets its budget
there: a batch chosen for more share can miss it in less), each started only where the model says it
and every neighbour stay within their latency budgets, every planned neighbour still carries the
rate it is planned for (and its workload's planned servers its demand), and no floor breaks
(`Tick.fits_beside`, `keep_rates`; a planned neighbour slowed below its rate can be a move's new
capacity, whose old servers then never leave, so the move never starts and the burst waiting for it
never goes): capacity in seconds, with no boot and no extra cost. They carry what the model
predicts, possibly less than the planned server, until the shortfall is covered; what they cannot
carry falls to surge instances and the planned launches. Like every stand-in they leave once the
planned server serves, so the next regular plan absorbs them (or retires them when the burst is
over). A late server tries every such GPU, and most refuse it: where the judge can say so without a
judgement (rollout_types.Refusals: it misses its budget alone and the GPU can only slow it down, or
its MIG units are taken there), no candidate is judged (at 1,000 instances, 130,000 judgements a
re-plan tick became 19,000). Most trials still judged failed because a neighbour missed its budget
beside the stand-in, or passed the judge and then broke a floor or a neighbour's planned rate
(`Tick.fits_beside`); the model says how hard a newcomer presses on a GPU (L2, power), and a
neighbour only fares worse the harder it is pressed, so one pressing no less than a newcomer that
failed so is refused without a judgement (burst_memo.py per GPU content, `_floored` per GPU and
capacity this tick; crowding.presses_on). At 2,000 instances, one re-plan tick: of the 70,050 GPUs
tried, judgements 56,018 -> 2,225 and full trials (`fits_beside`) 11,269 -> 482. On MIG a
refusal reads of a GPU only the slices it holds (rollout_types.Rooms): a late server's probes are
refused once per kind of room, and every other GPU of that kind is a lookup (judged.py
`refuses_all`; at 2,000 MIG instances a re-plan tick's 254,000 GPUs tried were 1.8 million
refusals asked, two thirds of its CPU under cProfile).
"""

from __future__ import annotations

from dataclasses import replace

from autoscaler.core.layout.layout_types import PlannedServer
from autoscaler.core.rollout.borrowing import Borrowing
from autoscaler.core.rollout.burst_memo import passing_batches, pushes
from autoscaler.core.rollout.rollout import EPS, GpuKey, Tick
from autoscaler.core.rollout.surge_types import SurgeInput

BURST_MIN_SHARE = 5.0  # MPS percent: a burst stand-in in less share carries too little to be worth a process

__all__ = ["BURST_MIN_SHARE", "Bursting"]


class Bursting(Borrowing):
    """Stand-ins in free share of ready GPUs at rest for late servers of short workloads (module
    docstring); surge._Allocator calls `_burst` first for capacity that serves sooner."""

    def __init__(self, inp: SurgeInput, tick: Tick) -> None:
        super().__init__(inp, tick)
        self.free_at: dict[GpuKey, tuple[int, float]] = {}  # `_free`, per GPU version
        self.slow_at: dict[tuple[GpuKey, float], tuple[int, bool]] = {}  # `_only_slow`, per GPU version
        self.alone_by_id: dict[tuple[int, str, float], frozenset[int]] = {}  # `_missed_alone` by id(t)
        self.keep_alive: list[PlannedServer] = []  # the late servers `alone_by_id` names
        self.floors: dict[GpuKey, tuple[tuple[float, ...], list[tuple[float, float]]]] = {}  # `_floored`

    def _burst(self, t: PlannedServer, gap: float, gpu: str) -> float:
        """Burst into free share (module docstring): stand-ins for `t` in the MPS share
        ready GPUs at rest leave free, each carrying what the model says it can there with every
        neighbour still within its budget, until they cover `gap`; returns what they carry."""
        got = 0.0
        for key in self._lendable(gpu) if t.mig_profile is not None else self._roomy(gpu):
            if got >= gap * (1 - EPS):
                break
            got += self._burst_on(key, t)
        return got

    def _roomy(self, gpu: str) -> list[GpuKey]:
        """The GPUs `_lendable` gives with BURST_MIN_SHARE free at least: the only ones where an
        MPS burst stand-in may go (`_burst_fit`). Found again only after a GPU changed."""
        seen = self.roomy.get(gpu)
        if seen is None or seen[0] != self.tick.commits:
            free = [k for k in self._lendable(gpu) if self._free(k) >= BURST_MIN_SHARE]
            seen = self.roomy[gpu] = (self.tick.commits, free)
        return seen[1]

    def _free(self, key: GpuKey) -> float:
        """The MPS share `key` leaves free, summed again only once what it runs changed."""
        seen = self.free_at.get(key)
        if seen is None or seen[0] != self.tick.version[key]:
            seen = self.free_at[key] = (self.tick.version[key], 100.0 - sum(s.mps_percent for s in self.tick.on[key]))
        return seen[1]

    def _only_slow(self, key: GpuKey, share: float) -> bool:
        """Tick.only_slow, asked again only once what `key` runs changed (it reads nothing else)."""
        seen = self.slow_at.get((key, share))
        if seen is None or seen[0] != self.tick.version[key]:
            seen = self.slow_at[key, share] = (self.tick.version[key], self.tick.only_slow(key, share))
        return seen[1]

    def _burst_on(self, key: GpuKey, t: PlannedServer) -> float:
        """One burst stand-in for `t` on `key` (`_burst_fit`; in MPS share, at least
        BURST_MIN_SHARE); its judged throughput, 0 where none fits."""
        got, cand = self._burst_fit(key, t)
        if not got or cand is None or not self.tick.try_start(key, replace(cand, predicted_throughput_rps=got)):
            return 0.0
        self.names.add(cand.name)
        self.started.append(cand.name)
        self.bursts.append(cand.name)
        self.carried[t.name] += got
        self.gained[t.workload] += got
        return got

    def _burst_fit(self, key: GpuKey, t: PlannedServer) -> tuple[float | None, PlannedServer | None]:
        """A burst stand-in for `t` that fits on `key`, and its judged throughput: in t's slice at
        the first allowed start the GPU's cut leaves free on a MIG GPU (a slice is whole or
        nothing); otherwise at t's share or the free share if less, at the largest batch up to t's
        that the model lets it serve there (t's batch was chosen for t's share: in less share it
        can miss its budget where a smaller batch still carries most of what that share can)."""
        itype = self.tick.gpus[key].instance_type
        if t.mig_profile is not None and self._info(itype).starts(t.mig_profile):
            if self.tick.refuses_all(key, self._probes(t, itype)):
                return None, None  # every start taken or refused (Tick.refuses): no candidate is made
            for cand in self._shapes(self._stand_in(t, key[0], key[1]), itype, 0.0):
                if got := self.tick.fits_beside(key, cand, keep_rates=True):
                    return got, cand
            return None, None
        share = min(t.mps_percent, self._free(key))
        if share < BURST_MIN_SHARE:
            return None, None
        scaled = t.predicted_throughput_rps * share / t.mps_percent  # what a model-free judge credits
        missed = self._missed_alone(t, itype, share, scaled)
        if missed and not self._only_slow(key, share):
            missed = frozenset()  # the GPU may speed it up: a miss alone says nothing there
        if len(missed) >= t.batch:
            return None, None  # the judge would refuse it at every batch (Tick.refuses): none is asked
        name, index = self._fresh(t, key[0])

        def make(batch: int) -> PlannedServer:
            return replace(
                t,
                name=name,
                gpu_index=key[1],
                index=index,
                replaces="",
                mps_percent=share,
                batch=batch,
                predicted_throughput_rps=scaled,
            )

        sig, family = (t, name, index, share, scaled), (t, share, scaled)
        pressing = (t.model, share) if t.mig_profile is None else None  # make's: MPS, replacing nothing
        floored = self._floored(key, t, name) if pressing is not None else None
        push = pushes(self.tick, key, name, pressing, t.batch) if floored and pressing is not None else {}
        if floored and all(b in missed or _beaten(push.get(b), floored) for b in range(t.batch, 0, -1)):
            return None, None  # a floor or a planned rate breaks at every batch (`_floored`): none is judged
        trials = passing_batches(
            self.tick, key, make, t.batch, sig=sig, family=family, name=name, refused=missed, pressing=pressing
        )
        for batch in trials:
            if floored and _beaten(push.get(batch), floored):
                continue
            if got := self.tick.fits_beside(key, make(batch), keep_rates=True):  # the judge refused the others
                return got, make(batch)
            if floored is not None and pressing is not None:
                push = push or pushes(self.tick, key, name, pressing, t.batch)
                if (p := push.get(batch)) is not None:
                    floored[:] = [f for f in floored if not (f[0] >= p[0] and f[1] >= p[1])] + [p]
        return None, None

    def _floored(self, key: GpuKey, t: PlannedServer, name: str) -> list[tuple[float, float]] | None:
        """The pressures (burst_memo.pushes) under which a burst newcomer that passed the judge on
        `key` still broke a floor or a planned rate there (`Tick.fits_beside`: `_holds`, `_slows`),
        while the GPU, the capacity of its workloads and the servers draining stay as they are;
        None where such a failure says nothing of another newcomer: t's workload runs on `key`
        (its own capacity grows with it), or its stand-in's name runs on the instance.

        A newcomer pressing no less (in L2 and power) breaks them too: each server there then
        carries no more and meets its budget no more often (crowding.presses_on, carries_less), so
        each workload there but t's has no more capacity (`_holds` sums it), each wanted server
        carries no more than its rate and loses no less (`_slows`), and t's workload, on no server
        there, only gains (`_holds` never fails it)."""
        on = self.tick.on[key]
        if any(s.workload == t.workload for s in on) or any(
            s.name == name for k in self.tick.slot_keys[key[0]] for s in self.tick.on[k]
        ):
            return None
        stamp = (self.tick.version[key], len(self.tick.draining), *(self.tick.cap[s.workload] for s in on))
        seen = self.floors.get(key)
        if seen is None or seen[0] != stamp:
            seen = self.floors[key] = (stamp, [])
        return seen[1]

    def _missed_alone(self, t: PlannedServer, itype: str, share: float, scaled: float) -> frozenset[int]:
        """The batches at which a burst stand-in for `t` in `share` misses its budget alone
        (rollout_types.Refusals.misses_alone), found once a tick per late server, type and share:
        the answer reads no name, GPU index, port index or predecessor, so every GPU with that
        much room shares it, and it is asked before the stand-in is named (`_fresh`): of t itself
        at that share and batch, crediting what `_burst_fit` credits."""
        refusal = self.tick.refusal
        if refusal is None:
            return frozenset()
        mine = self.alone_by_id.get((id(t), itype, share))  # t's own: no hash of all its fields a GPU
        if mine is not None:
            return mine
        at = (t, itype, share)
        if at not in self.alone:
            probe = replace(t, replaces="", mps_percent=share, predicted_throughput_rps=scaled)
            batches = getattr(refusal, "batches_missing_alone", None)  # colocation.ModelJudge's, remembered
            self.alone[at] = (
                batches(itype, probe)
                if callable(batches)
                else frozenset(b for b in range(t.batch, 0, -1) if refusal.misses_alone(itype, replace(probe, batch=b)))
            )
        self.keep_alive.append(t)  # its id stays its own while the entry lives
        mine = self.alone_by_id[id(t), itype, share] = self.alone[at]
        return mine


def _beaten(push: tuple[float, float] | None, failed: list[tuple[float, float]]) -> bool:
    """A newcomer pressing `push` presses no less than one under which a floor broke (`_floored`)."""
    return push is not None and any(push[0] >= c and push[1] >= p for c, p in failed)
