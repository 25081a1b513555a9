"""`igniter simulate --frontier`: cost against attainment for a few targets, so ops can choose.

Each run is the policy with `headroom: auto` at one `target_attainment` (FRONTIER_TARGETS), on the
same trace and code, and the oracle (a perfect forecast of interval + boot) as the floor. A target
the settings cannot reach shows as such: its `out_of_reach_ticks` name the cause (the headroom at
its cap, bursts rising faster than a tick and a boot), and two targets the cap makes the same cost
the same to the cent. Each target runs with the warm pool off and on (POOL_ON: the policy's own
`scaling.warm_pool` where it has one, else `{size: auto}`), so ops see what the pool buys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoscaler.config.policy import Policy
from autoscaler.config.scaling import WarmPoolConfig
from autoscaler.sim.engine import SimOptions, simulate
from autoscaler.sim.result import SimResult
from autoscaler.sim.traces import Trace

FRONTIER_TARGETS = (0.99, 0.995, 0.999, 0.9999)


def at_target(policy: Policy, target: float, pool: WarmPoolConfig | None = None) -> Policy:
    """The policy at `target` with headroom auto, and the warm pool `pool` (None: none)."""
    sc = policy.scaling.model_copy(
        update={"target_attainment": target, "headroom": "auto", "warm_pool": pool or WarmPoolConfig()}
    )
    return policy.model_copy(update={"scaling": sc})


def pool_on(policy: Policy) -> WarmPoolConfig:
    """The pool a frontier's `+ warm pool` runs use: the policy's own, else size auto."""
    own = policy.scaling.warm_pool
    return own if own.enabled else WarmPoolConfig(size="auto")


def frontier(
    policy: Policy, trace: Trace, base: SimOptions = SimOptions(), progress: Callable[[str], None] | None = None
) -> list[SimResult]:
    """Per target (headroom auto), a run with the warm pool off and one with it on; then the oracle."""
    out = []
    for t in FRONTIER_TARGETS:
        for pool, label in ((None, f"target {t:g}"), (pool_on(policy), f"target {t:g} + warm pool")):
            if progress:
                progress(label)
            out.append(simulate(at_target(policy, t, pool), trace, replace(base, headroom="auto", label=label)))
    if progress:
        progress("oracle")
    out.append(simulate(policy, trace, replace(base, strategy="oracle", label="oracle")))
    return out


def print_frontier(results: Sequence[SimResult], console: Console | None = None) -> None:
    """One row per target: attainment, cost, cost against the oracle, and why a target is out of reach."""
    console = console or Console()
    oracle = results[-1].cost_total_usd
    table = Table(title=f"{Path(results[0].trace.source).name}: cost against attainment (headroom auto)")
    cols = (
        "run",
        "attainment",
        "short rows",
        "cost $",
        "x oracle",
        "warm starts",
        "pool $",
        "out of reach (workload-ticks)",
    )
    for col in cols:
        left = col in (cols[0], cols[-1])
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "x oracle")
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
            str(r.warm_starts),
            f"{r.warm_pool_cost_usd:,.2f}",
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
    ax.plot(xs[:-1:2], ys[:-1:2], "o-", label="headroom auto at each target, no warm pool")
    ax.plot(xs[1:-1:2], ys[1:-1:2], "^-", label="the same with the warm pool")
    ax.plot(xs[-1:], ys[-1:], "s", label="oracle (perfect forecast)")
    for r, x, y in zip(results, xs, ys):
        ax.annotate(r.label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("attainment (rows covered)")
    ax.set_ylabel("cost $")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
