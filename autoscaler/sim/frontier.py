"""`igniter simulate --frontier`: cost against attainment for a few targets, so ops can choose.

Each run is the policy with `headroom: auto` at one `target_attainment` (FRONTIER_TARGETS), on the
same trace and code, and the oracle (a perfect forecast of interval + boot) as the floor. A target
the settings cannot reach shows as such: its `out_of_reach_ticks` name the cause (the headroom at
its cap, bursts rising faster than a tick and a boot), and two targets the cap makes the same cost
the same to the cent. Each target runs with the warm pool off and on (POOL_ON: the policy's own
`scaling.warm_pool` where it has one, else `{size: auto}`), so ops see what the pool buys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

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


def _console() -> Console:
    """Not on a terminal (a file, a pipe), rich would squash the table to 80 columns and cut its
    headers ("attain…"): give it room instead."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def print_frontier(results: Sequence[SimResult], console: Console | None = None) -> None:
    """One row per target: attainment, cost, cost against the oracle, and why a target is out of reach."""
    console = console or _console()
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


def short_fraction(result: SimResult) -> float:
    """The (row, workload) pairs left short: 1 - attainment, which a log axis spreads into nines."""
    return 1.0 - result.attainment()


def plot_frontier(results: Sequence[SimResult], path: str | Path) -> None:
    """The frontier chart (draw_frontier) as a PNG."""
    import matplotlib.pyplot as plt

    fig, _ = draw_frontier(results)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_frontier(results: Sequence[SimResult]) -> tuple[Any, list[tuple[float, float, float, float]]]:
    """Cost against the rows left short (1 - attainment) on a log axis, more nines to the right,
    each series joined in target order and labelled with its target and short rows. A run with
    none short sits at half a row's share, labelled "none short". Returns the figure and the
    labels' boxes in pixels (x0, y0, x1, y1), placed so that no two overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter

    pairs = len(results[0].trace.times) * len(results[0].trace.names)
    floor = 0.5 / pairs  # where "none short" is drawn: below any real share
    xs = [max(short_fraction(r), floor) for r in results]
    ys = [r.cost_total_usd for r in results]
    fig, ax = plt.subplots(figsize=(8, 5))
    runs = list(zip(results, xs, ys))[:-1]
    for series, marker, name in ((runs[0::2], "o-", "no warm pool"), (runs[1::2], "^--", "with the warm pool")):
        ax.plot([x for _, x, _ in series], [y for _, _, y in series], marker, label=f"headroom auto, {name}")
    ax.plot(xs[-1:], ys[-1:], "s", color="black", label="oracle (perfect forecast)")
    ax.set_xscale("log")
    high = max(max(xs) * 3, 10 * floor)
    ax.set_xlim(high, floor / 3)  # inverted: fewer rows short (more nines) to the right
    decades = [10.0**k for k in range(math.ceil(math.log10(floor)), math.floor(math.log10(high)) + 1)]
    ax.xaxis.set_major_locator(FixedLocator([*decades, floor]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "none short" if math.isclose(v, floor) else _nines(v)))
    ax.axvline(floor, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("attainment: rows covered (log scale of the rows short, 1 - attainment)")
    ax.set_ylabel("cost $")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    labels = [_label(r, x <= floor) for r, x in zip(results, xs)]
    fig.tight_layout()
    return fig, _place_labels(fig, ax, list(zip(labels, xs, ys)))


def _nines(short: float) -> str:
    """An axis tick as attainment: 1e-3 short is "99.9%"."""
    pct = 100.0 * (1.0 - short)
    return f"{pct:.10g}%" if short > 0 else ""


def _label(result: SimResult, none_short: bool) -> str:
    short = result.summary()["shortfall_steps"]
    head = result.label.replace("target ", "").replace(" + warm pool", " +pool")
    return f"{head}: {'none' if none_short else short} short"


def _place_labels(fig: Any, ax: Any, items: list[tuple[str, float, float]]) -> list[tuple[float, float, float, float]]:
    """Annotate each point at the first offset whose box overlaps no label placed before it (nor
    leaves the axes): a frontier's points crowd where targets cost the same."""
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    placed: list[Any] = []
    offsets = [(dx, dy) for dy in (6, -14, 18, -26, 30, -38, 42, -50, 54, -62) for dx in (6, -6)]
    for text, x, y in items:
        for dx, dy in offsets:
            note = ax.annotate(
                text,
                (x, y),
                textcoords="offset points",
                xytext=(dx, dy),
                fontsize=8,
                ha="left" if dx > 0 else "right",
                arrowprops={"arrowstyle": "-", "alpha": 0.4, "lw": 0.6},
            )
            box = note.get_window_extent(renderer)
            clear = not any(box.overlaps(other) for other in placed)
            if clear and inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1:
                placed.append(box)
                break
            note.remove()
        else:
            note = ax.annotate(text, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
            placed.append(note.get_window_extent(renderer))
    return [(b.x0, b.y0, b.x1, b.y1) for b in placed]
