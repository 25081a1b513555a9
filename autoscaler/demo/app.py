"""`make demo`: the live autoscaler on this machine, following a real trace, for about two minutes.

What runs: the real controller (`igniter run`'s, built by wiring.build_controller) with the local
provider (each instance is an `igniter-agent run --no-gpu` process that starts real KServe v2
inference servers for a tiny TorchScript model), the local transport and the fleet's gateway (a
real haproxy, on 127.0.0.1:8000 when that is free). A load generator replays one day of the
ServeGen trace, compressed into the demo's duration and scaled down to tens of requests per
second, as real HTTP requests to the gateway, one URL per workload, as a real client sends them;
the gateway spreads them over the workload's servers in the plan's proportions and drains servers
before they go. The controller's rate source is the gateway's request counter per workload, scaled
back up: every request sent stands for `1 / send_per_planned` planned ones, so the planner sizes a
fleet of real GPU types from real profiles while this 2-core machine only serves tens of requests.

It ends by itself, terminates every instance through the provider, stops the gateway, sweeps any
process left that carries the demo's temporary directory, prints a summary, and removes the
directory. SIGINT and
SIGTERM take the same path: they set a flag the demo's loops check between ticks (a
KeyboardInterrupt raised in the middle of a controller tick could land anywhere, and once went
unseen under load), and a watchdog kills everything if teardown ever hangs.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler

from autoscaler.config.policy import load_policy
from autoscaler.demo.loadgen import GatewayRates, LoadGen
from autoscaler.demo.procs import Watchdog, pids_with, sweep
from autoscaler.demo.setup import DemoConfig, port_arg, slice_trace, tiny_model, write_policy
from autoscaler.demo.stats import Recorder, Router, build_frame, print_summary
from autoscaler.demo.view import Frame, one_line, render
from autoscaler.loop.state import fit_files
from autoscaler.loop.tick.controller import Controller, TickReport
from autoscaler.rates.gateway import GatewayRates as GatewayCounter
from autoscaler.rates.reader import RateReader
from autoscaler.sim.traces import Trace

HARD_LIMIT_S = 175.0  # the watchdog: sweep everything and exit
REPLAY_END_S = 140.0  # the replay stops by then whatever happened before, leaving time to clean up
WARMUP_LIMIT_S = 45.0


class Demo:
    """Set up, warm up, replay, shut down; each step short and in order."""

    def __init__(self, cfg: DemoConfig, root: Path, console: Console) -> None:
        self.cfg, self.root, self.console = cfg, root, console
        self.trace: Trace | None = None
        self.controller: Controller | None = None
        self.gen: LoadGen | None = None
        self.router = Router(root / "instances")
        self.recorder = Recorder()
        self.report: TickReport | None = None
        self.url = ""
        self.gateway_view: Any = None
        self.stop_at = time.monotonic() + REPLAY_END_S
        self.interrupted = threading.Event()  # set by SIGINT or SIGTERM

    def check_interrupt(self) -> None:
        """Between steps: end the demo's loops the way an interrupt does."""
        if self.interrupted.is_set():
            raise KeyboardInterrupt

    def schedule(self, elapsed: float) -> dict[str, float]:
        """Real requests per second to send `elapsed` seconds into the replay."""
        assert self.trace is not None
        pos = self.trace.times[0] + 86400.0 * min(elapsed, self.cfg.duration_s) / self.cfg.duration_s
        k = max(0, int(self.trace.times.searchsorted(pos, "right")) - 1)
        factor = self.cfg.plan_scale * self.cfg.send_per_planned
        return {w: float(self.trace.rates[w][k]) * factor for w in self.trace.names}

    def trace_clock(self, elapsed: float) -> str:
        secs = 86400.0 * min(elapsed, self.cfg.duration_s) / self.cfg.duration_s
        return f"day {self.cfg.day + 1} of 14, {int(secs // 3600):02d}:{int(secs % 3600 // 60):02d}"

    def setup(self) -> None:
        from autoscaler.loop.service.wiring import build_controller

        self.trace = slice_trace(self.cfg)
        model_dir = tiny_model(self.root / "model")
        policy = load_policy(write_policy(self.root, model_dir, self.cfg, self.trace.peak()))
        self.controller = build_controller(policy, self.root / "state.sqlite")
        self.controller.deps.provider.stop_timeout_s = 5.0  # type: ignore[attr-defined]
        gateway = self.controller.deps.gateway
        assert gateway is not None
        self.url = f"http://{policy.gateway.listen}"
        self.gen = LoadGen(self.schedule, lambda workload: [self.url], seed=self.cfg.seed)
        source = GatewayRates(
            self.gen, GatewayCounter(gateway.observe), 1.0 / self.cfg.send_per_planned, self.schedule(0.0)
        )
        self.controller.deps.rates = RateReader(source, policy.rates.stale_after_s)
        self.router.start()

    def tick(self) -> TickReport:
        assert self.controller is not None
        self.report = self.controller.tick()
        self.router.refresh()
        self.recorder.tick(self.report, self.router, self.controller, self.elapsed())
        return self.report

    def elapsed(self) -> float:
        return self.gen.elapsed() if self.gen else 0.0

    def frame(self) -> Frame:
        assert self.controller is not None and self.gen is not None
        return build_frame(self, self.controller, self.gen, self.router, self.report)

    def warm_up(self, show: Any) -> bool:
        """Tick until every planned server answers ready (the replay starts on a converged fleet)."""
        deadline = time.monotonic() + WARMUP_LIMIT_S
        while (now := time.monotonic()) < deadline:
            self.check_interrupt()
            report = self.tick()
            show(self.frame())
            if report.layout and report.layout.servers() and self._serving(report.layout):
                return True
            self.interrupted.wait(max(0.0, now + 1.0 - time.monotonic()))  # a tick a second, its own time included
        return False

    def _serving(self, layout: Any) -> bool:
        """Every planned server reports ready and the gateway sends it requests."""
        assert self.controller is not None and self.controller.deps.gateway is not None
        try:
            serving = self.controller.deps.gateway.observe().serving()
        except Exception:
            return False
        return self.router.all_ready(layout) and {s.name for _, s in layout.servers()} <= serving

    def replay(self, show: Any) -> None:
        """The load runs; the controller ticks every interval; the view refreshes twice a second."""
        assert self.gen is not None
        self.gen.start()
        next_tick = 0.0
        while self.elapsed() < self.cfg.duration_s and time.monotonic() < self.stop_at:
            self.check_interrupt()
            if self.elapsed() >= next_tick:
                self.tick()
                next_tick += self.cfg.interval_s
            show(self.frame())
            self.interrupted.wait(0.5)

    def shutdown(self) -> list[int]:
        """Stop the load, terminate every instance through the provider, then sweep what is left."""
        if self.gen is not None:
            self.gen.close()
        self.router.stop()
        if self.controller is not None:
            provider = self.controller.deps.provider
            try:
                for inst in provider.list_instances():
                    provider.terminate(inst.id)
            except Exception as exc:
                self.console.print(f"[yellow]terminating through the provider failed: {exc}[/yellow]")
            self._stop_gateway()
            self.controller.store.close()
        return sweep(str(self.root))

    def _stop_gateway(self) -> None:
        """Read the gateway's counters for the summary, then stop it."""
        assert self.controller is not None
        gateway = self.controller.deps.gateway
        if gateway is None:
            return
        try:
            self.gateway_view = gateway.observe()
        except Exception:
            self.gateway_view = None
        try:
            gateway.stop()
        except Exception as exc:
            self.console.print(f"[yellow]stopping the gateway failed: {exc}[/yellow]")


