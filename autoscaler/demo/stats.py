"""The live demo's bookkeeping: which servers are ready (from the agents' status files), what each
tick looked like, the frame the view renders, and the final summary."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from agents.node.status import read_status
from autoscaler.core.fleet.lifecycle import LIVE
from autoscaler.core.layout.layout_types import Layout
from autoscaler.demo.loadgen import LoadGen
from autoscaler.demo.view import Frame, InstanceRow, WorkloadRow, summary_table
from autoscaler.loop.tick.controller import Controller, TickReport


@dataclass(frozen=True)
class ServerSeen:
    name: str
    workload: str
    state: str
    url: str | None
    p99_ms: float | None


class Router:
    """Ready servers per workload, read from each local instance's status file every 0.5 s."""

    def __init__(self, instances_root: Path) -> None:
        self.root = instances_root
        self.by_instance: dict[str, list[ServerSeen]] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="demo-router", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout=2)

    def _loop(self) -> None:
        while not self.stop_event.wait(0.5):
            try:
                self.refresh()
            except OSError:  # an instance directory changing under us: read again next time
                continue

    def refresh(self) -> None:
        seen: dict[str, list[ServerSeen]] = {}
        for d in sorted(self.root.iterdir()) if self.root.is_dir() else ():
            status = read_status(d)
            if status.get("agent_running"):
                seen[d.name] = [_server(s) for s in status.get("servers", []) if isinstance(s, dict)]
        with self.lock:
            self.by_instance = seen

    def servers(self) -> list[ServerSeen]:
        with self.lock:
            return [s for v in self.by_instance.values() for s in v]

    def endpoints(self, workload: str) -> list[str]:
        return [s.url for s in self.servers() if s.workload == workload and s.state == "ready" and s.url]

    def ready_names(self) -> set[str]:
        return {s.name for s in self.servers() if s.state == "ready"}

    def all_ready(self, layout: Layout) -> bool:
        return {srv.name for _, srv in layout.servers()} <= self.ready_names()

    def p99(self, workload: str) -> float | None:
        values = [s.p99_ms for s in self.servers() if s.workload == workload and s.p99_ms is not None]
        return max(values, default=None)


def _server(raw: Mapping[str, Any]) -> ServerSeen:
    port = raw.get("port")
    p99 = raw.get("latency_ms_p99")
    return ServerSeen(
        str(raw.get("name", "")),
        str(raw.get("workload", "")),
        str(raw.get("state", "")),
        f"http://127.0.0.1:{port}" if isinstance(port, int) else None,
        float(p99) if isinstance(p99, int | float) else None,
    )


def ready_capacity(controller: Controller, ready: set[str]) -> dict[str, float]:
    """Predicted throughput of every server the agents were told to run and that reports ready."""
    out: dict[str, float] = {}
    for _, servers in controller.store.applied().values():
        for s in servers:
            if s.name in ready:
                out[s.workload] = out.get(s.workload, 0.0) + s.predicted_throughput_rps
    return out


