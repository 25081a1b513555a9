"""`igniter predict`: tables, JSON, and JSON-lines batches, per the contract."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PROFILES, run_cli

V100 = PROFILES / "v100.yaml"


@pytest.mark.unit
def test_place_json_matches_the_golden_values(igniter):
    res = igniter("predict", "--profile", V100, "--place", "vgg19:3:20", "--place", "ssd:3:80", "--json")
    assert res.code == 0, res.err
    preds = json.loads(res.out)["predictions"]
    assert [p["latency_ms"] for p in preds] == [pytest.approx(28.05, rel=0.005), pytest.approx(13.65, rel=0.005)]
    assert all(p["throughput_rps"] > 0 for p in preds)


@pytest.mark.unit
def test_table_by_default(igniter):
    res = igniter("predict", "--profile", V100, "--place", "alexnet:4:10")
    assert res.code == 0 and "alexnet" in res.out and "latency" in res.out


@pytest.mark.e2e
def test_batch_file_answers_each_line_in_order(tmp_path):
    lines = [
        {"placements": [{"model": "alexnet", "batch": 2, "mps_percent": 50}]},
        {
            "placements": [
                {"model": "vgg19", "batch": 3, "mps_percent": 50},
                {"model": "ssd", "batch": 3, "mps_percent": 50},
            ]
        },
        {"placements": [{"model": "alexnet", "batch": 2, "mps_percent": 50}]},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    res = run_cli("predict", "--profile", V100, "--batch-file", path, "--json")
    assert res.code == 0, res.err
    out = [json.loads(x) for x in res.out.splitlines()]
    assert [len(o["predictions"]) for o in out] == [1, 2, 1]
    assert out[0] == out[2]
    assert out[1]["predictions"][1]["latency_ms"] == pytest.approx(19.31, rel=0.005)


@pytest.mark.e2e
def test_batch_file_from_stdin():
    line = json.dumps({"placements": [{"model": "resnet50", "batch": 8, "mps_percent": 30}]})
    res = run_cli("predict", "--profile", V100, "--batch-file", "-", "--json", stdin=line + "\n")
    assert res.code == 0 and len(res.out.splitlines()) == 1


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--place", "alexnet:0:10"], "--place[0].batch"),
        (["--place", "alexnet:4:150"], "--place[0].mps_percent"),
        (["--place", "alexnet:4"], "--place[0]"),
        (["--place", "alexnet:4:10", "--place", "bert:1:10"], "--place[1]"),
    ],
)
def test_bad_places_exit_2(igniter, args, field):
    res = igniter("predict", "--profile", V100, *args)
    assert res.code == 2 and field in res.err and "Traceback" not in res.err


@pytest.mark.unit
def test_bad_batch_line_names_line_and_field_and_prints_nothing(igniter, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"placements": [{"model": "alexnet", "batch": 2, "mps_percent": 50}]}\n'
        '{"placements": [{"model": "alexnet", "batch": -2, "mps_percent": 50}]}\n'
    )
    res = igniter("predict", "--profile", V100, "--batch-file", path, "--json")
    assert res.code == 2 and "line 2: placements[0].batch" in res.err and res.out == ""


@pytest.mark.unit
def test_bad_json_line(igniter, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("{not json\n")
    res = igniter("predict", "--profile", V100, "--batch-file", path)
    assert res.code == 2 and "line 1" in res.err


@pytest.mark.unit
def test_missing_profile(igniter, tmp_path):
    res = igniter("predict", "--profile", tmp_path / "x.yaml", "--place", "alexnet:1:10")
    assert res.code == 2 and "file not found" in res.err
