"""Issue 14's targets: reconfiguration without outage, on every trace in traces/ (used by
simulate_quality.py --only rollout).

For each trace at its own resolution and at 1-minute rows, with the policy of its documented
example (the 1-minute runs tick every 60 s): the oracle (a perfect forecast) and the policy's own
forecast, each with scaling.max_surge at its default and at 0 (break-before-make allowed), side by
side. Reported per run: outage_steps, reconfig_short_steps, attainment, the surge's instance-hours
and its share of the run's cost, and the ticks a policy limit broke the invariant.
  R1  oracle: outage_steps = 0, reconfig_short_steps = 0, attainment 1.0 where the limits allow
  R2  the default strategy: outage_steps = 0
  R3  surge under 2 % of each run's cost
servegen-llm-rates-10min.csv is the long form of servegen-3models-wide.csv (plus two models with
one day of data that no example policy serves), so the wide file stands for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from _results import Results

from autoscaler.config.policy import Policy, load_policy
from autoscaler.sim import traces
from autoscaler.sim.engine import SimOptions, simulate
from autoscaler.sim.result import SimResult

ROOT = Path(__file__).resolve().parent.parent
AZURE_TIME = "second_since_2023-11-16T18:15:46"


@dataclass(frozen=True)
class Case:
    key: str  # its name in benchmarks/results/rollout.json
    name: str
    policy: Policy
    trace: traces.Trace


def _with(policy: Policy, **scaling: object) -> Policy:
    return policy.model_copy(update={"scaling": policy.scaling.model_copy(update=scaling)})


def cases(quick: bool) -> list[Case]:
    sg = load_policy(ROOT / "policies" / "servegen-sim.yaml")
    az = load_policy(ROOT / "policies" / "azure-sim.yaml")
    wide = traces.read_wide(ROOT / "traces" / "servegen-3models-wide.csv")
    minute = traces.read_wide(ROOT / "traces" / "servegen-3models-1min.csv")
    if quick:
        wide, minute = traces.window(wide, 0, 3 * 86400), traces.window(minute, 0, 3 * 86400)
    per_s = traces.scale(traces.read_wide(ROOT / "traces" / "azure-llm-2023-rps.csv", AZURE_TIME), 100.0)
    az_min = traces.scale(traces.read_wide(ROOT / "traces" / "azure-llm-2023-1min.csv"), 100.0)
    return [
        Case("servegen_10min", "ServeGen, 10-minute rows (servegen-sim.yaml, interval 300 s)", sg, wide),
        Case("servegen_1min", "ServeGen, 1-minute rows (interval 60 s)", _with(sg, interval_s=60.0), minute),
        Case("azure_1s", "Azure x100, per-second rows (azure-sim.yaml, interval 30 s)", az, per_s),
        Case("azure_1min", "Azure x100, 1-minute rows (interval 60 s)", _with(az, interval_s=60.0), az_min),
    ]


def line(label: str, r: SimResult) -> str:
    s = r.summary()
    return (
        f"  {label:<34} {s['outage_steps']:>7} {s['reconfig_short_steps']:>8} {s['slo_attainment']:>8.4f} "
        f"{s['cost_total_usd']:>10,.2f} {s['surge_instance_hours']:>8.2f} {s['surge_cost_fraction']:>7.2%} "
        f"{s['surge_launches']:>6} {sum(s['invariant_breaches'].values()):>9}"
    )


HEAD = (
    f"  {'run':<34} {'outage':>7} {'reconfig':>8} {'attain':>8} {'cost $':>10} {'surge h':>8} {'surge %':>7} "
    f"{'surges':>6} {'breaches':>9}"
)


def report(quick: bool) -> None:
    """Print the targets' table for every case (see the module docstring); the full run (not
    --quick) writes each run's counts to benchmarks/results/rollout.json, which the docs quote."""
    out = Results("rollout", "python benchmarks/simulate_quality.py --only rollout")
    surge_pct: list[float] = []
    verdicts: list[str] = []
    for case in cases(quick):
        t0 = time.process_time()
        print(f"\n== {case.name}: {len(case.trace.times)} rows of {case.trace.step_s:g} s")
        print(HEAD)
        runs: dict[tuple[str, str], SimResult] = {}
        for strategy in ("oracle", "autoscaler"):
            for surge, value in (("default", None), ("0", 0)):
                policy = _with(case.policy, max_surge=value)
                r = simulate(policy, case.trace, SimOptions(strategy=strategy))  # type: ignore[arg-type]
                runs[(strategy, surge)] = r
                name = "oracle" if strategy == "oracle" else f"{case.policy.scaling.forecast} (policy)"
                print(line(f"{name}, max_surge {surge}", r))
                s = r.summary()
                run = f"{case.key}_{'oracle' if strategy == 'oracle' else 'policy'}_surge_{surge}"
                out.figure(f"{run}_outage_steps", s["outage_steps"])
                out.figure(f"{run}_reconfig_short_steps", s["reconfig_short_steps"])
                out.figure(f"{run}_breaches", sum(s["invariant_breaches"].values()))
                out.figure(f"{run}_surge_cost_pct", s["surge_cost_fraction"] * 100)
                if surge == "default":
                    surge_pct.append(s["surge_cost_fraction"] * 100)
        verdicts += _verdicts(case, runs)
        print(f"  ({time.process_time() - t0:.0f} s CPU)")
    print("\n" + "\n".join(verdicts))
    out.figure("default_surge_cost_pct_max", max(surge_pct))
    if not quick:
        out.write()


def _verdicts(case: Case, runs: dict[tuple[str, str], SimResult]) -> list[str]:
    o = runs[("oracle", "default")].summary()
    d = runs[("autoscaler", "default")].summary()
    r1 = o["outage_steps"] == 0 and o["reconfig_short_steps"] == 0
    r3 = max(runs[(s, "default")].summary()["surge_cost_fraction"] for s in ("oracle", "autoscaler"))
    return [
        f"R1 {'MET' if r1 and o['slo_attainment'] == 1.0 else 'MET but attainment ' + str(o['slo_attainment']) if r1 else 'NOT MET'}"
        f" on {case.name}: outage {o['outage_steps']}, reconfig {o['reconfig_short_steps']}",
        f"R2 {'MET' if d['outage_steps'] == 0 else 'NOT MET'} on {case.name}: outage {d['outage_steps']}",
        f"R3 {'MET' if r3 < 0.02 else 'NOT MET'} on {case.name}: surge at most {r3:.2%} of a run's cost",
    ]
