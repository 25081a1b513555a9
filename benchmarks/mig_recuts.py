"""Issue 34's target: MIG re-cuts without outage on a shipped trace, and what their surge costs.

policies/a100-mig.yaml (three vision workloads on A100 80GB GPUs cut into MIG slices, from
ParvaGPU's measured tables) replays traces/servegen-3models-wide.csv (14 days of 10-minute rows)
through the real controller, under the oracle (a perfect forecast: every shortfall left is a
change's, not the forecast's) and, with `--seasonal`, under the policy's own forecast too. Per run: the re-cuts
(sim/recuts.py), the outage and reconfiguration-short rows (all, and those of changes that re-cut a
GPU), the surge (all, and what was alive while a re-cut was under way) and its share of the cost.
  T1  oracle: outage_steps = 0 and reconfig_short_steps = 0, with re-cuts > 0
  T2  the surge cost of re-cuts, as a fraction of the run's cost (reported, no bound)

The A100 profile is third-party data: it is imported from ../shared/profiles/a100-80gb-mig into a
temporary directory for the run (`igniter profile import`), never into the repository. Writes
benchmarks/results/mig_recuts.json (docs/simulate.md quotes it). About 3 minutes of one idle CPU
per run (`--quick`: the first 3 days, not written).

    nice .venv/bin/python benchmarks/mig_recuts.py [--quick] [--seasonal]
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _machine import commit, describe  # noqa: E402

from autoscaler.cli import main as igniter  # noqa: E402
from autoscaler.config.policy import Policy, load_policy  # noqa: E402
from autoscaler.sim import traces  # noqa: E402
from autoscaler.sim.engine import SimOptions, simulate  # noqa: E402

POLICY = ROOT / "policies" / "a100-mig.yaml"
TRACE = ROOT / "traces" / "servegen-3models-wide.csv"
TABLES = ROOT.parent / "shared" / "profiles" / "a100-80gb-mig"
OUT = ROOT / "benchmarks" / "results" / "mig_recuts.json"
KEYS = (
    "recuts",
    "outage_steps",
    "reconfig_short_steps",
    "recut_short_steps",
    "invariant_breaches",
    "surge_instance_hours",
    "surge_cost_usd",
    "surge_cost_fraction",
    "surge_launches",
    "recut_surge_instance_hours",
    "recut_surge_cost_usd",
    "recut_surge_instances",
    "cost_total_usd",
    "static_peak_cost_usd",
    "cost_vs_static_peak",
    "instance_hours",
    "worst_shortfall",
    "slo_attainment",
    "reconfigurations",
    "ticks",
)


def policy_with_tables(tmp: Path) -> Policy:
    """The shipped policy, its profiles_dir pointed at the tables imported into `tmp`."""
    if not TABLES.is_dir():
        sys.exit(f"ParvaGPU's A100 tables are not at {TABLES} (../shared beside the clone)")
    out = tmp / "a100-80gb.yaml"
    with contextlib.redirect_stdout(io.StringIO()):
        code = igniter(["profile", "import", str(TABLES), "--gpu", "a100-80gb", "--out", str(out)])
    if code != 0:
        sys.exit(f"igniter profile import {TABLES} failed ({code})")
    # Profiles are checked as the policy loads, so the copy names the imported tables itself.
    policy = yaml.safe_load(POLICY.read_text())
    policy["profiles_dir"] = str(tmp)
    (tmp / POLICY.name).write_text(yaml.safe_dump(policy))
    return load_policy(tmp / POLICY.name)


def run(policy: Policy, trace: traces.Trace, opts: SimOptions) -> dict[str, object]:
    t0, cpu = time.perf_counter(), time.process_time()
    s = simulate(policy, trace, opts).summary()
    out = {k: s[k] for k in KEYS}
    out["recut_surge_cost_fraction"] = round(s["recut_surge_cost_usd"] / s["cost_total_usd"], 6)
    out["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out["cpu_seconds"] = round(time.process_time() - cpu, 1)
    return out


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    code, load = commit(), round(os.getloadavg()[0], 1)
    trace = traces.read_wide(TRACE)
    if quick:
        trace = traces.window(trace, 0, 3 * 86400)
    runs: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        policy = policy_with_tables(Path(tmp))
        wanted = [("oracle", SimOptions(strategy="oracle"))]
        if "--seasonal" in sys.argv[1:]:
            wanted.append(("seasonal", SimOptions()))
        for label, opts in wanted:
            print(f"simulating {label} ...", file=sys.stderr, flush=True)
            runs[label] = run(policy, trace, opts)
    oracle = runs["oracle"]
    met = oracle["outage_steps"] == 0 and oracle["reconfig_short_steps"] == 0 and int(str(oracle["recuts"])) > 0
    doc = {
        "machine": describe(),
        "commit": code,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "policy": str(POLICY.relative_to(ROOT)),
        "trace": str(TRACE.relative_to(ROOT)),
        "days": round(trace.duration_s / 86400, 2),
        "target_met": met,
        "command": "python benchmarks/mig_recuts.py " + " ".join(sys.argv[1:]),
        "load_average_start": load,
        "load_average_end": round(os.getloadavg()[0], 1),
        "runs": runs,
    }
    if not quick:
        OUT.parent.mkdir(exist_ok=True)
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(json.dumps(doc, indent=1, sort_keys=True))
    print(f"T1 (oracle: 0 outage, 0 reconfiguration-short rows, re-cuts > 0): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
