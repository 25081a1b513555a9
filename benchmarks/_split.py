"""Where a replay's CPU goes, measured without a profiler: `fleet_scale_sim.py --split`.

cProfile charges every Python call, so code made of many small calls (the rollout's trials, a few
microseconds each) reads more than its share under it, and the collector's pauses outside an
explicit gc.collect read as nothing: of the 1,000-workload replay (`plan_on: tick`), a profile of
40 rows put the surge allocator at 22 % of the CPU and gc.collect at 4 %, a plain timer over 30
rows 16 % and 9 % (every pause of the collector). Here each part in PARTS is wrapped by a timer
(its own CPU time, counted once where it calls itself), and the collector's pauses are timed
through gc.callbacks. Parts nest (the plan holds the planner, the cost ceiling and the layout),
so their shares do not add up to the whole.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# (module, attribute path, label): the parts a replay tick is made of, the nested ones indented
PARTS = [
    ("autoscaler.loop.tick.controller", "Controller.observe", "observe"),
    ("autoscaler.loop.tick.controller", "Controller.forecast", "forecast"),
    ("autoscaler.loop.tick.controller", "Controller.plan", "plan"),
    ("autoscaler.sim.memo", "MemoPlanner.__call__", "  planner (hold and target plans)"),
    ("autoscaler.loop.service.wiring", "default_bound", "  cost ceiling (the scale-in wait)"),
    ("autoscaler.loop.tick.last_layout", "LastLayout.__call__", "  layout from the plan"),
    ("autoscaler.loop.state.store", "Store.save_layout", "  layout saved"),
    ("autoscaler.loop.tick.controller", "Controller._diff", "diff"),
    ("autoscaler.core.rollout.surge", "_Allocator.serve", "  surge: stand-ins for blocked moves"),
    ("autoscaler.core.rollout.surge", "_Allocator.early", "  surge: stand-ins for late servers"),
    ("autoscaler.core.rollout.bursting", "Bursting._burst", "    bursts into free share"),
    ("autoscaler.loop.tick.controller", "Controller.act", "act"),
    ("autoscaler.loop.tick.controller", "Controller.record", "record"),
    ("autoscaler.loop.state.store", "Store.save_state", "  state saved"),
    ("autoscaler.sim.engine", "Replay.record", "replay's own capacity and cost"),
]
COLLECTOR = "cyclic garbage collector"


def _timed(fn: Callable[..., Any], label: str, acc: dict[str, float]) -> Callable[..., Any]:
    depth = [0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return fn(*args, **kwargs)
        depth[0] += 1
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            acc[label] = acc.get(label, 0.0) + time.process_time() - start

    return timed


@contextlib.contextmanager
def timing(parts: Sequence[tuple[str, str, str]], acc: dict[str, float]) -> Iterator[None]:
    """Within the block, each of `parts` (module, attribute path, label) adds its CPU seconds to
    `acc` by label; put back as it was after."""
    saved = []
    for module, path, label in parts:
        owner: Any = importlib.import_module(module)
        *outer, name = path.split(".")
        for attr in outer:
            owner = getattr(owner, attr)
        fn = getattr(owner, name)
        saved.append((owner, name, fn))
        setattr(owner, name, _timed(fn, label, acc))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


@contextlib.contextmanager
def split(acc: dict[str, float]) -> Iterator[None]:
    """Within the block, each part's CPU seconds (and the collector's) are added to `acc` by label."""
    began = [0.0]

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.process_time()
        else:
            acc[COLLECTOR] = acc.get(COLLECTOR, 0.0) + time.process_time() - began[0]

    gc.callbacks.append(collector)
    try:
        with timing(PARTS, acc):
            yield
    finally:
        gc.callbacks.remove(collector)


def table(acc: dict[str, float], cpu_s: float) -> str:
    """The parts in PARTS' order, then the collector: CPU seconds and share of `cpu_s`."""
    labels = [label for _, _, label in PARTS] + [COLLECTOR]
    out = [f"{'part':40} {'cpu s':>8} {'share':>6}"]
    for label in labels:
        v = acc.get(label, 0.0)
        out.append(f"{label:40} {v:8.2f} {100 * v / max(cpu_s, 1e-9):5.1f}%")
    return "\n".join(out)
