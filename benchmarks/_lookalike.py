"""What the look-alikes of issue 52's unseen traces share (forecast_lookalike.py, forecast_weblog.py):
one replay of a generated trace under a policy document, counted the way the issue counts, and its
figures and table row kept."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from _results import Results

from autoscaler.config.policy import load_policy
from autoscaler.sim.engine import SimOptions, simulate
from autoscaler.sim.traces import Trace

Replayed = tuple[int, int, float, float]  # short rows, rows, attainment, cost


def replay(doc: dict[str, Any], trace: Trace, oracle: bool = False) -> Replayed:
    """`trace` replayed under the policy `doc` (the oracle's strategy where asked): the rows whose
    ready capacity is under the rate (every workload's), all rows, the attainment and the cost."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "policy.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        r = simulate(load_policy(path), trace, SimOptions(strategy="oracle") if oracle else SimOptions())
    short = sum(int((r.capacity[w] < trace.rates[w] - 1e-9).sum()) for w in trace.names)
    s = r.summary()
    return short, len(trace.times) * len(trace.names), float(s["slo_attainment"]), float(s["cost_total_usd"])


def keep(res: Results, key: str, label: str, replayed: Replayed) -> None:
    """The replay's figures under `key` and its row (`label`: the columns before the figures) in
    the table `runs`."""
    short, rows, att, cost = replayed
    res.figure(f"{key}/short", short)
    res.figure(f"{key}/rows", rows)
    res.figure(f"{key}/attainment", att)
    res.figure(f"{key}/cost", round(cost, 2))
    res.line("runs", f"| {label} | {short} of {rows} | {att:.4f} | ${cost:.2f} |")
