"""`igniter simulate --frontier`'s chart and table, for a reader choosing a target (issue 51): cost
against the rows left short on a log axis (nines, more to the right), each series joined in target
order, labels that do not collide even where targets cost the same; the table keeps its headers
whole when it is not printed on a terminal."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from autoscaler.sim.frontier import FRONTIER_TARGETS, _nines, draw_frontier, frontier, short_fraction
from autoscaler.sim.result import SimResult
from autoscaler.sim.traces import read_wide


@pytest.fixture
def results(make_policy, write_csv) -> list[SimResult]:
    """A real frontier on a small trace whose step up leaves rows short at some targets."""
    policy = make_policy()
    trace = write_csv("trace.csv", [["time_s", "a"], *[[60 * i, 500 if i < 8 else 1000] for i in range(16)]])
    return frontier(policy, read_wide(trace))


@pytest.mark.unit
def test_the_axis_reads_as_nines() -> None:
    assert [_nines(s) for s in (1e-1, 1e-2, 1e-3, 1e-5)] == ["90%", "99%", "99.9%", "99.999%"]


@pytest.mark.unit
def test_cost_against_rows_short_on_a_log_axis_in_target_order(results: list[SimResult], tmp_path: Path) -> None:
    fig, boxes = draw_frontier(results)
    try:
        ax = fig.axes[0]
        assert ax.get_xscale() == "log" and ax.xaxis_inverted()  # more nines to the right
        no_pool, pool = ax.get_lines()[0], ax.get_lines()[1]
        floor = 0.5 / (len(results[0].trace.times) * len(results[0].trace.names))
        for line, runs in ((no_pool, results[:-1:2]), (pool, results[1:-1:2])):
            assert [r.label.split()[1] for r in runs] == [f"{t:g}" for t in FRONTIER_TARGETS]  # target order
            assert list(line.get_xdata()) == [max(short_fraction(r), floor) for r in runs]
            assert list(line.get_ydata()) == [r.cost_total_usd for r in runs]
        assert len(boxes) == len(results)
        for a, b in itertools.combinations(boxes, 2):  # no two labels overlap
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
        texts = [t.get_text() for t in ax.texts]
        assert any(t.startswith("0.99: ") and t.endswith(" short") for t in texts), texts
        fig.savefig(tmp_path / "f.png")
        assert (tmp_path / "f.png").stat().st_size > 1000
    finally:
        plt.close(fig)


@pytest.mark.unit
def test_the_table_keeps_its_headers_off_a_terminal(igniter, make_policy, write_csv) -> None:
    make_policy()
    trace = write_csv("trace.csv", [["time_s", "a"], *[[60 * i, 500] for i in range(6)]])
    r = igniter("simulate", trace.parent / "policy.yaml", "--trace", trace, "--frontier")
    assert r.code == 0, r.err
    for header in ("attainment", "short rows", "x oracle", "warm starts", "out of reach (workload-ticks)"):
        assert header in r.out, r.out
    assert "…" not in r.out
