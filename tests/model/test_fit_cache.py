"""Fits kept on disk (model/fit_cache.py): a kept fit is the fresh fit to the last
bit, a process that finds its fits imports no scipy, and a changed profile, a damaged file or a
directory that cannot be written never hands out a wrong answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autoscaler.config.profile import load_profile
from autoscaler.model import fit_cache
from autoscaler.model.perfmodel import fit
from tests.conftest import PROFILES, ROOT

pytestmark = pytest.mark.unit

BUNDLED = sorted(PROFILES.glob("*.yaml"))


@pytest.fixture
def kept(tmp_path):
    """Fits kept under a directory of this test's own, as they were after."""
    before = fit_cache.in_use()
    fit_cache.use(tmp_path / "cache")
    yield tmp_path / "cache" / fit_cache.FITS
    fit_cache.use(before)


def _coefficients(path: Path) -> dict[str, tuple[float, ...]]:
    """Every model's fitted k1..k5, fitted now (`fit`: no in-process memo)."""
    return {name: c.k for name, c in fit(load_profile(path), path.stem).coef.items()}


def _fresh(path: Path) -> dict[str, tuple[float, ...]]:
    before = fit_cache.in_use()
    fit_cache.use(None)
    try:
        return _coefficients(path)
    finally:
        fit_cache.use(before)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_a_kept_fit_is_the_fresh_fit_to_the_last_bit(kept, path):
    fresh = _fresh(path)
    first = _coefficients(path)  # fitted, and kept
    assert len(list(kept.glob("*.json"))) == len(fresh)  # one file per model of the profile
    again = _coefficients(path)  # read back
    assert first == fresh and again == fresh
    assert all(repr(a) == repr(b) for m in fresh for a, b in zip(again[m], fresh[m]))  # -0.0 too


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
    assert list((tmp_path / "c" / fit_cache.FITS).glob("*.json"))
    assert plan() == "0 False"  # the next reads the fits
    env["IGNITER_NO_CACHE"] = "1"
    assert plan() == "0 True"  # and with the cache off fits again


def test_a_changed_profile_is_fitted_afresh(kept, tmp_path):
    data = yaml.safe_load((PROFILES / "v100.yaml").read_text())
    _coefficients(PROFILES / "v100.yaml")
    files = set(kept.glob("*.json"))
    model = next(iter(data["models"]))
    data["models"][model]["gpu_latency_ms"][0][0] *= 1.1
    changed = tmp_path / "v100.yaml"
    changed.write_text(yaml.safe_dump(data))
    got = _coefficients(changed)
    assert len(set(kept.glob("*.json")) - files) == 1  # only the changed model's fit is new
    assert got == _fresh(changed) and got[model] != _fresh(PROFILES / "v100.yaml")[model]


@pytest.mark.parametrize(
    "body",
    ["", "not json", "[1.0, 2.0]", '{"k": [1, 2, 3, 4, 5]}', "[1, 2, 3, 4, 5]", "[1.0, 2.0, 3.0, 4.0, NaN]"],
    ids=["empty", "not-json", "too-few", "not-a-list", "not-floats", "not-finite"],
)
def test_a_damaged_kept_fit_is_fitted_again_and_replaced(kept, body):
    path = PROFILES / "t4-synthetic.yaml"
    fresh = _coefficients(path)
    for f in kept.glob("*.json"):
        f.write_text(body)
    assert _coefficients(path) == fresh
    assert all(len(json.loads(f.read_text())) == 5 for f in kept.glob("*.json"))


def test_a_directory_that_cannot_be_written_costs_only_the_saving(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    before = fit_cache.in_use()
    fit_cache.use(blocker)
    try:
        got = _coefficients(PROFILES / "t4-synthetic.yaml")
    finally:
        fit_cache.use(before)
    assert got == _fresh(PROFILES / "t4-synthetic.yaml")
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
    got = fit_cache.cache_dir(env)
    assert (None if got is None else str(got)) == want


def test_a_relative_cache_directory_is_taken_from_the_working_directory():
    assert fit_cache.cache_dir({"IGNITER_CACHE_DIR": "rel"}) == Path.cwd() / "rel"
