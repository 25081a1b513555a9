"""Reading, reshaping and converting request-rate traces; every bad file names the file and field."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.config.errors import InputError
from autoscaler.sim import traces
from tests.conftest import ROOT

pytestmark = pytest.mark.unit


def test_reads_the_servegen_example():
    t = traces.read_wide(ROOT / "traces" / "servegen-3models-wide.csv")
    assert t.names == ["m-large", "m-mid", "m-small"]
    assert len(t.times) == 2016 and t.step_s == 600.0 and t.duration_s == 14 * 86400
    assert t.peak()["m-small"] == pytest.approx(3879.508)


def test_reads_the_azure_trace_with_its_own_time_column():
    t = traces.read_wide(ROOT / "traces" / "azure-llm-2023-rps.csv", "second_since_2023-11-16T18:15:46")
    assert t.names == ["code_rps", "conv_rps"] and t.step_s == 1.0
    assert t.peak()["code_rps"] / t.mean()["code_rps"] > 20


@pytest.mark.parametrize(
    "rows, field, message",
    [
        ([["t", "a"], [0, 1]], "time_s", "missing 'time_s' column"),
        ([["time_s"], [0]], "header", "no rate columns"),
        ([["time_s", "a"]], "", "no data rows"),
        ([["time_s", "a"], [0, "x"]], "line 2, column 'a'", "'x' is not a number"),
        ([["time_s", "a"], [0, -1]], "line 2, column 'a'", "cannot be negative"),
        ([["time_s", "a"], [0, "nan"]], "line 2, column 'a'", "not a finite number"),
        ([["time_s", "a"], [0, 1], [0, 2]], "line 3", "does not increase"),
        ([["time_s", "a"], [0, 1, 2]], "line 2", "3 fields"),
        ([["time_s", "a", "a"], [0, 1, 2]], "column 'a'", "more than once"),
    ],
)
def test_bad_files_name_the_field(write_csv, rows, field, message):
    path = write_csv("bad.csv", rows)
    with pytest.raises(InputError) as exc:
        traces.read_wide(path)
    assert exc.value.field == field and message in exc.value.message
    assert str(exc.value).startswith(f"{path}: ")


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        traces.read_wide(tmp_path / "nope.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match="file is empty"):
        traces.read_wide(tmp_path / "empty.csv")


def test_resample_by_mean_and_max():
    t = traces.Trace("x", np.arange(6.0), {"a": np.array([1.0, 3, 5, 7, 9, 11])}, 1.0)
    mean, peak = traces.resample(t, 2.0, "mean"), traces.resample(t, 2.0, "max")
    assert mean.times.tolist() == [0.0, 2.0, 4.0] and mean.step_s == 2.0
    assert mean.rates["a"].tolist() == [2.0, 6.0, 10.0]
    assert peak.rates["a"].tolist() == [3.0, 7.0, 11.0]
    with pytest.raises(InputError, match="finer"):
        traces.resample(t, 0.5)


def test_resample_linear_interpolates_onto_a_finer_grid():
    t = traces.Trace("x", np.array([0.0, 600.0, 1200.0]), {"a": np.array([10.0, 70.0, 10.0])}, 600.0)
    fine = traces.resample(t, 60.0, "linear")
    assert fine.step_s == 60.0 and len(fine.times) == 21 and fine.times[-1] == 1200.0
    assert fine.rates["a"][0] == 10.0 and fine.rates["a"][10] == 70.0 and fine.rates["a"][5] == pytest.approx(40.0)
    assert fine.peak()["a"] == 70.0
    with pytest.raises(InputError, match="coarser"):
        traces.resample(t, 1200.0, "linear")


def test_rename_scale_window():
    t = traces.Trace("x", np.arange(4.0) * 10, {"a": np.ones(4), "b": np.zeros(4)}, 10.0)
    assert traces.rename(t, {"a": "z"}).names == ["z", "b"]
    with pytest.raises(InputError, match="no such column"):
        traces.rename(t, {"q": "z"})
    with pytest.raises(InputError, match="same name"):
        traces.rename(t, {"a": "b"})
    assert traces.scale(t, 3.0).rates["a"].tolist() == [3.0] * 4
    assert traces.window(t, 10, 30).times.tolist() == [10.0, 20.0]


def test_check_workloads_both_ways():
    t = traces.Trace("tr.csv", np.arange(2.0), {"a": np.ones(2), "x": np.ones(2)}, 1.0)
    with pytest.raises(InputError) as exc:
        traces.check_workloads(t, ["a", "x", "b"], "p.yaml")
    assert exc.value.field == "column 'b'" and "missing" in exc.value.message
    with pytest.raises(InputError) as exc:
        traces.check_workloads(t, ["a"], "p.yaml")
    assert exc.value.field == "column 'x'" and "not a workload of p.yaml" in exc.value.message


def test_long_to_wide_fills_gaps_and_sums_duplicates(write_csv, tmp_path):
    path = write_csv("long.csv", [["t", "model", "rps"], [0, "a", 1], [0, "b", 2], [60, "a", 3], [60, "a", 4]])
    conv = traces.long_to_wide(path, traces.LongColumns("t", "model", "rps"))
    assert conv.trace.names == ["a", "b"] and conv.trace.times.tolist() == [0.0, 60.0]
    assert conv.trace.rates["a"].tolist() == [1.0, 7.0] and conv.trace.rates["b"].tolist() == [2.0, 0.0]
    assert (conv.filled, conv.summed) == (1, 1)
    out = tmp_path / "wide.csv"
    traces.write_wide(conv.trace, out)
    back = traces.read_wide(out)
    assert back.names == ["a", "b"] and back.rates["a"].tolist() == [1.0, 7.0]
    with pytest.raises(InputError, match="missing column 'time_s'"):
        traces.long_to_wide(path)
    with pytest.raises(InputError, match="not in column"):
        traces.long_to_wide(path, traces.LongColumns("t", "model", "rps"), ["c"])


def test_the_long_servegen_file_converts_to_the_wide_one():
    conv = traces.long_to_wide(
        ROOT / "traces" / "servegen-llm-rates-10min.csv",
        traces.LongColumns("window_start_s", "model", "agg_rate_rps"),
        ["m-large", "m-mid", "m-small"],
    )
    wide = traces.read_wide(ROOT / "traces" / "servegen-3models-wide.csv")
    assert np.array_equal(conv.trace.times, wide.times)
    for name in wide.names:
        assert np.allclose(conv.trace.rates[name], wide.rates[name], atol=1e-3)
