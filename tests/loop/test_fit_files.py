"""The fitted profiles kept as files (loop/state/fit_files.py): read back to the last bit, a
process that finds them imports no scipy, a damaged file or a directory that cannot be written
never costs more than the saving, and the cache directory is the one the environment names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler.loop.state.fit_files import FITS, FitFiles, cache_dir
from autoscaler.model import fit_cache
from tests.conftest import PROFILES, ROOT
from tests.model.test_fit_cache import coefficients, fresh

pytestmark = pytest.mark.unit

BUNDLED = sorted(PROFILES.glob("*.yaml"))


@pytest.fixture
def files(tmp_path):
    """Fits kept under a directory of this test's own; the store in use as it was after."""
    before = fit_cache.in_use()
    fit_cache.use(FitFiles(tmp_path / "cache"))
    yield tmp_path / "cache" / FITS
    fit_cache.use(before)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_a_fit_read_back_from_its_file_is_the_fresh_fit_to_the_last_bit(files, path):
    want = fresh(path)
    assert coefficients(path) == want  # fitted, and written
    assert len(list(files.glob("*.json"))) == len(want)  # one file per model of the profile
    again = coefficients(path)  # read back
    assert all(repr(a) == repr(b) for m in want for a, b in zip(again[m], want[m]))  # -0.0 too


@pytest.mark.e2e  # real processes
def test_a_process_that_finds_its_fits_imports_no_scipy(tmp_path):
    script = (
        "import sys, io, contextlib\n"
        "from autoscaler.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['plan', 'policies/example.yaml'])\n"
        "print(code, 'scipy' in sys.modules)\n"
    )
    env = {**os.environ, "IGNITER_CACHE_DIR": str(tmp_path / "c")}
    env.pop("IGNITER_NO_CACHE", None)

    def plan() -> str:
        cmd = [sys.executable, "-c", script]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.strip()

    assert plan() == "0 True"  # the first fits (and imports scipy to)
    assert list((tmp_path / "c" / FITS).glob("*.json"))
    assert plan() == "0 False"  # the next reads the fits
    env["IGNITER_NO_CACHE"] = "1"
    assert plan() == "0 True"  # and with the cache off fits again


@pytest.mark.parametrize(
    "body",
    ["", "not json", "[1.0, 2.0]", '{"k": [1, 2, 3, 4, 5]}', "[1, 2, 3, 4, 5]", "[1.0, 2.0, 3.0, 4.0, NaN]"],
    ids=["empty", "not-json", "too-few", "not-a-list", "not-floats", "not-finite"],
)
def test_a_damaged_file_is_fitted_again_and_replaced(files, body):
    path = PROFILES / "t4-synthetic.yaml"
    want = coefficients(path)
    for f in files.glob("*.json"):
        f.write_text(body)
    assert coefficients(path) == want
    assert all(len(json.loads(f.read_text())) == 5 for f in files.glob("*.json"))
    assert not list(files.glob(".fit-*"))  # no temporary file left


def test_a_directory_that_cannot_be_written_costs_only_the_saving(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    before = fit_cache.in_use()
    fit_cache.use(FitFiles(blocker))
    try:
        got = coefficients(PROFILES / "t4-synthetic.yaml")
    finally:
        fit_cache.use(before)
    assert got == fresh(PROFILES / "t4-synthetic.yaml")
    assert blocker.read_text().startswith("a file")


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"HOME": "/h"}, "/h/.cache/igniter"),
        ({"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/x/igniter"),
        ({"HOME": "/h", "XDG_CACHE_HOME": "/x", "CACHE_DIRECTORY": "/var/cache/igniter:/other"}, "/var/cache/igniter"),
        ({"HOME": "/h", "CACHE_DIRECTORY": "/s", "IGNITER_CACHE_DIR": "/mine"}, "/mine"),
        ({"HOME": "/h", "IGNITER_NO_CACHE": "0"}, "/h/.cache/igniter"),
        ({"HOME": "/h", "IGNITER_CACHE_DIR": "/mine", "IGNITER_NO_CACHE": "1"}, None),
        ({}, None),
    ],
)
def test_the_cache_directory_is_the_first_the_environment_names(env, want):
    got = cache_dir(env)
    assert (None if got is None else str(got)) == want


def test_a_relative_cache_directory_is_taken_from_the_working_directory():
    assert cache_dir({"IGNITER_CACHE_DIR": "rel"}) == Path.cwd() / "rel"