@dataclass
class Recorder:
    """Per-tick samples during the replay, for the summary."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    launches: int = 0
    terminations: int = 0
    configures: int = 0
    server_p99: dict[str, float] = field(default_factory=dict)

    def tick(self, report: TickReport, router: Router, controller: Controller, elapsed: float) -> None:
        for line in report.outcome.done:
            kind = line.split(" ", 1)[0]
            self.launches += kind == "launch"
            self.terminations += kind == "terminate"
            self.configures += kind == "configure"
            self.events.append(f"t={elapsed:4.0f}s {line}")
        self.events.extend(f"t={elapsed:4.0f}s {m}" for m in report.outcome.failed)
        prices = {t.name: t.price_per_hour for t in controller.policy.instance_types}
        live = [r for r in controller.store.open_records() if r.state in LIVE and r.instance_id]
        for w in report.observed:
            p99 = router.p99(w)
            if p99 is not None and elapsed > 0:
                self.server_p99[w] = max(self.server_p99.get(w, 0.0), p99)
        self.samples.append(
            {
                "elapsed": elapsed,
                "observed": dict(report.observed),
                "capacity": ready_capacity(controller, router.ready_names()),
                "instances": len(live),
                "cost_per_hour": sum(prices.get(r.instance_type, 0.0) for r in live),
            }
        )


def build_frame(demo: Any, controller: Controller, gen: LoadGen, router: Router, report: TickReport | None) -> Frame:
    """Everything the view shows, as a plain snapshot."""
    counts = gen.snapshot()
    sending = gen.schedule(gen.elapsed()) if gen.started else {}
    layout = report.layout if report else None
    ready = router.ready_names()
    cap = ready_capacity(controller, ready)
    rows = []
    for w in controller.policy.workloads:
        c = counts.get(w.name)
        names = [srv.name for _, srv in layout.servers() if srv.workload == w.name] if layout else []
        rows.append(
            WorkloadRow(
                w.name,
                w.model,
                w.slo_ms,
                sending.get(w.name, 0.0),
                report.observed.get(w.name) if report else None,
                report.forecast.get(w.name) if report else None,
                cap.get(w.name, 0.0),
                sum(n in ready for n in names),
                len(names),
                router.p99(w.name),
                c.p99(last=300) if c else None,
                c.ok if c else 0,
                c.failed if c else 0,
                c.refused if c else 0,
            )
        )
    plan = {srv.name: f"b{srv.batch} {srv.mps_percent:g}%" for _, srv in layout.servers()} if layout else {}
    instances = [
        InstanceRow(
            r.slot,
            r.instance_type,
            r.state.value,
            [
                (f"{s.name} {plan.get(s.name, 'retiring')}", s.state)
                for s in router.by_instance.get(r.instance_id or "", [])
            ],
        )
        for r in controller.store.open_records()
    ]
    cost = sum(
        p.price_per_hour
        for p in controller.policy.instance_types
        for r in controller.store.open_records()
        if r.instance_type == p.name and r.state in LIVE and r.instance_id
    )
    note = (
        f"1 request sent for every {1 / demo.cfg.send_per_planned:.0f} planned; observed/forecast/capacity "
        f"are in planned req/s"
    )
    return Frame(
        gen.elapsed(),
        demo.cfg.duration_s,
        demo.trace_clock(gen.elapsed()),
        report.tick if report else 0,
        report.decision if report else "-",
        cost,
        note,
        rows,
        instances,
        tuple(demo.recorder.events),
    )


def _coverage(samples: list[dict[str, Any]], workload: str) -> str:
    rows = [s for s in samples if s["elapsed"] > 0 and workload in s["observed"]]
    if not rows:
        return "-"
    ok = sum(s["capacity"].get(workload, 0.0) >= s["observed"][workload] for s in rows)
    return f"{ok}/{len(rows)}"


def print_summary(console: Console, demo: Any, wall_s: float, state: str, left: list[int]) -> None:
    """The closing report: requests and latency per workload, the fleet's moves, and cleanup."""
    rec: Recorder = demo.recorder
    counts = demo.gen.snapshot() if demo.gen else {}
    rows = []
    for name, (model, slo) in _workloads(demo).items():
        c = counts.get(name)
        rows.append(
            {
                "workload": name,
                "model": model,
                "SLO ms": f"{slo:g}",
                "sent": c.sent if c else 0,
                "ok": c.ok if c else 0,
                "failed": c.failed if c else 0,
                "refused": c.refused if c else 0,
                "client p99 ms": f"{c.p99():.1f}" if c and c.latencies_ms else "-",
                "server p99 ms (worst)": f"{rec.server_p99[name]:.1f}" if name in rec.server_p99 else "-",
                "ticks capacity >= rate": _coverage(rec.samples, name),
            }
        )
    console.print(summary_table(rows, "demo summary: requests"))
    for name, (_model, slo) in _workloads(demo).items():
        console.print(slo_verdict(name, slo, counts.get(name)))
    view = getattr(demo, "gateway_view", None)
    if view is not None:
        per = ", ".join(
            f"{w} {b.requests_total} requests ({b.errors_5xx} 5xx)" for w, b in sorted(view.backends.items())
        )
        console.print(f"through the gateway at {demo.url} (one URL per workload): {per}")
    replay = [s for s in rec.samples if s["elapsed"] > 0]
    inst = [s["instances"] for s in replay] or [0]
    dollars = sum(a["cost_per_hour"] * (b["elapsed"] - a["elapsed"]) / 3600.0 for a, b in itertools.pairwise(replay))
    console.print(
        f"fleet during the replay: {min(inst)} to {max(inst)} instances (${dollars:.4f} of instance time "
        f"at list price); whole demo: {rec.launches} launches, {rec.terminations} terminations, "
        f"{rec.configures} agent reconfigurations in {len(rec.samples)} ticks"
    )
    console.print(
        f"demo {state} in {wall_s:.0f} s; processes left behind: "
        + ("none" if not left else f"[red]{len(left)} ({', '.join(map(str, left))})[/red]")
    )


def slo_verdict(workload: str, slo_ms: float, counts: Any) -> str:
    """One sentence per workload: did it meet its SLO? It missed it when the clients' p99 latency
    was above the SLO or a request failed or was refused (the gateway had no server for it)."""
    if counts is None or not counts.sent:
        return f"{workload}: no request was sent, so its {slo_ms:g} ms SLO was not measured"
    p99 = counts.p99() if counts.latencies_ms else None
    misses = []
    if p99 is not None and p99 > slo_ms:
        misses.append(f"its clients' p99 latency was {p99:.1f} ms, above the SLO")
    if counts.failed or counts.refused:
        misses.append(f"{counts.failed} of {counts.sent} requests failed and {counts.refused} were refused")
    if misses:
        return f"{workload} MISSED its {slo_ms:g} ms SLO: " + "; ".join(misses)
    shown = f"p99 {p99:.1f} ms" if p99 is not None else "no latency recorded"
    return f"{workload} met its {slo_ms:g} ms SLO ({shown}, all {counts.sent} requests answered)"


def _workloads(demo: Any) -> dict[str, tuple[str, float]]:
    if demo.controller is None:
        return {}
    return {w.name: (w.model, w.slo_ms) for w in demo.controller.policy.workloads}
