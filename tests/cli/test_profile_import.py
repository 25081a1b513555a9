"""`igniter profile import`: ParvaGPU's CSV tables -> a measured profile; bad tables exit 2, FILE:LINE."""

from __future__ import annotations

import shutil

import pytest

from autoscaler.config.measured import MeasuredProfile
from autoscaler.config.profile import load_any_profile
from tests.kit.mig import TABLES, needs_shared

pytestmark = [pytest.mark.unit, needs_shared]

HEADER = "Mig instance,Batch size,Workload Number,Throughput,Latency\n"
GOOD = "1,1,1,196.762,0.005\n1,2,1,274.088,0.007\n3,8,2,500.0,0.02\n1,16,5,0,0\n"


def _folder(tmp_path, **tables: str):
    d = tmp_path / "tables"
    d.mkdir()
    for name, text in tables.items():
        (d / f"{name}.csv").write_text(text)
    return d


def test_the_public_tables_import_with_their_source(igniter, tmp_path):
    out = tmp_path / "profiles" / "a100-80gb.yaml"
    res = igniter("profile", "import", TABLES, "--gpu", "a100-80gb", "--out", out)
    assert res.code == 0, res.err
    profile = load_any_profile(out)
    assert isinstance(profile, MeasuredProfile)
    assert len(profile.models) == 11 and profile.source.path == str(TABLES)
    assert "resnet50.csv" in profile.source.files
    row = profile.models["resnet50"][0]
    assert (row.slice, row.batch, row.processes) == ("1g.10gb", 1, 1) and row.latency_ms == pytest.approx(5.0)
    assert not any(r.throughput_rps == 0 for rows in profile.models.values() for r in rows)  # zero rows skipped


def test_a_good_small_table_imports(igniter, tmp_path):
    d = _folder(tmp_path, tiny=HEADER + GOOD)
    res = igniter("profile", "import", d, "--gpu", "h100-80gb", "--out", tmp_path / "h.yaml")
    assert res.code == 0, res.err
    rows = load_any_profile(tmp_path / "h.yaml").models["tiny"]
    assert [(r.slice, r.processes) for r in rows] == [("1g.10gb", 1), ("1g.10gb", 1), ("3g.40gb", 2)]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("Mig instance,Batch size,Throughput,Latency\n1,1,196.7,0.005\n", 1, "missing column 'Workload Number'"),
        (HEADER + GOOD + "2,4,1,-3.5,0.01\n", 6, "finite number >= 0"),
        (HEADER + "1,1,1,nan,0.005\n", 2, "finite number >= 0"),
        (HEADER + "1,1,1,inf,0.005\n", 2, "finite number >= 0"),
        (HEADER + GOOD + "5,1,1,100.0,0.005\n", 6, "no 5g slice"),
        (HEADER + "1,16,5,0,0\n1,32,5,0,0\n", 3, "no usable row"),
        (HEADER + "1,1,1,abc,0.005\n", 2, "must be a number"),
    ],
    ids=["missing-column", "negative", "nan", "inf", "no-such-slice", "no-usable-row", "not-a-number"],
)
def test_bad_tables_exit_2_naming_file_and_line_and_write_nothing(igniter, tmp_path, text, line, words):
    d = _folder(tmp_path, good=HEADER + GOOD, bad=text)
    out = tmp_path / "out" / "p.yaml"
    res = igniter("profile", "import", d, "--gpu", "a100-80gb", "--out", out)
    assert res.code == 2
    assert f"{d / 'bad.csv'}:{line}: " in res.err and words in res.err, res.err
    assert "Traceback" not in res.err and len(res.err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "out").exists()


def test_an_unknown_gpu_exits_2(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    res = igniter("profile", "import", d, "--gpu", "a100-96gb", "--out", tmp_path / "p.yaml")
    assert res.code == 2 and "unknown GPU 'a100-96gb'" in res.err
    assert not (tmp_path / "p.yaml").exists()


def test_the_real_tables_copied_then_broken_name_the_line(igniter, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(TABLES, d)
    lines = (d / "vgg16.csv").read_text().splitlines()
    lines[10] = "1,1,1,-1,0.005"
    (d / "vgg16.csv").write_text("\n".join(lines) + "\n")
    res = igniter("profile", "import", d, "--gpu", "a100-80gb", "--out", tmp_path / "p.yaml")
    assert res.code == 2 and f"{d / 'vgg16.csv'}:11: " in res.err
