"""Fits kept between processes (model/fit_cache.py), through a store that records what it is asked
and answers what a test plants: a kept answer is read back instead of fitting, a changed profile
is a new key, and an answer that is not five finite floats is never handed out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autoscaler.config.profile import load_profile
from autoscaler.model import fit_cache
from autoscaler.model.perfmodel import fit
from tests.conftest import PROFILES

pytestmark = pytest.mark.unit


class Planted:
    """A FitStore in memory: what was put, and what each get answered."""

    def __init__(self) -> None:
        self.kept: dict[str, object] = {}
        self.puts: list[str] = []

    def get(self, key: str) -> object:
        return self.kept.get(key)

    def put(self, key: str, values: tuple[float, ...]) -> None:
        self.kept[key] = list(values)
        self.puts.append(key)


@pytest.fixture
def store():
    before = fit_cache.in_use()
    planted = Planted()
    fit_cache.use(planted)
    yield planted
    fit_cache.use(before)


def coefficients(path: Path) -> dict[str, tuple[float, ...]]:
    """Every model's fitted k1..k5, fitted now (`fit`: no in-process memo)."""
    return {name: c.k for name, c in fit(load_profile(path), path.stem).coef.items()}


def fresh(path: Path) -> dict[str, tuple[float, ...]]:
    before = fit_cache.in_use()
    fit_cache.use(None)
    try:
        return coefficients(path)
    finally:
        fit_cache.use(before)


def test_a_fit_is_kept_once_per_model_and_read_back(store):
    path = PROFILES / "v100.yaml"
    want = fresh(path)
    assert coefficients(path) == want and len(store.puts) == len(want) == len(set(store.puts))
    assert coefficients(path) == want and len(store.puts) == len(want)  # read back: nothing put again


def test_what_the_store_answers_is_what_the_model_uses(store):
    path = PROFILES / "t4-synthetic.yaml"
    coefficients(path)
    planted = (1.0, 2.0, 3.0, 4.0, 5.0)
    for key in store.kept:
        store.kept[key] = list(planted)
    assert set(coefficients(path).values()) == {planted}


def test_a_changed_profile_is_a_new_key(store, tmp_path):
    data = yaml.safe_load((PROFILES / "v100.yaml").read_text())
    coefficients(PROFILES / "v100.yaml")
    before = set(store.kept)
    model = next(iter(data["models"]))
    data["models"][model]["gpu_latency_ms"][0][0] *= 1.1
    changed = tmp_path / "v100.yaml"
    changed.write_text(yaml.safe_dump(data))
    got = coefficients(changed)
    assert len(set(store.kept) - before) == 1  # only the changed model's fit is new
    assert got == fresh(changed) and got[model] != fresh(PROFILES / "v100.yaml")[model]


@pytest.mark.parametrize(
    "answer",
    [None, "text", [1.0, 2.0], {"k": [1.0] * 5}, [1, 2, 3, 4, 5], [1.0, 2.0, 3.0, 4.0, float("nan")], [True] * 5],
    ids=["none", "text", "too-few", "not-a-list", "ints", "nan", "bools"],
)
def test_an_answer_that_is_not_five_finite_floats_is_fitted_again(store, answer):
    path = PROFILES / "t4-synthetic.yaml"
    want = coefficients(path)
    for key in store.kept:
        store.kept[key] = answer
    store.puts.clear()
    assert coefficients(path) == want
    assert sorted(store.puts) == sorted(store.kept)  # each put back right


def test_without_a_store_nothing_is_kept():
    before = fit_cache.in_use()
    fit_cache.use(None)
    try:
        assert coefficients(PROFILES / "t4-synthetic.yaml") == fresh(PROFILES / "t4-synthetic.yaml")
    finally:
        fit_cache.use(before)
