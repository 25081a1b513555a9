"""Predictions per second for sets of 1, 2 and 5 co-located workloads (median of 5 runs).

Run: .venv/bin/python benchmarks/predict_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _results import Results

from autoscaler.model.perfmodel import Placement, load_perf_model

SETS = {
    1: [("resnet50", 8, 30.0)],
    2: [("vgg19", 3, 50.0), ("ssd", 3, 50.0)],
    5: [("alexnet", 4, 10.0), ("resnet50", 8, 30.0), ("vgg19", 6, 37.5), ("ssd", 3, 15.0), ("alexnet", 2, 7.5)],
}


def rate(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - start)


def main() -> None:
    model = load_perf_model(Path(__file__).resolve().parent.parent / "policies" / "profiles" / "v100.yaml")
    res = Results("predict_speed", "python benchmarks/predict_speed.py")
    print(f"machine: {res.doc['machine']}")
    print(f"{'co-located':>10} {'predict_raw/s':>14} {'predict/s':>12}")
    for size, items in SETS.items():
        objs = [Placement(*p) for p in items]
        raw = statistics.median(rate(lambda items=items: model.predict_raw(items), 20000) for _ in range(5))
        typed = statistics.median(rate(lambda objs=objs: model.predict(objs), 20000) for _ in range(5))
        print(f"{size:>10} {raw:>14,.0f} {typed:>12,.0f}")
        res.figure(f"predict_us_{size}", 1e6 / typed)
        res.figure(f"predict_raw_us_{size}", 1e6 / raw)
    res.write()


if __name__ == "__main__":
    main()
