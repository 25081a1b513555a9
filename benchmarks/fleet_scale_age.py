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
hour) and over the first hours (`fresh_over_day_hour0`).

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

HOUR_S = 3600.0
HALF_DAY_H = 12  # the day run's hours from here on are its second half


def hourly(doc: dict[str, Any]) -> dict[int, float]:
    """Hour (from the run's time 0) -> mean CPU a tick, from a run's `tables.windows`."""
    out: dict[int, float] = {}
    for row in doc["tables"]["windows"][2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        out[int(float(cells[0].replace(",", "")) // HOUR_S)] = float(cells[2])
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
    first: list[float] = []
    later: dict[bool, list[float]] = {False: [], True: []}  # by whether the day run's hour is past its half
    for path in sorted(RESULTS.glob("fleet_scale_age_skip*.json"), key=lambda p: int(p.stem.rsplit("skip", 1)[1])):
        doc = json.loads(path.read_text())
        skip = int(doc["figures"]["w1000/skip_rows"])
        if skip % 60:
            raise SystemExit(f"{path.name}: skip_rows {skip} is not a whole hour of 60 s rows")
        for h, cpu in sorted(hourly(doc).items()):
            at = skip // 60 + h
            if at not in base:
                continue
            ratio = cpu / base[at]
            if h == 0:
                first.append(ratio)
            else:
                later[at >= HALF_DAY_H].append(ratio)
            res.line("hours", f"| {skip:,} | {h} | {cpu:.3f} | {at} | {base[at]:.3f} | {ratio:.2f} |")
    res.figure("fresh_over_day_hour0", statistics.mean(first))
    res.figure("fresh_over_day_after_hour0", statistics.mean(later[False] + later[True]))
    res.figure("fresh_over_day_after_hour0_first_half", statistics.mean(later[False]))
    res.figure("fresh_over_day_after_hour0_second_half", statistics.mean(later[True]))
    res.figure("day_first_hour_cpu_per_tick_s", base[0])
    res.figure("day_cpu_per_tick_s", day["figures"]["w1000/cpu_per_tick_s"])
    res.figure("day_wall_s", day["figures"]["w1000/wall_s"])
    res.write()


if __name__ == "__main__":
    main()
