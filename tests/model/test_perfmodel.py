"""The fitted iGniter model against the published golden values and measured co-locations."""

from __future__ import annotations

import json

import pytest

from autoscaler.config.policy import load_policy
from autoscaler.model.perfmodel import Placement, load_perf_model
from tests.conftest import DATA, PROFILES, ROOT

pytestmark = pytest.mark.unit


GOLDEN = [
    ([("vgg19", 3, 20), ("ssd", 3, 80)], [28.05, 13.65]),
    ([("vgg19", 3, 50), ("ssd", 3, 50)], [11.96, 19.31]),
    ([("alexnet", 3, 25), ("resnet50", 3, 25), ("vgg19", 3, 25), ("ssd", 3, 25)], [2.93, 10.46, 23.35, 35.16]),
]


@pytest.fixture(scope="module")
def v100():
    return load_perf_model(PROFILES / "v100.yaml")


@pytest.mark.parametrize(("placements", "expected"), GOLDEN)
def test_golden_predictions_within_half_a_percent(v100, placements, expected):
    preds = v100.predict([Placement(*p) for p in placements])
    for pred, want in zip(preds, expected):
        assert pred.latency_ms == pytest.approx(want, rel=0.005)


def test_mape_on_measured_colocations_below_5_percent(v100):
    sample = json.loads((DATA / "v100-colocation-sample.json").read_text())
    errors = []
    for pair in sample["pairs"]:
        placements = [Placement(*p) for p in zip(pair["models"], pair["batches"], pair["mps_percent"])]
        for pred, measured in zip(v100.predict(placements), pair["measured_latency_ms"]):
            errors.append(abs(pred.latency_ms - measured) / measured)
    assert len(errors) == 250
    assert sum(errors) / len(errors) < 0.05


def test_motivation_batches_and_lower_bounds(v100):
    policy = load_policy(ROOT / "tests" / "data" / "motivation-3.yaml")
    got = []
    for w in policy.workloads:
        batch = v100.batch_size(w.model, w.slo_ms, w.rate_rps)
        got.append((batch, v100.lower_bound(w.model, batch, w.slo_ms, w.rate_rps)))
    assert got == [(4, 10.0), (8, 27.5), (6, 35.0)]


def test_solo_prediction_reproduces_the_grid(v100):
    """The 5-parameter surface fits large latencies closely and small ones (batch 1) loosely."""
    prof = v100.profile
    errors = []
    for name, m in prof.models.items():
        for i, b in enumerate(prof.grid.batch_sizes):
            for j, r in enumerate(prof.grid.mps_percent):
                lat, _ = v100.solo(name, b, r)
                transfer = (
                    (m.input_bytes_per_request + m.output_bytes_per_request)
                    * b
                    / prof.hardware.pcie_bandwidth_bytes_per_ms
                )
                errors.append(abs(lat - transfer - m.gpu_latency_ms[i][j]) / m.gpu_latency_ms[i][j])
    assert max(errors) < 0.3
    assert sum(errors) / len(errors) < 0.05


def test_interference_slows_everyone_down(v100):
    alone = v100.predict([Placement("resnet50", 8, 30)])[0]
    shared = v100.predict([Placement("resnet50", 8, 30), Placement("vgg19", 6, 40), Placement("ssd", 4, 30)])[0]
    assert shared.latency_ms > alone.latency_ms
    assert shared.throughput_rps < alone.throughput_rps


def test_more_share_is_faster(v100):
    lat = [v100.solo("vgg19", 8, r)[0] for r in (10, 20, 40, 80, 100)]
    assert lat == sorted(lat, reverse=True)


def test_impossible_slo_has_no_lower_bound(v100):
    assert v100.lower_bound("ssd", 1, 1.0) is None
    assert v100.min_latency("alexnet") < v100.min_latency("ssd")


def test_models_are_cached_per_file():
    assert load_perf_model(PROFILES / "v100.yaml") is load_perf_model(PROFILES / "v100.yaml")


def test_t4_profile_fits():
    t4 = load_perf_model(PROFILES / "t4-synthetic.yaml")
    assert t4.unit == 5.0
    assert t4.min_latency("alexnet") > load_perf_model(PROFILES / "v100.yaml").min_latency("alexnet")
