"""`igniter simulate --compare` on the ServeGen example, written where the docs read it.

The policy's own settings (policies/servegen-sim.yaml: seasonal forecast, headroom 0.4) on
traces/servegen-3models-wide.csv (14 days of 10-minute rows): the runs README.md quotes (igniter and
the ffd, gslice and gpulets planners under the policy's forecast, and the oracle), or with `--all`
every run `--compare` makes (igniter under four forecasts and with headroom auto, static peak,
reactive too). Writes benchmarks/results/servegen_compare.json: each run's `--json`
summary, the figures README.md quotes (derived from them here, so the prose cannot drift from the
runs), and the markdown table docs/simulate.md embeds. tests/test_docs.py compares both docs with
this file. About 2 minutes of one idle CPU (5 minutes with --all).

    nice .venv/bin/python benchmarks/servegen_compare.py [--all]
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _machine import commit, describe  # noqa: E402

from autoscaler.config.policy import load_policy  # noqa: E402
from autoscaler.sim import traces  # noqa: E402
from autoscaler.sim.compare import compare_options  # noqa: E402
from autoscaler.sim.engine import SimOptions, simulate  # noqa: E402

POLICY = ROOT / "policies" / "servegen-sim.yaml"
TRACE = ROOT / "traces" / "servegen-3models-wide.csv"
OUT = ROOT / "benchmarks" / "results" / "servegen_compare.json"
MAIN = "igniter/seasonal"
QUOTED = {
    ("igniter", "seasonal"),
    ("ffd", "seasonal"),
    ("gslice", "seasonal"),
    ("gpulets", "seasonal"),
    ("oracle", None),
}


def table(runs: dict[str, dict], peak: float) -> list[str]:
    """The markdown table docs/simulate.md embeds; `x peak` against igniter's static-peak cost."""
    lines = [
        "| run | cost $ | x peak | attain | time | worst | actions | over |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, s in runs.items():
        cells = [
            label,
            f"{s['cost_total_usd']:,.2f}",
            f"{s['cost_total_usd'] / peak:.3f}",
            f"{s['slo_attainment']:.4f}",
            f"{s['slo_attainment_time']:.4f}",
            f"{s['worst_shortfall']:.1%}".replace("%", " %"),
        ]
        if label == MAIN:
            cells = [f"**{c}**" for c in cells[:4]] + cells[4:]
        lines.append("| " + " | ".join([*cells, str(s["scaling_actions"]), str(s["servers_over_budget"])]) + " |")
    return lines


def quoted(runs: dict[str, dict], workloads: int) -> dict[str, float]:
    """The comparisons README.md states in words, as numbers."""
    main = runs[MAIN]

    def dearer_pct(label: str) -> float:
        return round((runs[label]["cost_total_usd"] / main["cost_total_usd"] - 1) * 100, 2)

    by_planner = {f"{p}/seasonal": p for p in ("ffd", "gslice", "gpulets")}
    return {
        "igniter_attainment_pct": round(main["slo_attainment"] * 100, 4),
        "igniter_x_peak": main["cost_vs_static_peak"],
        "pairs": main["steps"] * workloads,
        **{f"{p}_cost_vs_igniter_pct": dearer_pct(label) for label, p in by_planner.items()},
        **{f"{p}_attainment_pct": round(runs[label]["slo_attainment"] * 100, 4) for label, p in by_planner.items()},
        "oracle_x_peak": round(runs["oracle"]["cost_total_usd"] / main["static_peak_cost_usd"], 4),
    }


def wanted(opts: SimOptions, everything: bool) -> bool:
    key = ("oracle", None) if opts.strategy == "oracle" else (opts.planner, opts.forecast)
    return everything or (key in QUOTED and opts.headroom is None and opts.label is None)


def main() -> None:
    everything = "--all" in sys.argv[1:]
    code = commit()  # what runs is what was checked out at the start
    policy = load_policy(POLICY)
    trace = traces.read_wide(TRACE)
    started = time.perf_counter()
    runs = {}
    for opts in compare_options(policy):
        if wanted(opts, everything):
            print(f"simulating {opts.describe(policy)} ...", file=sys.stderr, flush=True)
            result = simulate(policy, trace, opts)
            runs[result.label] = result.summary()
    peak = runs[MAIN]["static_peak_cost_usd"]
    doc = {
        "machine": describe(),
        "commit": code,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "policy": str(POLICY.relative_to(ROOT)),
        "trace": str(TRACE.relative_to(ROOT)),
        "quoted": quoted(runs, len(trace.names)),
        "table": table(runs, peak),
        "runs": runs,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print("\n".join(doc["table"]))
    print(json.dumps(doc["quoted"], indent=1))


if __name__ == "__main__":
    main()
