"""Does a replay's tick grow with the process's age, or with the rows it replays? (issue 50)

Reads the runs of benchmarks/fleet_scale_sim.py that this question needs, all with `--window-s 3600`:
one from row 0 (`--write fleet_scale_age`, a day of rows) and fresh processes that start the same
walk K rows later (`--skip-rows K --write fleet_scale_age_skipK`, K a multiple of 60). Each fresh
run's hour h replays the rows of the first run's hour K/60 + h, in a process h hours old instead of
K/60 + h. Hour 0 of a fresh run also fills the forecast's and the headroom estimator's windows
(those steps cost less there), so only its later hours compare like with like.

Writes benchmarks/results/fleet_scale_age_table.json: `tables.hours` (per fresh hour: the CPU a
tick there and in the first run's same rows) and the mean ratio fresh / first run over the hours
after the first (`fresh_over_day_after_hour0`; `_first_half` and `_second_half` by the day run's
hour) and over the first hours (`fresh_over_day_hour0`); by step, `steps_first_half/STEP` and
`steps_second_half/STEP` (a cost of the process's own would slow every step alike).

Run (the runs first, e.g. side by side, one per core):
  python benchmarks/fleet_scale_sim.py --workloads 1000 --rows 1440 --plan-on interval \\
      --window-s 3600 --per-tick FILE --write fleet_scale_age
  for k in 60 180 540 900 1260; do python benchmarks/fleet_scale_sim.py --workloads 1000 \\
      --rows 180 --skip-rows $k --plan-on interval --window-s 3600 --per-tick FILE \\
      --write fleet_scale_age_skip$k; done
  python benchmarks/fleet_scale_age.py
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from _results import RESULTS, Results
from fleet_scale_sim import WINDOW_KEYS as STEPS  # the windows' columns: CPU a tick in all and by step

HOUR_S = 3600.0
ROWS_AN_HOUR = 60  # fleet_scale_sim.py's rows are 60 s
HALF_DAY_H = 12  # the day run's hours from here on are its second half


def hourly(doc: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Hour (from the run's time 0) -> mean CPU a tick in all and by step, from a run's `tables.windows`."""
    header = [c.strip().removesuffix(" s") for c in doc["tables"]["windows"][0].strip("|").split("|")]
    out: dict[int, dict[str, float]] = {}
    for row in doc["tables"]["windows"][2:]:
        cells = dict(zip(header, (c.strip() for c in row.strip("|").split("|")), strict=True))
        out[int(float(cells["from"].replace(",", "")) // HOUR_S)] = {k: float(cells[k]) for k in STEPS}
    return out


def pairs(base: dict[int, dict[str, float]]) -> list[tuple[int, int, int, dict[str, float], dict[str, float]]]:
    """(rows skipped, hour of the fresh run, the day run's hour of the same rows, the fresh run's
    means, the day run's) for every fresh run's hour the day run also has."""
    out = []
    for path in sorted(RESULTS.glob("fleet_scale_age_skip*.json"), key=lambda p: int(p.stem.rsplit("skip", 1)[1])):
        doc = json.loads(path.read_text())
        skip = int(doc["figures"]["w1000/skip_rows"])
        if skip % ROWS_AN_HOUR:
            raise SystemExit(f"{path.name}: skip_rows {skip} is not a whole hour of 60 s rows")
        for h, fresh in sorted(hourly(doc).items()):
            at = skip // ROWS_AN_HOUR + h
            if at in base:
                out.append((skip, h, at, fresh, base[at]))
    return out


def main() -> None:
    day = json.loads((RESULTS / "fleet_scale_age.json").read_text())
    base = hourly(day)
    res = Results("fleet_scale_age_table", "python benchmarks/fleet_scale_age.py")
    res.line(
        "hours",
        "| rows from | hour of the fresh run | CPU a tick, fresh s | hour of the day run | CPU a tick there s | fresh / day |",
    )
    res.line("hours", "| --- | --- | --- | --- | --- | --- |")
    groups: dict[str, list[dict[str, float]]] = {"hour0": [], "first_half": [], "second_half": []}
    for skip, h, at, fresh, old in pairs(base):
        ratio = {k: fresh[k] / old[k] for k in STEPS}
        groups["hour0" if h == 0 else "second_half" if at >= HALF_DAY_H else "first_half"].append(ratio)
        res.line("hours", f"| {skip:,} | {h} | {fresh['cpu']:.3f} | {at} | {old['cpu']:.3f} | {ratio['cpu']:.2f} |")
    res.figure("fresh_over_day_hour0", statistics.mean(r["cpu"] for r in groups["hour0"]))
    later = groups["first_half"] + groups["second_half"]
    res.figure("fresh_over_day_after_hour0", statistics.mean(r["cpu"] for r in later))
    for half in ["first_half", "second_half"]:
        res.figure(f"fresh_over_day_after_hour0_{half}", statistics.mean(r["cpu"] for r in groups[half]))
        for step in STEPS[1:]:
            res.figure(f"steps_{half}/{step}", statistics.mean(r[step] for r in groups[half]))
    res.figure("day_first_hour_cpu_per_tick_s", base[0]["cpu"])
    res.figure("day_cpu_per_tick_s", day["figures"]["w1000/cpu_per_tick_s"])
    res.figure("day_wall_s", day["figures"]["w1000/wall_s"])
    res.write()


if __name__ == "__main__":
    main()
