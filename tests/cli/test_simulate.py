"""`igniter simulate` and `igniter trace` as a user runs them: output, files, exit codes."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import ROOT, run_cli

SERVEGEN_POLICY = ROOT / "policies" / "servegen-sim.yaml"
SERVEGEN = ROOT / "traces" / "servegen-3models-wide.csv"


@pytest.fixture
def small(make_policy, write_csv, tmp_path):
    make_policy()
    trace = write_csv("trace.csv", [["time_s", "a"], *[[60 * i, 500 if i < 8 else 1000] for i in range(16)]])
    return tmp_path / "policy.yaml", trace


@pytest.mark.unit
def test_json_summary_has_every_field(igniter, small):
    policy, trace = small
    r = igniter("simulate", policy, "--trace", trace, "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    for key in (
        "duration_s",
        "cost_total_usd",
        "static_peak_cost_usd",
        "slo_attainment",
        "worst_shortfall",
        "scaling_actions",
        "instance_hours",
        "headroom_final",
        "forecast_error_p99",
        "forecast_error_quantiles",
        "outage_steps",
        "reconfig_short_steps",
        "surge_instance_hours",
        "surge_cost_usd",
        "invariant_breaches",
        "recuts",
        "recut_short_steps",
        "recut_surge_instance_hours",
        "recut_surge_cost_usd",
        "recut_surge_instances",
        "fast_ticks",
        "burst_servers",
        "warm_starts",
        "warm_pool_cost_usd",
        "warm_pool_returns",
        "out_of_reach_ticks",
        "tick_reads",
    ):
        assert key in s
    assert s["tick_reads"] == "row"
    assert s["warm_starts"] == 0 and s["warm_pool_cost_usd"] == 0  # no pool by default
    assert s["duration_s"] == 960 and 0 < s["slo_attainment"] < 1 and s["scaling_actions"] >= 1
    assert s["outage_steps"] == 0 and s["reconfig_short_steps"] == 0 and s["invariant_breaches"] == {}
    assert s["recuts"] == 0 and s["recut_surge_instance_hours"] == 0  # no MIG GPU: nothing to re-cut
    assert s["headroom_final"] == {"a": 0.0} and s["forecast_error_p99"]["a"] > 0.5  # 500 -> 1000
    table = igniter("simulate", policy, "--trace", trace)
    assert "0 outage rows" in table.out and "0 short rows a change of plan caused" in table.out
    assert "surge" in table.out and "instance-hours" in table.out


@pytest.mark.unit
def test_headroom_auto_from_the_command_line(igniter, small):
    """--headroom auto sizes the headroom from the run's errors: the step 500 -> 1000 is a forecast
    error of +100 % (nothing was held above the plan then), so the workload ends at the cap, 1.0.
    The summary table says so."""
    policy, trace = small
    r = igniter("simulate", policy, "--trace", trace, "--headroom", "auto", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["headroom"] == "auto" and s["headroom_final"] == {"a": 1.0}
    assert s["forecast_error_p99"]["a"] == pytest.approx(1.0, abs=0.01)
    # per quantile: on the forecast but for the ticks after the step before 1000 was forecast boot_s earlier
    assert s["forecast_error_quantiles"] == {"a": {"0.1": 0.0, "0.5": 0.0, "0.9": 1.0, "0.99": 1.0}}
    table = igniter("simulate", policy, "--trace", trace, "--headroom", "auto")
    assert "headroom at the end" in table.out and f"a {s['headroom_final']['a']:.2f} (auto)" in table.out


@pytest.mark.slow
@pytest.mark.unit
def test_timeline_and_plot(igniter, small, tmp_path):
    policy, trace = small
    out, png = tmp_path / "timeline.csv", tmp_path / "plot.png"
    r = igniter("simulate", policy, "--trace", trace, "--timeline", out, "--plot", png)
    assert r.code == 0, r.err
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0]) == ["time_s", "workload", "rate_rps", "capacity_rps", "cost_per_hour"]
    assert len(rows) == 16 and rows[0]["workload"] == "a"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "SLO attainment" in r.out and "static peak" in r.out


@pytest.mark.slow
@pytest.mark.unit
def test_compare_prints_every_strategy(igniter, small):
    policy, trace = small
    r = igniter("simulate", policy, "--trace", trace, "--compare", "--json")
    assert r.code == 0, r.err
    labels = [d["label"] for d in json.loads(r.out)]
    assert labels == [
        "igniter/last",
        "igniter/ewma",
        "igniter/holt",
        "igniter/seasonal",
        "igniter/last headroom auto",  # the policy fixes its headroom (0): the auto line to compare
        "ffd/last",
        "gslice/last",
        "gpulets/last",
        "static-peak",
        "reactive",
        "oracle",
    ]
    png = trace.parent / "compare.png"
    table = igniter("simulate", policy, "--trace", trace, "--compare", "--plot", png)
    assert table.code == 0 and "gpulets/last" in table.out and "reactive" in table.out
    assert "outage" in table.out and "reconfig" in table.out and "surge h" in table.out
    assert png.stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.unit
def test_the_documented_example(igniter):
    """The README's example, all 14 days (4,499 ticks, about half of each planning: 15 to 31 s of
    CPU alone, by the host's speed): what docs/simulate.md claims for it holds. `make test` runs it
    alone, after its parallel run (the Makefile's SOLO, tests/README.md)."""
    r = igniter("simulate", SERVEGEN_POLICY, "--trace", SERVEGEN, "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["steps"] == 2016 and s["slo_attainment"] >= 0.999 and s["servers_over_budget"] == 0
    assert s["cost_total_usd"] < 0.85 * s["static_peak_cost_usd"]


@pytest.mark.slow
@pytest.mark.unit
def test_resampling_and_renaming_the_azure_trace(igniter, make_policy, tmp_path):
    make_policy(
        workloads=[
            {"name": "code", "model": "resnet50", "slo_ms": 40},
            {"name": "conv", "model": "vgg19", "slo_ms": 60},
        ]
    )
    r = igniter(
        "simulate",
        tmp_path / "policy.yaml",
        "--trace",
        ROOT / "traces" / "azure-llm-2023-rps.csv",
        "--time-col",
        "second_since_2023-11-16T18:15:46",
        "--rename",
        "code_rps=code",
        "--rename",
        "conv_rps=conv",
        "--step-s",
        "60",
        "--agg",
        "max",
        "--scale",
        "50",
        "--json",
    )
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["step_s"] == 60 and s["steps"] == 59


@pytest.mark.unit
@pytest.mark.parametrize(
    "rows, expected",
    [
        ([["t", "a"], [0, 1]], "trace.csv: time_s: missing 'time_s' column"),
        ([["time_s", "a", "zzz"], [0, 1, 1]], "trace.csv: column 'zzz': not a workload of"),
        ([["time_s", "b"], [0, 1]], "trace.csv: column 'b': not a workload of"),
        ([["time_s", "a"], [0, "lots"]], "trace.csv: line 2, column 'a': 'lots' is not a number"),
    ],
)
def test_bad_traces_exit_2_naming_file_and_field(igniter, make_policy, write_csv, tmp_path, rows, expected):
    make_policy()
    r = igniter("simulate", tmp_path / "policy.yaml", "--trace", write_csv("trace.csv", rows))
    assert r.code == 2 and expected in r.err and "Traceback" not in r.err


@pytest.mark.unit
def test_policy_errors_and_bad_options_exit_2(igniter, small, tmp_path):
    policy, trace = small
    bad = tmp_path / "bad.yaml"
    bad.write_text(policy.read_text().replace("slo_ms", "slo"))
    r = igniter("simulate", bad, "--trace", trace)
    assert r.code == 2 and "bad.yaml: workloads[0].slo: unknown key" in r.err
    r = igniter("simulate", policy, "--trace", trace, "--planner", "magic")
    assert r.code == 2 and "unknown planner" in r.err
    r = igniter("simulate", policy, "--trace", trace, "--rename", "nonsense")
    assert r.code == 2 and "expected OLD=NEW" in r.err
    for bad in ("lots", "-0.5", "11", "nan"):
        r = igniter("simulate", policy, "--trace", trace, "--headroom", bad)
        assert r.code == 2 and f"--headroom: {bad}: must be auto or a finite number from 0 to 10" in r.err
    r = igniter("simulate", policy, "--trace", trace, "--tick-reads", "future")
    assert r.code == 2 and "--tick-reads" in r.err and "future" in r.err
    r = igniter("simulate", policy, "--trace", trace, "--plan-on", "hourly")
    assert r.code == 2 and "--plan-on" in r.err and "hourly" in r.err


@pytest.mark.unit
def test_plan_on_overrides_the_policys(igniter, small, monkeypatch):
    """--plan-on replaces the policy's scaling.plan_on (tick here) for the replay's controller."""
    from autoscaler.loop.tick.controller import Controller

    seen: set[str] = set()
    plans = Controller.plans

    def noting(self: Controller, now: float) -> bool:
        seen.add(self.policy.scaling.plan_on)
        return plans(self, now)

    monkeypatch.setattr(Controller, "plans", noting)
    policy, trace = small
    plain = igniter("simulate", policy, "--trace", trace, "--json")
    assert seen == {"tick"}
    seen.clear()
    r = igniter("simulate", policy, "--trace", trace, "--json", "--plan-on", "interval")
    assert r.code == 0, r.err
    assert seen == {"interval"} and json.loads(r.out)["slo_attainment"] == json.loads(plain.out)["slo_attainment"]


@pytest.mark.unit
def test_ticks_that_read_only_the_past_see_the_step_a_tick_later(igniter, small):
    """The small trace doubles at 480 s on 60 s rows and ticks: read as rows, the tick of 480 sees
    the step; read as the past, only the next tick's read (or a fast tick's) does, so the run falls
    short for longer and says how it read the trace."""
    policy, trace = small
    row = json.loads(igniter("simulate", policy, "--trace", trace, "--json").out)
    r = igniter("simulate", policy, "--trace", trace, "--json", "--tick-reads", "past")
    assert r.code == 0, r.err
    past = json.loads(r.out)
    assert (row["tick_reads"], past["tick_reads"]) == ("row", "past")
    assert past["slo_attainment_time"] < row["slo_attainment_time"]


@pytest.mark.e2e
def test_a_real_process_exits_2_without_a_traceback(make_policy, write_csv, tmp_path):
    make_policy()
    r = run_cli("simulate", tmp_path / "policy.yaml", "--trace", write_csv("t.csv", [["time", "a"], [0, 1]]))
    assert r.code == 2 and "t.csv: time_s: missing 'time_s' column" in r.err and "Traceback" not in r.err


@pytest.mark.unit
def test_trace_convert_long_to_wide_and_show(igniter, tmp_path):
    out = tmp_path / "wide.csv"
    r = igniter(
        "trace",
        "convert",
        ROOT / "traces" / "servegen-llm-rates-10min.csv",
        "--out",
        out,
        "--time-col",
        "window_start_s",
        "--name-col",
        "model",
        "--rate-col",
        "agg_rate_rps",
        "--names",
        "m-large,m-mid,m-small",
    )
    assert r.code == 0, r.err
    assert out.read_text().splitlines()[0] == "time_s,m-large,m-mid,m-small"
    show = igniter("trace", "show", out)
    assert show.code == 0 and "m-small" in show.out and "peak/mean" in show.out
    wide = igniter(
        "trace",
        "convert",
        ROOT / "traces" / "azure-llm-2023-rps.csv",
        "--wide",
        "--out",
        out,
        "--time-col",
        "second_since_2023-11-16T18:15:46",
        "--step-s",
        "60",
    )
    assert wide.code == 0 and out.read_text().startswith("time_s,code_rps,conv_rps")


@pytest.mark.unit
def test_trace_convert_bad_columns_exit_2(igniter, tmp_path):
    r = igniter("trace", "convert", ROOT / "traces" / "servegen-llm-rates-10min.csv", "--out", tmp_path / "o.csv")
    assert r.code == 2 and "servegen-llm-rates-10min.csv: time_s: missing column 'time_s'" in r.err


@pytest.mark.slow
def test_frontier_runs_each_target_and_the_oracle(igniter, small, tmp_path):
    """Cost against attainment at a few targets (headroom auto), each with the warm pool off and on,
    then the oracle; the chart is drawn with --plot."""
    policy, trace = small
    r = igniter("simulate", policy, "--trace", trace, "--frontier", "--json")
    assert r.code == 0, r.err
    runs = json.loads(r.out)
    targets = ("0.99", "0.995", "0.999", "0.9999")
    assert [x["label"] for x in runs] == [
        label for t in targets for label in (f"target {t}", f"target {t} + warm pool")
    ] + ["oracle"]
    assert all(x["headroom"] == "auto" for x in runs[:-1])
    assert all(x["warm_starts"] == 0 and x["warm_pool_cost_usd"] == 0 for x in runs[:-1:2])
    assert all(x["warm_pool_cost_usd"] >= 0 for x in runs[1:-1:2])
    r = igniter("simulate", policy, "--trace", trace, "--frontier", "--plot", tmp_path / "f.png")
    assert r.code == 0, r.err
    assert "x oracle" in r.out and (tmp_path / "f.png").stat().st_size > 1000


@pytest.mark.unit
def test_frontier_with_compare_is_bad_input(igniter, small):
    policy, trace = small
    r = igniter("simulate", policy, "--trace", trace, "--frontier", "--compare")
    assert r.code == 2 and r.err.strip() == (
        "error: --frontier: --compare: give --frontier alone: it runs headroom auto at each target and the oracle"
    )
