"""Spot in the simulator: seeded Poisson interruptions of spot instances, EC2 taking them after
the warning, the replay replacing them, and the on-demand-only twin the figures are compared to."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoscaler.config.offerings import SPOT
from autoscaler.fleet.sim import SimInterruptions, SimProvider
from autoscaler.sim.engine import Replay, SimOptions, default_plan_fn, simulate, with_overrides
from autoscaler.sim.traces import read_wide
from autoscaler.sim.whatif import with_spot

pytestmark = pytest.mark.unit


SPOT_TYPES = [
    {"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.5, "spot_price_per_hour": 0.175}
]


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def provider(rate: float, seed: int = 0) -> tuple[SimProvider, Clock]:
    clock = Clock()
    prices = {"g": 1.0, "g@spot": 0.35}
    return SimProvider("f", clock, prices, 0.0, rate, 120.0, np.random.default_rng(seed)), clock


def test_spot_instances_get_seeded_warnings_and_ec2_takes_them_two_minutes_later():
    p, clock = provider(rate=1.0)
    od = p.launch("s0", "g", 1)
    spot = p.launch("s1", "g", 1, capacity_type=SPOT)
    assert spot.capacity_type == SPOT and od.id not in p.warnings
    warn = p.warnings[spot.id]
    again, _ = provider(rate=1.0)
    again.launch("s0", "g", 1)
    assert again.launch("s1", "g", 1, capacity_type=SPOT) and again.warnings == p.warnings  # seeded
    source = SimInterruptions(p)
    clock.t = warn - 1
    assert source.receive() == [] and p.alive(spot.id, warn + 119)
    clock.t = warn + 1
    (notice,) = source.receive()
    assert notice.kind == "interruption" and notice.instance_ids == (spot.id,) and notice.deadline == warn + 120
    assert source.receive() == []  # each warning once
    assert p.reclaims_between(warn, warn + 200) == [warn + 120] and not p.alive(spot.id, warn + 120)
    clock.t = warn + 120
    assert [i.id for i in p.list_instances()] == [od.id]
    assert p.interrupted == 1 and p.interruptions(clock.t) == 1
    assert p.spot_instance_hours(clock.t) == pytest.approx((warn + 120) / 3600)
    assert p.cost_usd(clock.t) == pytest.approx(clock.t / 3600 + 0.35 * (warn + 120) / 3600)


def test_an_instance_let_go_before_its_warning_is_never_interrupted():
    p, clock = provider(rate=0.5)
    spot = p.launch("s1", "g", 1, capacity_type=SPOT)
    clock.t = p.warnings[spot.id] / 2
    p.terminate(spot.id)
    clock.t = p.warnings[spot.id] + 1000
    assert SimInterruptions(p).receive() == [] and p.interruptions(clock.t) == 0 and p.interrupted == 0


@pytest.fixture
def day(write_csv):
    """One day of a daily cycle, 10-minute rows."""
    t = np.arange(0, 86400, 600)
    rate = 900 + 700 * np.sin(2 * np.pi * t / 86400)
    return write_csv("day.csv", [["time_s", "a"], *[[int(x), round(float(r), 1)] for x, r in zip(t, rate)]])


@pytest.fixture
def spot_policy(make_policy):
    return make_policy(
        {"interval_s": 300, "headroom": 0.3, "scale_down_delay_s": 1800, "spot": {"min_on_demand_fraction": 0.3}},
        instance_types=SPOT_TYPES,
    )


@pytest.mark.slow
def test_interrupted_spot_instances_are_replaced_and_cost_less_than_on_demand(spot_policy, day):
    trace = read_wide(day)
    r = simulate(spot_policy, trace, SimOptions(spot_interruptions_per_hour=0.5, seed=3))
    s = r.summary()
    assert s["tick_errors"] == 0 and s["interruptions"] >= 3 and s["spot_instance_hours"] > 0
    assert s["cost_total_usd"] < 0.8 * s["cost_on_demand_only_usd"]
    assert s["cost_vs_on_demand_only"] == pytest.approx(s["cost_total_usd"] / s["cost_on_demand_only_usd"], rel=1e-3)
    assert 0 < s["slo_attainment_on_demand_only"] <= 1
    calm = simulate(spot_policy, trace, SimOptions(seed=3, on_demand_twin=False)).summary()
    assert calm["interruptions"] == 0 and "cost_on_demand_only_usd" not in calm
    assert s["launches"] >= calm["launches"] + s["interruptions"] // 2  # replacements were launched
    again = simulate(spot_policy, trace, SimOptions(spot_interruptions_per_hour=0.5, seed=3, on_demand_twin=False))
    assert again.summary()["interruptions"] == s["interruptions"] and again.cost_total_usd == r.cost_total_usd


def test_every_layout_of_the_replay_keeps_the_on_demand_floor(spot_policy, day):
    """Each tick's layout (through the real controller, with interruptions) plans at least 30 % of
    every workload's rate on on-demand slots: no on-demand capacity error ever waives it here."""
    opts = SimOptions(spot_interruptions_per_hour=0.5, seed=1, on_demand_twin=False)
    replay = Replay(with_overrides(spot_policy, opts), read_wide(day), opts, default_plan_fn(spot_policy))
    shares: list[float] = []
    tick = replay.tick

    def checked(now: float, fast: bool = False):  # type: ignore[no-untyped-def]
        report = tick(now, fast)
        layout = report.layout
        total = sum(v.rate_rps for _, v in layout.servers())
        od = sum(v.rate_rps for s in layout.slots if s.capacity_type == "on-demand" for v in s.servers)
        shares.append(od / total if total else 1.0)
        return report

    replay.tick = checked  # type: ignore[method-assign]
    replay.run()
    assert len(shares) > 200 and min(shares) >= 0.3 - 1e-9 and sorted(shares)[len(shares) // 2] < 0.9
    assert replay.provider.interruptions(86400) >= 1


def test_without_spot_prices_nothing_changes(make_policy, day):
    policy = make_policy({"interval_s": 300})
    s = simulate(policy, read_wide(day), SimOptions(spot_interruptions_per_hour=5)).summary()
    assert not {"spot_instance_hours", "interruptions", "cost_on_demand_only_usd"} & set(s)


def test_with_spot_prices_a_ratio_and_a_floor(make_policy):
    policy = with_spot(make_policy(), 0.35, 0.5)
    assert policy.instance_types[0].spot_price_per_hour == pytest.approx(0.175)
    assert policy.scaling.spot.min_on_demand_fraction == 0.5 and policy.buys_spot()


@pytest.mark.slow
def test_the_cli_flags_and_the_compare_spot_line(igniter, spot_policy, day, tmp_path):
    policy = tmp_path / "policy.yaml"
    r = igniter("simulate", policy, "--trace", day, "--json", "--spot-interruptions-per-hour", "0.5", "--seed", "3")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["interruptions"] >= 3 and s["cost_total_usd"] < s["cost_on_demand_only_usd"]
    r = igniter("simulate", policy, "--trace", day, "--compare", "--json", "--seed", "3")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert rows[-1]["label"].startswith("igniter/last + spot") and "spot_instance_hours" in rows[-1]
    twin = next(x for x in rows if x["label"] == "igniter/last")
    assert rows[-1]["cost_on_demand_only_usd"] == twin["cost_total_usd"]
    assert all("spot_instance_hours" not in x for x in rows[:-1])
    table = igniter("simulate", policy, "--trace", day, "--spot-interruptions-per-hour", "0.5")
    assert table.code == 0 and "interruptions" in table.out and "on-demand only" in table.out


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--spot-interruptions-per-hour", "-1"),
        ("--interruption-warning-s", "-5"),
        ("--spot-price-ratio", "0"),
        ("--min-on-demand-fraction", "1.5"),
    ],
)
def test_bad_spot_flags_exit_2(igniter, spot_policy, day, tmp_path, flag, value):
    r = igniter("simulate", tmp_path / "policy.yaml", "--trace", day, flag, value)
    assert r.code == 2 and flag in r.err and "Traceback" not in r.err