def _quiet_logging(console: Console) -> None:
    """Warnings above the live view; the controller's per-tick INFO lines would scroll it away."""
    logging.basicConfig(level=logging.WARNING, handlers=[RichHandler(console=console, show_path=False)], force=True)


def run(cfg: DemoConfig, live: bool | None = None) -> int:
    """The whole demo; returns 0, 130 when interrupted, 1 when it failed or left a process behind."""
    console = Console()
    console = console if console.is_terminal else Console(width=160)
    live = console.is_terminal if live is None else live
    _quiet_logging(console)
    root = Path(tempfile.mkdtemp(prefix="igniter-demo-"))
    watchdog = Watchdog(str(root), HARD_LIMIT_S, lambda: console.print("[red]demo overran; killing it[/red]")).start()
    started = time.monotonic()
    demo = Demo(cfg, root, console)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: demo.interrupted.set())
    interrupted, warmed, failed = False, False, False
    console.print(
        f"[bold]igniter live demo[/bold]: replaying day {cfg.day + 1} of the ServeGen trace in "
        f"{cfg.duration_s:.0f} s on this machine (state in {root})"
    )
    try:
        demo.setup()
        demo.check_interrupt()
        with _screen(console, live) as show:
            warmed = demo.warm_up(show)
            demo.replay(show)
    except KeyboardInterrupt:
        interrupted = True
    except Exception:
        failed = True
        console.print_exception(max_frames=8)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        left = demo.shutdown()
        watchdog.cancel()
    after = pids_with(str(root))
    state = (
        "interrupted"
        if interrupted
        else "failed"
        if failed
        else "completed"
        if warmed
        else "completed (the fleet was not fully ready when the replay began)"
    )
    print_summary(console, demo, time.monotonic() - started, state, left or after)
    shutil.rmtree(root, ignore_errors=True)
    return 130 if interrupted else (1 if failed or left or after else 0)


class _screen:
    """A callable that shows a frame: a rich Live view on a terminal, else one line per tick."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console, self.live = console, live
        self.view: Live | None = None
        self.last_tick = -1

    def __enter__(self) -> _screen:
        if self.live:
            self.view = Live(console=self.console, refresh_per_second=4, transient=False)
            self.view.__enter__()
        return self

    def __call__(self, frame: Any) -> None:
        if self.view is not None:
            self.view.update(render(frame))
        elif frame.tick != self.last_tick:
            self.last_tick = frame.tick
            self.console.print(one_line(frame), soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self.view is not None:
            self.view.__exit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autoscaler.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=DemoConfig.duration_s, help="seconds of replay (default 110)")
    ap.add_argument("--day", type=int, default=DemoConfig.day, choices=range(14), help="trace day to replay (0-13)")
    ap.add_argument("--plain", action="store_true", help="one line per tick instead of the live view")
    ap.add_argument(
        "--port", type=port_arg, help="the gateway's port on 127.0.0.1 (default: 8000 when free, else a free one)"
    )
    args = ap.parse_args(argv)
    fit_files.keep_fits(os.environ)  # as the igniter CLI keeps them
    cfg = DemoConfig(duration_s=min(args.duration, 140.0), day=args.day, gateway_port=args.port)
    return run(cfg, live=False if args.plain else None)


if __name__ == "__main__":
    sys.exit(main())
