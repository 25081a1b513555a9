"""`igniter forecast POLICY --trace FILE`: the periods of each workload and their strength, a
figure with --plot, JSON with --json; bad input exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from autoscaler.cli.forecast import History, _duration
from autoscaler.core.capacity.periods import PeriodConfig
from tests.kit import benchmod

pytestmark = pytest.mark.unit

bt = benchmod.load("burst_traces")

POLICY = {
    "fleet": "forecastcli",
    "instance_types": [{"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.5}],
    "workloads": [
        {"name": "hourly", "model": "resnet50", "slo_ms": 40, "rate_rps": 600},
        {"name": "flat", "model": "resnet50", "slo_ms": 40, "rate_rps": 600},
    ],
    "agents": {"transport": "none"},
    "scaling": {"interval_s": 60, "forecast": "auto"},
}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A policy and a 6-hour trace: an hourly burst, and noise around a level (amplitude 1)."""
    specs = {"hourly": bt.Bursts(), "flat": bt.Bursts(amplitude=1.0, noise=0.1)}
    trace = tmp_path / "bursts.csv"
    bt.write(bt.make(specs, 6.0, seed=8), trace)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    return policy, trace


def test_the_periods_and_their_strength(igniter, files) -> None:
    policy, trace = files
    r = igniter("forecast", policy, "--trace", trace)
    assert r.code == 0, r.err
    rows = {line.split()[0]: line.split() for line in r.out.splitlines()[2:]}
    assert rows["hourly"][1] in ("59m", "1h"), r.out
    assert abs(float(rows["hourly"][3]) - 3600) < 60
    assert float(rows["hourly"][4]) > 0.8
    assert rows["flat"][1] == "none"
    data = json.loads(igniter("forecast", policy, "--trace", trace, "--json").out)
    assert [round(p["period_s"] / 600) for p in data["hourly"]] == [6] and data["flat"] == []
    # the controller's refits (tuning.replay_fits) find it once two cycles are in the history
    assert 1.8 * 3600 <= data["hourly"][0]["found_at_s"] <= 2.2 * 3600
    assert rows["hourly"][-2:] == _duration(data["hourly"][0]["found_at_s"]).split()


def test_a_period_longer_than_the_window_holds_says_which_seasons_would(igniter, tmp_path: Path) -> None:
    """A 5-hour burst is planned with once 5.33 cycles (26.7 h) are in the history a refit reads:
    never with a day's window, and the row says `seasons: 2`; with that, it is found, with no note."""
    five = 5 * 3600.0
    specs = {"five": bt.Bursts(period_s=five, phase_s=3600.0, hold_s=3600.0), "flat": bt.Bursts(amplitude=1.0)}
    trace = tmp_path / "five.csv"
    bt.write(bt.make(specs, 36.0, seed=3), trace)
    doc = {**POLICY, "workloads": [{**w, "name": n} for w, n in zip(POLICY["workloads"], specs, strict=True)]}
    found = {}
    for seasons in (1, 2):
        policy = tmp_path / f"policy{seasons}.yaml"
        policy.write_text(yaml.safe_dump({**doc, "scaling": {**POLICY["scaling"], "seasons": seasons}}))
        r = igniter("forecast", policy, "--trace", trace)
        assert r.code == 0, r.err
        found[seasons] = next(line for line in r.out.splitlines() if line.startswith("five"))
    assert "never" in found[1] and "5.3 cycles" in found[1] and found[1].endswith("reads 1d 00h: seasons: 2)")
    assert "never" not in found[2] and "(" not in found[2], found[2]
    # ... first planned with about when the note said (refits are hourly by then)
    p = json.loads(igniter("forecast", tmp_path / "policy2.yaml", "--trace", trace, "--json").out)["five"][0]
    assert 16 / 3 * p["period_s"] <= p["found_at_s"] + 60 <= 16 / 3 * p["period_s"] + 3600
    assert p["why_never"] is None
    never = json.loads(igniter("forecast", tmp_path / "policy1.yaml", "--trace", trace, "--json").out)["five"][0]
    assert never["found_at_s"] is None and never["why_never"] in found[1]


def test_why_never_names_the_short_trace_or_a_window_seasons_cannot_reach() -> None:
    cfg = PeriodConfig()
    day, week = 86400.0, 7 * 86400.0
    assert History(cfg, day, day, 3 * day).why_never(day).endswith("longer than the trace)")
    assert (
        History(cfg, day, 3600.0, 90 * day).why_never(week).endswith("seasons * season_s of 37d 08h (seasons <= 28))")
    )
    assert History(cfg, 6 * day, day, 90 * day).why_never(day) == ""  # the window holds it: the test dropped it
    assert History(cfg, day, day, 90 * day).why_never(3600.0) == ""  # two cycles suffice


def test_plot(igniter, files, tmp_path: Path) -> None:
    policy, trace = files
    png = tmp_path / "forecast.png"
    r = igniter("forecast", policy, "--trace", trace, "--plot", png)
    assert r.code == 0, r.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ("missing trace", "nope.csv"),
        ("missing column", "flat"),
        ("bad policy", "scaling.forecast"),
    ],
)
def test_bad_input_exits_2_with_one_line(igniter, files, tmp_path: Path, change: str, expect: str) -> None:
    policy, trace = files
    if change == "missing trace":
        trace = tmp_path / "nope.csv"
    elif change == "missing column":
        trace.write_text("time_s,hourly\n0,1\n60,2\n", encoding="utf-8")
    else:
        policy.write_text(yaml.safe_dump({**POLICY, "scaling": {"forecast": "periodic"}}), encoding="utf-8")
    r = igniter("forecast", policy, "--trace", trace, "--plot", tmp_path / "x.png")
    assert r.code == 2, r
    assert len(r.err.strip().splitlines()) == 1 and expect in r.err and r.out == ""
    assert not (tmp_path / "x.png").exists()
