"""`make demo-mig`: a MIG re-cut under live load on this machine, in the order the controller keeps.

What runs: the real controller (`igniter run`'s, built by wiring.build_controller) with the local
provider, whose agents cut fake MIG slices of an A100 80GB (`igniter-agent run --no-gpu --fake-mig
a100-80gb`, the flags the provider gives a MIG GPU type) and run real KServe v2 servers of a tiny
TorchScript model in them, on the CPU; the local transport; a real HAProxy gateway; a load
generator sending real requests through it. The plan is scripted (the real planner would size the
fleet for real A100s): workload `a` (resnet50's measured rows) and `b` (mobilenetv2's) share one
GPU cut 3g.40gb@0 + 3g.40gb@4, every memory unit in use. When a's traffic rises past what its 3g
slice serves, the plan gives it a 4g.40gb@0: a re-cut with no free unit. The controller then does
what core/rollout decides: a stand-in 4g slice for `a` on a surge instance, the old slice drained
through the gateway once that serves, the agent destroying it only after its server exited, the
planned 4g slice cut in its place, the stand-in and the surge instance retired. The demo counts
every request: the verdict is 0 failed and 0 refused.

The A100 tables are third-party data: imported from ../shared into the demo's temporary directory
(`igniter profile import`), never into the repository. Exit 0 when the re-cut completed with no
failed or refused request and no process was left behind; 1 otherwise; 2 without ../shared.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from autoscaler.config.policy import Policy, load_policy
from autoscaler.config.tables import import_tables
from autoscaler.demo.loadgen import LoadGen, OfferedRates
from autoscaler.demo.procs import Watchdog, pids_with, sweep
from autoscaler.demo.setup import REPO, local_fleet, port_arg, tiny_model
from autoscaler.loop.tick.controller import Controller, TickReport
from autoscaler.model.mig import MigModel, load_gpu_model
from autoscaler.planner.types import GpuOut, InstanceOut, PlacementOut, Plan
from autoscaler.rates.reader import RateReader

TABLES = REPO.parent / "shared" / "profiles" / "a100-80gb-mig"
GPU, TYPE, PRICE = "a100-80gb", "a100-1", 5.07
WORKLOADS = {"a": ("resnet50", 200.0, 0), "b": ("mobilenetv2", 150.0, 4)}  # model, SLO ms, start of its 3g slice
SEND_PER_PLANNED = 0.04  # real requests per planned one
WINDOW_S = 4.0  # the controller's rate: the offered rate over this long (see MigDemo.setup)
TICK_S = 0.5  # the demo's tick: its own loop ticks the controller this often
RISE_AFTER_S = 1.5  # a's load rises this long after the load starts on the first cut
RISE = 1.05  # a's rate after the rise, x what its 3g slice serves (its 4g slice serves 1.16 x)
HARD_LIMIT_S = 240.0
WARMUP_LIMIT_S = 90.0
RECUT_LIMIT_S = 120.0


@dataclass
class Rows:
    """The measured rows the scripted plan uses: (slice, batch, latency, throughput) per (workload, slice)."""

    rows: dict[tuple[str, str], tuple[int, float, float]] = field(default_factory=dict)

    def cap(self, workload: str, slice_name: str) -> float:
        return self.rows[(workload, slice_name)][2]


def measured_rows(model: MigModel) -> Rows:
    """Per workload and slice, its best one-process row within budget (one server process per
    slice keeps the demo light on 2 cores)."""
    out = Rows()
    for w, (m, slo, _) in WORKLOADS.items():
        for s in ("3g.40gb", "4g.40gb"):
            rows = [r for r in model.profile.models[m] if r.slice == s and r.processes == 1 and model.usable(r, slo)]
            best = max(rows, key=lambda r: r.throughput_rps)
            out.rows[(w, s)] = (best.batch, best.latency_ms, best.slice_throughput_rps)
    return out


def scripted(rows: Rows) -> Any:
    """The plan: one GPU, a and b in 3g slices; a in a 4g slice at 0 once its rate needs more.
    Each server is planned for at most what its slice serves: this plan never adds a second server,
    so a read above that is the rate's noise, not demand. The layout's rates still keep the highest
    read (a layout of the same cost is never "cheaper"), past the 4g's 1.16 x at times: the
    rollout's floor is at most what a growing workload's plan carries (core/rollout/rollout.py),
    so the re-cut completes whatever the reads (before that cap, 3 runs of 11 stalled for good)."""

    grown = {"a": False}  # once a's slice grew it stays grown: one re-cut, whatever the rate noise

    def plan(policy: Policy, rates: Any, corrections: Any, caps: Any, current: Any) -> Plan:
        grown["a"] = big = grown["a"] or rates.get("a", 0.0) > rows.cap("a", "3g.40gb")
        places = []
        for w, (m, _, start) in WORKLOADS.items():
            s = "4g.40gb" if w == "a" and big else "3g.40gb"
            batch, lat, thr = rows.rows[(w, s)]
            pct = 100.0 * int(s[0]) / 7
            rate = min(rates.get(w, 0.0), thr)
            places.append(PlacementOut(w, m, batch, pct, rate, lat, thr, mig_profile=s, mig_start=start))
        return Plan("scripted", (InstanceOut(TYPE, PRICE, (GpuOut(0, GPU, tuple(places)),)),))

    return plan


def write_policy(root: Path, model_dir: Path, rows: Rows, port: int | None = None) -> Path:
    data = {
        "fleet": f"demo-mig-{root.name[-8:].lower().replace('_', '-')}",
        "profiles_dir": str(root / "profiles"),
        "instance_types": [{"name": TYPE, "gpu": GPU, "gpus": 1, "price_per_hour": PRICE, "max_instances": 3}],
        "workloads": [
            {
                "name": w,
                "model": m,
                "slo_ms": slo,
                "rate_rps": round(0.5 * rows.cap(w, "3g.40gb"), 1),
                "model_dir": str(model_dir),
            }
            for w, (m, slo, _) in WORKLOADS.items()
        ],
        **local_fleet(root, port),
        "scaling": {
            "interval_s": TICK_S,
            "boot_s": 1.0,
            "settle_s": TICK_S,
            "headroom": 0.0,
            "scale_down_delay_s": 12.0,
            "forecast": "last",
        },
    }
    path = root / "demo-policy.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


class MigDemo:
    """Set up, warm up on the first cut, raise a's load until the GPU is re-cut, shut down."""

    def __init__(self, root: Path, console: Console, port: int | None = None) -> None:
        self.port = port  # the gateway's (setup.local_fleet)
        self.root, self.console = root, console
        self.controller: Controller | None = None
        self.gen: LoadGen | None = None
        self.rows = Rows()
        self.raise_at: float | None = None  # elapsed load seconds when a's rate rises
        self.events: list[str] = []
        self.surge_seen: set[str] = set()
        self.stand_ins_seen: set[str] = set()

    def setup(self) -> None:
        from autoscaler.loop.service.wiring import build_controller

        out = self.root / "profiles" / f"{GPU}.yaml"
        out.parent.mkdir()
        pool = ThreadPoolExecutor(1)  # the tiny model (torch's import) beside the profile's import
        model_dir = pool.submit(tiny_model, self.root / "model")
        pool.shutdown(wait=False)
        tables = {str(p): p.read_text(encoding="utf-8") for p in sorted(TABLES.glob("*.csv"))}
        profile = import_tables(tables, gpu=GPU, source=str(TABLES))  # what `igniter profile import` writes
        out.write_text(yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        model = load_gpu_model(out)
        assert isinstance(model, MigModel)
        self.rows = measured_rows(model)
        policy = load_policy(write_policy(self.root, model_dir.result(), self.rows, self.port))
        self.controller = build_controller(policy, self.root / "state.sqlite")
        self.controller.deps.provider.stop_timeout_s = 5.0  # type: ignore[attr-defined]
        self.controller.deps.planner = scripted(self.rows)
        url = f"http://{policy.gateway.listen}"
        self.gen = LoadGen(self.schedule, lambda workload: [url], seed=1)
        # The offered rate over WINDOW_S (a load balancer's request count), counted once the load
        # has run for RISE_AFTER_S (a count over a moment is mostly noise). After the rise a sends
        # about 56 req/s, 223 requests a window: a relative deviation of 1/sqrt(223) = 6.7 %. The
        # read that grows a's slice crosses 1.0 x the 3g as the window fills with the risen rate;
        # later reads past the 4g's 1.16 x are noise the plan does not follow (see `scripted`).
        source = OfferedRates(self.gen, WINDOW_S, 1.0 / SEND_PER_PLANNED, self.schedule(0.0), min_span_s=RISE_AFTER_S)
        self.controller.deps.rates = RateReader(source, policy.rates.stale_after_s)

    def schedule(self, elapsed: float) -> dict[str, float]:
        """Real req/s: a at 60 % of its 3g slice, then RISE x (more than the slice serves), b at 50 %."""
        rise = self.raise_at is not None and elapsed >= self.raise_at
        a = (RISE if rise else 0.6) * self.rows.cap("a", "3g.40gb") if self.rows.rows else 0.0
        b = 0.5 * self.rows.cap("b", "3g.40gb") if self.rows.rows else 0.0
        return {"a": a * SEND_PER_PLANNED, "b": b * SEND_PER_PLANNED}

    def tick(self) -> TickReport:
        assert self.controller is not None
        report = self.controller.tick()
        cut = self.cut(report)
        new_surge = set(report.surge_slots) - self.surge_seen
        self.surge_seen |= set(report.surge_slots)
        line = f"tick {report.tick:>3}  cut {cut or '-'}  surge {', '.join(report.surge_slots) or '-'}"
        line += f"  draining {', '.join(report.draining) or '-'}" + ("  converged" if report.converged else "")
        self.console.print(line, soft_wrap=True, markup=False)
        for n in report.notes:
            self.console.print(f"      {n}", soft_wrap=True, markup=False)
        for slot, err in report.agent_errors.items():
            self.console.print(f"      agent {slot}: {err}", soft_wrap=True, markup=False)
        if new_surge:
            self.events.append(f"surge instance(s) {', '.join(sorted(new_surge))} launched for the re-cut")
        return report

    def cut(self, report: TickReport) -> str:
        """The slices the agents were last told to hold, per slot (stand-ins marked *)."""
        assert self.controller is not None
        parts = []
        for (slot, _), (_, servers) in sorted(self.controller.store.applied().items()):
            slices = [f"{s.name}{'*' if '-s' in s.name[2:] else ''}:{s.mig_profile}@{s.mig_start}" for s in servers]
            for s in servers:
                if "-s" in s.name[2:]:
                    self.stand_ins_seen.add(s.name)
            if slices:
                parts.append(f"{slot.split('-')[-1]}[{' '.join(slices)}]")
        return " ".join(parts)

    def run(self) -> bool:
        """Warm up on the first cut, raise a's load, tick until the re-cut is done; True if it is."""
        assert self.gen is not None
        if not self._until(lambda r: r.converged and self._a_on("3g.40gb"), WARMUP_LIMIT_S, start_load=True):
            self.console.print("[red]the first cut did not come up in time[/red]")
            return False
        self.raise_at = max(self.gen.elapsed(), RISE_AFTER_S)
        self.console.print(
            f"[bold]a's load rises past its 3g slice ({self.rows.cap('a', '3g.40gb'):.0f} req/s planned)[/bold]"
        )
        done = self._until(lambda r: r.converged and self._a_on("4g.40gb") and not r.surge_slots, RECUT_LIMIT_S)
        time.sleep(0.5)  # a moment more of load on the new cut
        return done

    def _until(self, cond: Any, limit_s: float, start_load: bool = False) -> bool:
        assert self.gen is not None
        deadline = time.monotonic() + limit_s
        while (now := time.monotonic()) < deadline:
            report = self.tick()
            if start_load and not self.gen.started and report.converged:
                self.gen.start()
            if self.gen.started and cond(report):
                return True
            time.sleep(max(0.0, now + TICK_S - time.monotonic()))  # a tick every TICK_S, its own time included
        return False

    def _a_on(self, profile: str) -> bool:
        assert self.controller is not None
        return any(
            s.workload == "a" and s.mig_profile == profile and "-s" not in s.name[2:]
            for _, (_, servers) in self.controller.store.applied().items()
            for s in servers
        )

    def shutdown(self) -> list[int]:
        if self.gen is not None:
            self.gen.close()
        if self.controller is not None:
            provider = self.controller.deps.provider
            with contextlib.suppress(Exception):
                for inst in provider.list_instances():
                    provider.terminate(inst.id)
            gateway = self.controller.deps.gateway
            if gateway is not None:
                with contextlib.suppress(Exception):
                    gateway.stop()
            self.controller.store.close()
        return sweep(str(self.root))

    def summary(self) -> tuple[int, int, int]:
        """Per workload: sent, ok, failed, refused; returns (sent, failed, refused) over all."""
        counts = self.gen.snapshot() if self.gen is not None else {}
        for w, c in sorted(counts.items()):
            self.console.print(f"  {w}: {c.sent} sent, {c.ok} ok, {c.failed} failed, {c.refused} refused")
        return (
            sum(c.sent for c in counts.values()),
            sum(c.failed for c in counts.values()),
            sum(c.refused for c in counts.values()),
        )


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autoscaler.demo.mig", description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the state directory (agent logs) afterwards")
    ap.add_argument("--verbose", action="store_true", help="the controller's log lines too")
    ap.add_argument(
        "--port", type=port_arg, help="the gateway's port on 127.0.0.1 (default: 8000 when free, else a free one)"
    )
    args = ap.parse_args(argv)
    console = Console(width=200)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, force=True)
    if not TABLES.is_dir():
        print(f"{TABLES}: ParvaGPU's A100 tables are not there (../shared beside the clone)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="igniter-demo-mig-"))
    watchdog = Watchdog(str(root), HARD_LIMIT_S, lambda: console.print("[red]demo overran; killing it[/red]")).start()
    signal.signal(signal.SIGTERM, _interrupt)
    demo = MigDemo(root, console, args.port)
    done, failed = False, False
    console.print(f"[bold]igniter MIG re-cut demo[/bold] (state in {root})")
    try:
        demo.setup()
        done = demo.run()
    except KeyboardInterrupt:
        failed = True
    except Exception:
        failed = True
        console.print_exception(max_frames=8)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        left = demo.shutdown()
        watchdog.cancel()
    after = pids_with(str(root))
    sent, bad, refused = demo.summary()
    console.print(
        f"re-cut {'completed' if done else 'NOT completed'}; stand-ins {', '.join(sorted(demo.stand_ins_seen)) or 'none'}"
    )
    for e in demo.events:
        console.print(f"  {e}")
    console.print(f"requests: {sent} sent, {bad} failed, {refused} refused; processes left: {len(left or after)}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if done and not failed and not bad and not refused and not (left or after) and sent else 1


if __name__ == "__main__":
    sys.exit(main())