def _handling_delays(policy, day) -> tuple[list[float], int]:  # type: ignore[no-untyped-def]
    """Per handled warning: seconds from the warning to its going_away transition; and how many
    spot instances EC2 took before the autoscaler had seen their warning."""
    opts = SimOptions(spot_interruptions_per_hour=1.0, seed=2, on_demand_twin=False)
    replay = Replay(with_overrides(policy, opts), read_wide(day), opts, default_plan_fn(policy))
    replay.run()
    warned = replay.provider.warnings
    seen = {h["instance_id"]: h["at"] for h in replay.store.history() if h["reason"] == "interruption"}
    vanished = {h["instance_id"] for h in replay.store.history() if h["reason"] == "vanished"}
    missed = len({i for i in vanished if i in warned and i not in seen})
    return [seen[i] - warned[i] for i in seen], missed


@pytest.mark.slow
def test_the_queue_poll_handles_a_warning_within_its_period(make_policy, day):
    scaling = {"interval_s": 300, "headroom": 0.3, "scale_down_delay_s": 1800}
    polled = make_policy({**scaling, "spot": {"queue_poll_s": 10}}, instance_types=SPOT_TYPES)
    delays, missed = _handling_delays(polled, day)
    assert len(delays) >= 5 and max(delays) <= 10 + 1e-6 and missed == 0
    ticks_only = make_policy({**scaling, "spot": {"queue_poll_s": 0}}, instance_types=SPOT_TYPES)
    delays, missed = _handling_delays(ticks_only, day)
    assert missed >= 1  # a 300 s interval often sees the warning only after EC2 took the instance
