"""`igniter simulate --frontier`: cost against attainment for a few targets, so ops can choose.

Each run is the policy with `headroom: auto` at one `target_attainment` (FRONTIER_TARGETS), on the
same trace and code, and the oracle (a perfect forecast of interval + boot) as the floor. A target
the settings cannot reach shows as such: its `out_of_reach_ticks` name the cause (the headroom at
its cap, bursts rising faster than a tick and a boot), and two targets the cap makes the same cost
the same to the cent. (Issue 35 also asks for each target with a warm pool on and off; the warm
pool is not built yet.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoscaler.config.policy import Policy
from autoscaler.sim.engine import SimOptions, simulate
from autoscaler.sim.result import SimResult
from autoscaler.sim.traces import Trace

FRONTIER_TARGETS = (0.99, 0.995, 0.999, 0.9999)


def at_target(policy: Policy, target: float) -> Policy:
    sc = policy.scaling.model_copy(update={"target_attainment": target, "headroom": "auto"})
    return policy.model_copy(update={"scaling": sc})


def frontier(
    policy: Policy, trace: Trace, base: SimOptions = SimOptions(), progress: Callable[[str], None] | None = None
) -> list[SimResult]:
    """One run per target (headroom auto), then the oracle."""
    out = []
    for t in FRONTIER_TARGETS:
        label = f"target {t:g}"
        if progress:
            progress(label)
        out.append(simulate(at_target(policy, t), trace, replace(base, headroom="auto", label=label)))
    if progress:
        progress("oracle")
    out.append(simulate(policy, trace, replace(base, strategy="oracle", label="oracle")))
    return out


def print_frontier(results: Sequence[SimResult], console: Console | None = None) -> None:
    """One row per target: attainment, cost, cost against the oracle, and why a target is out of reach."""
    console = console or Console()
    oracle = results[-1].cost_total_usd
    table = Table(title=f"{Path(results[0].trace.source).name}: cost against attainment (headroom auto)")
    for col in ("run", "attainment", "short rows", "cost $", "x oracle", "out of reach (workload-ticks)"):
        table.add_column(col, justify="left" if col in ("run", "out of reach (workload-ticks)") else "right")
    for r in results:
        s = r.summary()
        reach = ", ".join(f"{k} {v}" for k, v in sorted(r.out_of_reach_ticks.items())) or "-"
        ratio = f"{r.cost_total_usd / oracle:.3f}" if oracle > 0 else "-"
        table.add_row(
            r.label,
            f"{s['slo_attainment']:.5f}",
            str(s["shortfall_steps"]),
            f"{r.cost_total_usd:,.2f}",
            ratio,
            reach,
        )
    console.print(table)


def plot_frontier(results: Sequence[SimResult], path: str | Path) -> None:
    """Cost against attainment, one point per run, labelled, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r.attainment() for r in results]
    ys = [r.cost_total_usd for r in results]
    ax.plot(xs[:-1], ys[:-1], "o-", label="headroom auto at each target")
    ax.plot(xs[-1:], ys[-1:], "s", label="oracle (perfect forecast)")
    for r, x, y in zip(results, xs, ys):
        ax.annotate(r.label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("attainment (rows covered)")
    ax.set_ylabel("cost $")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
