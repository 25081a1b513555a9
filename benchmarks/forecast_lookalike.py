"""A look-alike of issue 52's trace nobody here has: `forecast: auto` against the product's defaults.

The issue measures a trace derived from public social-media traffic that this checkout does not
hold: 8 workloads, 2 days of 1-minute rows, bursts of 3 to 5 x that rise within a minute or two and
recur; with the policy defaults 271 short rows of 23,040 at $132.39 against the oracle's $77.54.
Its targets: with `forecast: auto` at most 135 short rows at no more than the defaults' cost, and
with `warm_pool: {size: auto}` as well an attainment of 0.998 at least. This benchmark builds a
trace of that description with benchmarks/burst_traces.py (`SPECS`: one workload per period, from
30 minutes to 6 hours, amplitudes 3 to 5 x, rises of 60 to 120 s, onsets jittered by 1 to 5
minutes, 5 to 8 % noise) and replays it with the product's defaults (nothing under `scaling:`:
headroom auto, forecast seasonal, 30 s ticks, 180 s boots) and with `forecast: auto`, each with the
warm pool off and on, plus `auto` widened by `onset_spread_s: 300`, and the oracle.

What it is and is not. It is not the issue's trace: the periods, amplitudes and jitter are this
file's guesses at the description, written down before the first replay (seed 7) and not changed
after; seed 8 was first run after seed 7's figures were read. `auto`'s constants were chosen on
traces of the same generator (benchmarks/forecast_auto.py), so this family is not held out for them.
What it shows is how `auto` changes a defaults policy's short rows and cost on recurring bursts of
several periods at once, with the headroom the defaults tune (the generated traces of
forecast_auto.py use headroom 0). One T4 type at $0.526 an hour, the model resnet50 at a 40 ms SLO.

    python benchmarks/forecast_lookalike.py [--seeds 7 8] [--jobs 2]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

from _lookalike import Replayed, keep, replay
from _results import Results
from _targets import slug
from burst_traces import Bursts, make

HOURS = 48.0
SPECS = {
    "w30m": Bursts(1800.0, 300.0, jitter_s=60.0, amplitude=3.0, rise_s=60.0, hold_s=300.0, base_rps=300.0, noise=0.05),
    "w45m": Bursts(
        2700.0, 900.0, jitter_s=120.0, amplitude=4.0, rise_s=120.0, hold_s=600.0, base_rps=200.0, noise=0.05
    ),
    "w1h": Bursts(3600.0, 1200.0, jitter_s=60.0, amplitude=5.0, rise_s=90.0, hold_s=600.0, base_rps=250.0, noise=0.05),
    "w1hj": Bursts(3600.0, 600.0, jitter_s=180.0, amplitude=3.5, rise_s=90.0, hold_s=480.0, base_rps=300.0, noise=0.08),
    "w2h": Bursts(7200.0, 2400.0, jitter_s=120.0, amplitude=4.0, rise_s=60.0, hold_s=900.0, base_rps=200.0, noise=0.05),
    "w3h": Bursts(
        10800.0, 3600.0, jitter_s=120.0, amplitude=3.0, rise_s=120.0, hold_s=1200.0, base_rps=300.0, noise=0.05
    ),
    "w4h": Bursts(14400.0, 5400.0, jitter_s=60.0, amplitude=4.5, rise_s=90.0, hold_s=900.0, base_rps=150.0, noise=0.05),
    "w6h": Bursts(
        21600.0, 7200.0, jitter_s=300.0, amplitude=3.0, rise_s=120.0, hold_s=1800.0, base_rps=250.0, noise=0.05
    ),
}
WARM = {"warm_pool": {"size": "auto"}}
AUTO = {"forecast": "auto"}
RUNS: dict[str, dict[str, object]] = {
    "defaults": {},
    "auto": AUTO,
    "auto, spread": {**AUTO, "onset_spread_s": 300},
    "defaults, warm pool": WARM,
    "auto, warm pool": {**AUTO, **WARM},
    "auto, spread, warm pool": {**AUTO, "onset_spread_s": 300, **WARM},
    "oracle": {},
}


def policy_doc(scaling: dict[str, object]) -> dict[str, object]:
    """The look-alike's policy: SPECS' workloads on one T4 type, `scaling` as given (else the defaults)."""
    return {
        "fleet": "lookalike",
        "instance_types": [{"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.526}],
        "workloads": [{"name": w, "model": "resnet50", "slo_ms": 40, "rate_rps": 300} for w in SPECS],
        "agents": {"transport": "none"},
        "scaling": scaling,
    }


def replayed(seed: int, run: str) -> Replayed:
    """(short rows, rows, attainment, cost) of the seed's trace replayed as `run`."""
    return replay(policy_doc(RUNS[run]), make(SPECS, HOURS, seed=seed), oracle=run == "oracle")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 8])
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    res = Results(
        "forecast_lookalike", "python benchmarks/forecast_lookalike.py --seeds " + " ".join(map(str, args.seeds))
    )
    res.doc["jobs"] = args.jobs
    todo = [(seed, run) for seed in args.seeds for run in RUNS]
    with ProcessPoolExecutor(args.jobs) as pool:
        done = dict(zip(todo, pool.map(replayed, *zip(*todo, strict=True)), strict=True))
    res.line("runs", "| seed | run | short rows | attainment | cost |")
    res.line("runs", "| --- | --- | --- | --- | --- |")
    for (seed, run), figures in done.items():
        keep(res, f"s{seed}/{slug(run)}", f"{seed} | {run}", figures)
    res.write()


if __name__ == "__main__":
    main()
