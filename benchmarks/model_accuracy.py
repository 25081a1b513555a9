"""How close the fitted performance model is to what was measured (README.md quotes it).

The V100 profile (policies/profiles/v100.yaml) against the published golden predictions
(tests/model/test_perfmodel.py's GOLDEN: the iGniter prototype's own outputs for three
co-locations) and against the measured co-located latencies in
tests/data/v100-colocation-sample.json (mean absolute percentage error over every latency), and
the paper's motivation example (tests/data/motivation-3.yaml: each workload's batch and lower-bound
GPU share). The tests assert the bounds (0.5 %, 5 %) and the example's values; this writes the
figures to benchmarks/results/model_accuracy.json.
A second or so.

    .venv/bin/python benchmarks/model_accuracy.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from _results import Results  # noqa: E402

from autoscaler.config.policy import load_policy  # noqa: E402
from autoscaler.model.perfmodel import Placement, load_perf_model  # noqa: E402
from tests.model.test_perfmodel import GOLDEN  # noqa: E402

MODEL = ROOT / "policies" / "profiles" / "v100.yaml"
SAMPLE = ROOT / "tests" / "data" / "v100-colocation-sample.json"


def main() -> None:
    out = Results("model_accuracy", "python benchmarks/model_accuracy.py")
    v100 = load_perf_model(MODEL)
    golden = [
        abs(pred.latency_ms - want) / want
        for placements, expected in GOLDEN
        for pred, want in zip(v100.predict([Placement(*p) for p in placements]), expected, strict=True)
    ]
    errors = []
    for pair in json.loads(SAMPLE.read_text())["pairs"]:
        placements = [Placement(*p) for p in zip(pair["models"], pair["batches"], pair["mps_percent"], strict=True)]
        for pred, measured in zip(v100.predict(placements), pair["measured_latency_ms"], strict=True):
            errors.append(abs(pred.latency_ms - measured) / measured)
    out.figure("golden_max_error_pct", max(golden) * 100)
    out.figure("golden_values", len(golden))
    out.figure("measured_latencies", len(errors))
    out.figure("measured_mape_pct", sum(errors) / len(errors) * 100)
    motivation = load_policy(ROOT / "tests" / "data" / "motivation-3.yaml")
    for k, w in enumerate(motivation.workloads, 1):
        batch = out.figure(f"motivation_batch_{k}", v100.batch_size(w.model, w.slo_ms, w.rate_rps))
        out.figure(f"motivation_lower_bound_pct_{k}", v100.lower_bound(w.model, batch, w.slo_ms, w.rate_rps))
    print(json.dumps(out.doc["figures"], indent=1))
    out.write()


if __name__ == "__main__":
    main()
