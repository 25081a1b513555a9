"""`forecast: seasonal`, `auto` and the oracle on recurring-burst traces (benchmarks/burst_traces.py),
and how often `auto` finds a period in the shipped traces (issue 52).

Generated traces: 8 hours of 1-minute rows, one workload each, replayed through the real
controller with tests/kit/sim.py's small policy (one T4 type, 60 s ticks, boot_s 180, headroom 0,
scale_down_delay_s 300: the forecast alone decides the lead) and `forecast` set per run. Per run:
short rows, the bursts after the second occurrence whose first row is short (the target: none), and
the cost. `auto`'s constants (core/capacity/periods.py: alpha, min_acf, min_dip, min_strength,
lead_s) were chosen looking at the `hourly` and `half-hourly` specs with seeds 0 to 3 only. Seeds
10 and 11 (`tune`) were then looked at burst by burst to find why `auto` misses, and max_spread_s
was chosen on them; seeds 30 and 31 (`held out`) were run once, after that choice. Later (issue
52, the refit schedule) the tune seeds alone chose the young history's refits (periods.py:
refit_after), the multiples' search (sharpen_spread 0.06) and two cycles for periods up to 4 h
(quick_period_s); the held-out seeds were run once after. `auto, spread`
is `auto` with the ahead window widened by the spread of the onsets (`scaling.onset_spread_s` =
SPREAD_S; 0 by default); both are run with the warm pool off and with `warm_pool: {size: auto}`.
Later still the widening takes all of SPREAD_S while only two cycles are known (periods.py
`_spread`: no new constant). That rule was formed on a tune seed's miss, and the held-out seeds'
one miss was known to be of the same kind, so neither set is held out for it; seeds 50 to 53
(`fresh`) were first run after it, once. Their one miss (seed 53, the jittered hour's fourth
burst: its period failed the out-of-sample test from minute 155 to 200, the third burst having
come 4 minutes before the fold of the first two put it) made that test allow the onsets' spread
(period_skill.py `skill`, `spread_steps`: the profile may come up to onset_spread_s early or late
on the held-out stretch; no new constant, and nothing changes where onset_spread_s is 0). So the
fresh seeds are not held out for it either; seeds 60 to 63 (`fresh 2`) were first run after it,
once.
Then (issue 52, the out-of-sample test: core/capacity/period_skill.py) `min_skill` 0.15 was
chosen on the tune seeds (0, 0.05, 0.1 and 0.15 leave the same bursts short, 0.2 and 0.35 one
more: the largest that keeps them) and ServeGen's first halves (the skills of the periods the
controller's refits found there); the held-out seeds and the second halves were run once after.
Then (d3900e6) a period over quick_period_s (4 h) is planned with only once `occurrences` full
cycles precede its held-out stretch (period_skill.trains_full_profile): no new constant, but the
rule was formed after the second halves' replays were read (forecast_why.py --second: m-large's
4.6-5 h period at 182-186 h was the one cause of the two cells where `auto` was worse), so the
second halves are not held out for it. No generated trace (tune or held out) has a candidate
period over 4 h, so their fits are unchanged by it.

Shipped traces: each workload's history is refit every hour from its second on (the last day, 60 s
grid; the controller's steady schedule, it refits a younger history more often) and the refits that
found a significant period are counted, and those that kept one after the out-of-sample test
(`decompose`: periods.py `proven`): where none is kept,
`auto`'s rise is 0 and it plans exactly as `seasonal` (tests/sim/test_forecast_auto.py checks that
to the cent on noise). With `--replay`, benchmarks/_targets.py's cases (every shipped trace, each
example policy's defaults) are also replayed with the defaults and with `forecast: auto`, scored
on each half, and with `auto, spread`.

    python benchmarks/forecast_auto.py [--replay]
    python benchmarks/forecast_auto.py --warm   # the shipped replays with the warm pool on
    ... --jobs N                                # the traces and replays in N processes (same figures)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from _results import ROOT, Results
from _targets import slug
from burst_traces import Bursts, make

from autoscaler.config.policy import Policy, load_policy
from autoscaler.core.capacity.periods import PeriodConfig, decompose, find_periods, grid
from autoscaler.sim.engine import SimOptions, SimResult, simulate
from autoscaler.sim.traces import Trace, read_wide

sys.path.append(str(ROOT / "tests"))
from kit.sim import BASE

SPECS = {
    "hourly": Bursts(base_rps=300.0),
    "half-hourly": Bursts(1800.0, 600.0, base_rps=300.0),
    "hourly, jitter 180 s": Bursts(jitter_s=180.0, base_rps=300.0),
    "hourly, x3, noise 10 %": Bursts(amplitude=3.0, noise=0.1, base_rps=300.0),
    "45 min, rise 120 s": Bursts(2700.0, 900.0, rise_s=120.0, base_rps=300.0),
    "3-hourly, hold 20 min": Bursts(10800.0, 3600.0, hold_s=1200.0, base_rps=300.0),
}
SEEDS = {"tune": (10, 11), "held out": (30, 31), "fresh": (50, 51, 52, 53), "fresh 2": (60, 61, 62, 63)}
SPREAD_S = 300.0  # chosen on the `tune` seeds (300, 600 and 900 s alike there; the cheapest kept)
RUNS = ("seasonal", "auto", "auto, spread", "auto, warm pool", "auto, spread, warm pool", "oracle")
SHIPPED = ("servegen-3models-1min.csv", "azure-llm-2023-1min.csv", "servegen-3models-wide.csv")


def policy(tmp: Path, forecast: str, warm: bool = False, spread: bool = False) -> Policy:
    pool = {"warm_pool": {"size": "auto"}} if warm else {}
    widen = {"onset_spread_s": SPREAD_S} if spread else {}
    data = {**BASE, "scaling": {**BASE["scaling"], "forecast": forecast, **pool, **widen}}
    (tmp / "policy.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_policy(tmp / "policy.yaml")


def late_misses(r: SimResult, base: float) -> tuple[int, int]:
    """(bursts after the second, those whose first row is short)."""
    rates, cap = r.trace.rates["a"], r.capacity["a"]
    hot = rates > 2 * base
    starts = [i for i in range(1, len(hot)) if hot[i] and not hot[i - 1]][2:]
    return len(starts), sum(1 for i in starts if cap[i] < rates[i] - 1e-9)


def run_one(tmp: Path, run: str, trace: Trace) -> SimResult:
    """One generated trace replayed as `run` says (see RUNS)."""
    if run == "oracle":
        return simulate(policy(tmp, "seasonal"), trace, SimOptions(strategy="oracle"))
    forecast = "seasonal" if run == "seasonal" else "auto"
    return simulate(policy(tmp, forecast, "warm pool" in run, "spread" in run), trace, SimOptions())


def scored(name: str, seed: int) -> list[tuple[int, int, int, float]]:
    """One generated trace (SPECS[name], seed) replayed as each of RUNS: (short rows, bursts 3+
    short at their start, bursts 3+, cost) per run."""
    spec = SPECS[name]
    trace = make({"a": spec}, 8.0, seed=seed)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in RUNS:
            r = run_one(Path(tmp), run, trace)
            n, missed = late_misses(r, spec.base_rps)
            short = int((r.capacity["a"] < trace.rates["a"] - 1e-9).sum())
            out.append((short, missed, n, float(r.summary()["cost_total_usd"])))
    return out


def generated(res: Results, jobs: int = 1) -> None:
    """Every spec and seed as each of RUNS; `jobs` > 1: the traces in that many processes."""
    from concurrent.futures import ProcessPoolExecutor

    todo = [(name, seed) for seeds in SEEDS.values() for name in SPECS for seed in seeds]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = dict(zip(todo, pool.map(scored, *zip(*todo, strict=True)), strict=True))
    else:
        done = {t: scored(*t) for t in todo}
    res.line("generated", "| trace | set | seed | run | short rows | bursts 3+ short at their start | cost |")
    res.line("generated", "| --- | --- | --- | --- | --- | --- | --- |")
    res.line("totals", "| set | run | short rows | bursts 3+ short at their start | cost |")
    res.line("totals", "| --- | --- | --- | --- | --- |")
    for part, seeds in SEEDS.items():
        totals = {run: [0, 0, 0, 0.0] for run in RUNS}
        for name in SPECS:
            for seed in seeds:
                for run, (short, missed, n, cost) in zip(RUNS, done[(name, seed)], strict=True):
                    key = f"{slug(name)}/s{seed}/{slug(run)}"
                    res.figure(f"{key}/short", short)
                    res.figure(f"{key}/late_missed", missed)
                    res.figure(f"{key}/cost", cost)
                    totals[run] = [a + b for a, b in zip(totals[run], (short, missed, n, cost), strict=True)]
                    res.line(
                        "generated", f"| {name} | {part} | {seed} | {run} | {short} | {missed} of {n} | ${cost:.2f} |"
                    )
        for run, (short, missed, n, cost) in totals.items():
            key = f"{slug(part)}/{slug(run)}"
            res.figure(f"{key}/short", short)
            res.figure(f"{key}/late_missed", missed)
            res.figure(f"{key}/late_bursts", n)
            res.figure(f"{key}/cost", round(cost, 2))
            res.line("totals", f"| {part} | {run} | {short} | {missed} of {n} | ${cost:.2f} |")


def shipped(res: Results) -> None:
    res.line(
        "shipped", "| trace | workload | hourly refits | found a period | kept one (out of sample) | periods kept |"
    )
    res.line("shipped", "| --- | --- | --- | --- | --- | --- |")
    cfg = PeriodConfig()
    for f in SHIPPED:
        tr = read_wide(ROOT / "traces" / f)
        for w in tr.names:
            pts = list(zip(tr.times.tolist(), tr.rates[w].tolist(), strict=True))
            found = fits = 0
            seen: set[int] = set()
            ends = np.arange(tr.times[0] + 7200.0, tr.times[-1], cfg.refit_s)
            for end in ends:
                day = [p for p in pts if end - 86400.0 <= p[0] <= end]
                found += bool(find_periods(*grid(day, cfg.step_s, float(end)), cfg))
                fit = decompose(day, float(end), 240.0, cfg)
                fits += bool(fit.periods)
                seen.update(round(p.period_s / 600.0) * 600 for p in fit.periods)
            res.figure(f"{slug(f)}/{w}/refits", len(ends))
            res.figure(f"{slug(f)}/{w}/found_period", found)
            res.figure(f"{slug(f)}/{w}/with_period", fits)
            periods = ", ".join(f"{s / 3600:g} h" for s in sorted(seen)) or "-"
            res.line("shipped", f"| {f} | {w} | {len(ends)} | {found} | {fits} | {periods} |")


def replayed(index: int, label: str, warm: bool) -> list[tuple[str, int, float]]:
    """One shipped case (`cases()[index]`) replayed as `label` says (`defaults`, `auto`, `auto,
    spread`), with the warm pool where `warm`: (half, short rows, cost) for each half."""
    from _targets import cases, half, score

    case = cases()[index]
    sc = case.policy.scaling
    if warm:
        sc = sc.model_copy(update={"warm_pool": sc.warm_pool.model_copy(update={"size": "auto"})})
    if label != "defaults":
        sc = sc.model_copy(update={"forecast": "auto"})
    if label == "auto, spread":
        sc = sc.model_copy(update={"onset_spread_s": SPREAD_S})
    r = simulate(case.policy.model_copy(update={"scaling": sc}), case.trace)
    n, mid = len(case.trace.times), half(case.trace)
    out = []
    for part, lo, hi in (("first", 0, mid), ("second", mid, n)):
        s = score(r, lo, hi, sc.boot_s)
        out.append((part, s.short, s.cost))
    return out


def replay(res: Results, warm: bool = False, jobs: int = 1) -> None:
    """Every shipped case with the defaults, `auto` and `auto, spread`, scored on each half; with
    `warm`, each with `warm_pool: {size: auto}` as well. `jobs` > 1: the replays run in that many
    processes (each is deterministic: the same figures, sooner)."""
    from concurrent.futures import ProcessPoolExecutor

    from _targets import cases

    labels = ("defaults", "auto", "auto, spread")
    names = [c.name for c in cases()]
    todo = [(i, label) for i in range(len(names)) for label in labels]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(replayed, *zip(*todo, strict=True), [warm] * len(todo)))
    else:
        done = [replayed(i, label, warm) for i, label in todo]
    scores = dict(zip(todo, done, strict=True))
    res.line("replay", "| trace | part | run | short rows | cost |")
    res.line("replay", "| --- | --- | --- | --- | --- |")
    for i, name in enumerate(names):
        for k, part in enumerate(("first", "second")):
            for label in labels:
                _, short, cost = scores[(i, label)][k]
                res.figure(f"{slug(name)}/{part}/{slug(label)}/short", short)
                res.figure(f"{slug(name)}/{part}/{slug(label)}/cost", cost)
                res.line("replay", f"| {name} | {part} half | {label} | {short} | ${cost:,.2f} |")


def main() -> None:
    """Generated traces, the shipped traces' refits, and with --replay the shipped replays; with
    --warm only the shipped replays, each with the warm pool on (results: forecast_auto_warm)."""
    args = sys.argv[1:]
    jobs = int(args[args.index("--jobs") + 1]) if "--jobs" in args else 1
    if "--warm" in args:
        res = Results("forecast_auto_warm", "python benchmarks/forecast_auto.py --warm")
        res.doc["jobs"] = jobs
        replay(res, warm=True, jobs=jobs)
        res.write()
        return
    replaying = "--replay" in args
    res = Results("forecast_auto", "python benchmarks/forecast_auto.py" + (" --replay" if replaying else ""))
    res.doc["jobs"] = jobs  # the processes the runs were spread over (cpu_seconds: this process's only)
    generated(res, jobs)
    shipped(res)
    if replaying:
        replay(res, jobs=jobs)
    res.write()


if __name__ == "__main__":
    main()
