"""`igniter profile import` on the bad tables of issue 51: what is not a regular file, not UTF-8,
past a cap or a ceiling, measured twice or unnamed ends in exit 2 with ONE line `FILE[:LINE]: what
is wrong`, quickly, and writes nothing; a BOM is read; a table at the caps imports in seconds."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autoscaler.config.limits import MAX_PROFILE_MS, MAX_PROFILE_NUMBER
from autoscaler.config.profile import load_any_profile
from autoscaler.config.tables import MAX_PROFILE_ROWS, MAX_TABLE_BYTES, MAX_TABLE_ROWS
from tests.conftest import run_cli
from tests.kit.mig import TABLES, needs_shared

pytestmark = pytest.mark.unit

HEADER = "Mig instance,Batch size,Workload Number,Throughput,Latency\n"
GOOD = "1,1,1,196.762,0.005\n1,2,1,274.088,0.007\n3,8,2,500.0,0.02\n1,16,5,0,0\n"


def _folder(tmp_path: Path, **tables: str | bytes) -> Path:
    d = tmp_path / "tables"
    d.mkdir()
    for name, data in tables.items():
        path = d / f"{name}.csv"
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return d


def _refused(res, where: str, words: str, out: Path) -> None:
    """Exit 2, one line at the right place naming what is wrong, no traceback, nothing written."""
    assert res.code == 2, (res.code, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err, res.err
    assert lines[0].removeprefix("error: ").startswith(f"{where}: ") and words in lines[0], res.err
    assert not out.exists() and not out.parent.exists()


def _run(igniter, d: Path, out: Path):
    return igniter("profile", "import", d, "--gpu", "a100-80gb", "--out", out)


# -- not a regular file, or not readable -----------------------------------------------------------
def test_a_dangling_symlink_is_refused(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    (d / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / "gone.csv"), "which does not exist", out)


def test_a_self_looping_symlink_is_refused(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    (d / "loop.csv").symlink_to(d / "loop.csv")
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / "loop.csv"), "cannot read: Too many levels of symbolic links", out)


def test_a_directory_named_csv_is_refused(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    (d / "dir.csv").mkdir()
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / "dir.csv"), "not a regular file (a directory)", out)


@pytest.mark.e2e
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    os.mkfifo(d / "zz.csv")
    out = tmp_path / "out" / "p.yaml"
    started = time.monotonic()
    res = run_cli("profile", "import", str(d), "--gpu", "a100-80gb", "--out", str(out), timeout=60)
    assert time.monotonic() - started < 30
    _refused(res, str(d / "zz.csv"), "not a regular file (a FIFO)", out)


def test_a_symlink_to_dev_zero_is_refused_at_once(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    (d / "zero.csv").symlink_to("/dev/zero")
    out = tmp_path / "out" / "p.yaml"
    started = time.monotonic()
    res = _run(igniter, d, out)
    assert time.monotonic() - started < 5
    _refused(res, str(d / "zero.csv"), "not a regular file (a character device)", out)


def test_an_unreadable_file_is_refused(igniter, tmp_path):
    """A regular file whose read fails: /proc/self/mem (EIO at offset 0, even for root), and a
    mode-000 file where the tests do not run as root."""
    d = _folder(tmp_path, good=HEADER + GOOD)
    (d / "mem.csv").symlink_to("/proc/self/mem")
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / "mem.csv"), "cannot read: Input/output error", out)
    if os.geteuid() != 0:
        (d / "mem.csv").unlink()
        (d / "secret.csv").write_text(HEADER + GOOD)
        (d / "secret.csv").chmod(0)
        _refused(_run(igniter, d, out), str(d / "secret.csv"), "cannot read: Permission denied", out)


# -- not text, not CSV, past a cap -----------------------------------------------------------------
def test_a_byte_that_is_not_utf8_names_its_line(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD, bad=HEADER.encode() + b"1,1,1,196.7,0.005\n1,2,1,27\xff,0.007\n")
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), f"{d / 'bad.csv'}:3", "not UTF-8 text (byte 0xff at offset", out)


def test_a_field_past_csvs_limit_is_refused(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD, bad=HEADER + GOOD + '1,4,1,"' + "9" * 140_000 + '",0.01\n')
    out = tmp_path / "out" / "p.yaml"
    res = _run(igniter, d, out)
    _refused(res, f"{d / 'bad.csv'}:6", "not a CSV table: field larger than field limit (131072)", out)
    assert len(res.err) < 300


def test_a_table_past_the_size_cap_is_refused_before_it_is_read_whole(igniter, tmp_path):
    big = HEADER + GOOD + "#" * (MAX_TABLE_BYTES + 1)
    d = _folder(tmp_path, good=HEADER + GOOD, big=big)
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / "big.csv"), f"more than the {MAX_TABLE_BYTES:,} a table may have", out)


def _rows(n: int, slice_: int = 1) -> str:
    return "".join(f"{slice_},{b // 50 + 1},{b % 50 + 1},100.0,0.01\n" for b in range(n))


def test_a_table_past_the_row_cap_is_refused_at_the_first_row_past_it(igniter, tmp_path):
    d = _folder(tmp_path, big=HEADER + _rows(MAX_TABLE_ROWS + 1))
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), f"{d / 'big.csv'}:{MAX_TABLE_ROWS + 2}", f"more than {MAX_TABLE_ROWS:,} rows", out)


def test_tables_past_the_cap_on_rows_in_all_are_refused(igniter, tmp_path):
    n = MAX_PROFILE_ROWS // MAX_TABLE_ROWS + 1
    d = _folder(tmp_path, **{f"m{i}": HEADER + _rows(MAX_TABLE_ROWS) for i in range(n)})
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / f"m{n - 1}.csv"), f"more than {MAX_PROFILE_ROWS:,} usable rows", out)


@pytest.mark.slow
def test_a_table_at_the_row_cap_imports_in_seconds(igniter, tmp_path):
    d = _folder(tmp_path, big=HEADER + _rows(MAX_TABLE_ROWS))
    out = tmp_path / "p.yaml"
    started = time.process_time()
    res = _run(igniter, d, out)
    assert res.code == 0, res.err
    assert time.process_time() - started < 10  # measured: about 2 s of CPU
    assert len(load_any_profile(out).models["big"]) == MAX_TABLE_ROWS


# -- past the ceilings `igniter plan` applies ------------------------------------------------------
@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("1,64,1,196.7,1e308", "Latency 1e+308 s is above the ceiling 3600 s"),
        ("1,1e308,1,196.7,0.005", "Batch size 1e+308 is above the ceiling 1e+12"),
        ("1,1,1e20,196.7,0.005", "Workload Number 1e+20 is above the ceiling 1e+12"),
        ("1,64,1,1e308,0.005", "Throughput 1e+308 is above the ceiling 1e+12"),
    ],
    ids=["latency", "batch", "workload-number", "throughput"],
)
def test_numbers_past_the_planners_ceilings_are_refused(igniter, tmp_path, row, words):
    d = _folder(tmp_path, good=HEADER + GOOD, bad=HEADER + GOOD + row + "\n")
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), f"{d / 'bad.csv'}:6", words, out)


def test_numbers_at_the_ceilings_import_and_the_planner_loads_them(igniter, tmp_path):
    """The same ceilings, not new ones: a row exactly at them passes both the import and the load."""
    n, s = f"{MAX_PROFILE_NUMBER:.0f}", MAX_PROFILE_MS / 1000.0
    d = _folder(tmp_path, edge=HEADER + f"1,{n},{n},{n},{s}\n")
    out = tmp_path / "p.yaml"
    assert _run(igniter, d, out).code == 0
    row = load_any_profile(out).models["edge"][0]
    assert (row.batch, row.latency_ms) == (int(MAX_PROFILE_NUMBER), MAX_PROFILE_MS)


# -- duplicates, names, BOM ------------------------------------------------------------------------
def test_a_conflicting_duplicate_row_names_both_lines(igniter, tmp_path):
    d = _folder(tmp_path, bad=HEADER + GOOD + "1,1,1,9999,0.001\n")
    out = tmp_path / "out" / "p.yaml"
    words = "duplicate row: Mig instance 1, Batch size 1, Workload Number 1 again, with a different"
    _refused(_run(igniter, d, out), f"{d / 'bad.csv'}:6", words + " Throughput or Latency than line 2", out)


def test_an_exact_duplicate_row_names_both_lines(igniter, tmp_path):
    d = _folder(tmp_path, bad=HEADER + GOOD + "3,8,2,500.0,0.02\n")
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), f"{d / 'bad.csv'}:6", "again, with the same row as line 4", out)


@pytest.mark.parametrize("name", ["", "a b"], ids=["dot-csv", "space"])
def test_a_file_name_that_names_no_model_is_refused(igniter, tmp_path, name):
    d = _folder(tmp_path, good=HEADER + GOOD, **{name: HEADER + GOOD})
    out = tmp_path / "out" / "p.yaml"
    _refused(_run(igniter, d, out), str(d / f"{name}.csv"), "name it MODEL.csv", out)


def test_a_bom_is_read(igniter, tmp_path):
    d = _folder(tmp_path, excel=b"\xef\xbb\xbf" + (HEADER + GOOD).encode())
    out = tmp_path / "p.yaml"
    res = _run(igniter, d, out)
    assert res.code == 0, res.err
    assert len(load_any_profile(out).models["excel"]) == 3


@needs_shared
def test_the_public_tables_hold_no_duplicate_and_still_import(igniter, tmp_path):
    res = _run(igniter, TABLES, tmp_path / "p.yaml")
    assert res.code == 0, res.err
    assert "11 models, 1747 measured rows" in res.out


def test_an_out_path_that_is_a_directory_is_refused(igniter, tmp_path):
    d = _folder(tmp_path, good=HEADER + GOOD)
    out = tmp_path / "out"
    out.mkdir()
    res = _run(igniter, d, out)
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1, res.err
    assert f"{out}: cannot write: is a directory" in res.err
    assert list(out.iterdir()) == []
