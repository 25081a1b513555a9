"""The live demo's screen: rates, forecast, plan, instances and p99 against the SLO, from one
`Frame` (a plain snapshot the demo assembles after each tick and between ticks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class WorkloadRow:
    name: str
    model: str
    slo_ms: float
    sending_rps: float  # real requests per second the load generator sends now
    observed_rps: float | None  # the rate source's reading at the last tick (planned units)
    forecast_rps: float | None  # what the last tick planned for (forecast with headroom)
    capacity_rps: float  # predicted throughput of the layout's servers
    ready: int
    servers: int
    server_p99_ms: float | None  # worst last-minute p99 the agents report
    client_p99_ms: float | None  # p99 of the last requests, measured by the load generator
    ok: int
    failed: int
    refused: int


@dataclass(frozen=True)
class InstanceRow:
    slot: str
    instance_type: str
    state: str
    servers: Sequence[tuple[str, str]]  # (server name, state)


@dataclass(frozen=True)
class Frame:
    elapsed_s: float
    duration_s: float
    trace_clock: str
    tick: int
    decision: str
    cost_per_hour: float
    scale_note: str
    workloads: Sequence[WorkloadRow]
    instances: Sequence[InstanceRow]
    events: Sequence[str] = field(default_factory=tuple)


def _num(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def _p99(v: float | None, slo: float) -> Text:
    if v is None:
        return Text("-")
    return Text(f"{v:.1f}", style="green" if v <= slo else "bold red")


def workload_table(frame: Frame) -> Table:
    t = Table(title="workloads", title_justify="left", expand=False)
    for col in (
        "workload",
        "model",
        "sending req/s",
        "observed",
        "forecast",
        "capacity",
        "servers",
        "p99 server ms",
        "p99 client ms",
        "SLO ms",
        "ok / failed / refused",
    ):
        t.add_column(col, justify="left" if col in ("workload", "model") else "right")
    for w in frame.workloads:
        short = w.observed_rps is not None and w.capacity_rps < w.observed_rps
        cap = Text(_num(w.capacity_rps), style="bold red" if short else "green")
        t.add_row(
            w.name,
            w.model,
            f"{w.sending_rps:.1f}",
            _num(w.observed_rps),
            _num(w.forecast_rps),
            cap,
            f"{w.ready}/{w.servers}",
            _p99(w.server_p99_ms, w.slo_ms),
            _p99(w.client_p99_ms, w.slo_ms),
            f"{w.slo_ms:g}",
            f"{w.ok} / {w.failed} / {w.refused}",
        )
    return t


def instance_table(frame: Frame) -> Table:
    t = Table(
        title="instances (local agent processes) and their servers: batch, MPS share (state)", title_justify="left"
    )
    for col in ("slot", "type", "state", "servers"):
        t.add_column(col)
    for i in frame.instances:
        servers = ", ".join(f"{n} ({s})" for n, s in i.servers) or "-"
        t.add_row(i.slot, i.instance_type, i.state, servers)
    return t


def render(frame: Frame) -> Group:
    head = Text.assemble(
        ("igniter live demo  ", "bold"),
        f"{frame.elapsed_s:5.0f} / {frame.duration_s:.0f} s   ",
        ("trace ", "dim"),
        frame.trace_clock,
        ("   tick ", "dim"),
        str(frame.tick),
        ("   fleet ", "dim"),
        f"${frame.cost_per_hour:.3f}/h",
    )
    lines = [
        head,
        Text(frame.scale_note, style="dim"),
        Text(f"plan: {frame.decision}", style="cyan"),
        workload_table(frame),
        instance_table(frame),
    ]
    lines += [Text(e, style="yellow") for e in frame.events[-4:]]
    return Group(*lines)


def one_line(frame: Frame) -> str:
    """The frame as one log line, for a console that is not a terminal."""
    parts = [f"t={frame.elapsed_s:4.0f}s trace {frame.trace_clock} tick {frame.tick} ${frame.cost_per_hour:.3f}/h"]
    for w in frame.workloads:
        parts.append(
            f"{w.name}: send {w.sending_rps:.1f}/s obs {_num(w.observed_rps)} fc {_num(w.forecast_rps)} "
            f"cap {_num(w.capacity_rps)} ready {w.ready}/{w.servers} p99 {_num(w.server_p99_ms, '{:.1f}')} ms"
        )
    parts.append(f"instances {sum(1 for i in frame.instances if i.state in ('ready', 'running', 'pending'))}")
    return " | ".join(parts)


def summary_table(rows: Sequence[Mapping[str, Any]], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    if not rows:
        return t
    for col in rows[0]:
        t.add_column(col, justify="left" if col == "workload" else "right")
    for r in rows:
        t.add_row(*(str(v) for v in r.values()))
    return t
