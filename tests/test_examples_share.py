"""tests/kit/examples.py: `make check` draws a share of each property's examples, `make test` all."""

from __future__ import annotations

import pytest

from tests.kit import examples as ex

pytestmark = pytest.mark.unit


def test_unset_draws_every_example(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IGNITER_EXAMPLE_SHARE", raising=False)
    assert [ex.examples(n) for n in (12, 60, 300)] == [12, 60, 300]


def test_a_share_scales_each_count_but_never_below_the_floor_or_above_the_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IGNITER_EXAMPLE_SHARE", "0.25")
    assert [ex.examples(n) for n in (5, 12, 60, 300)] == [5, 10, 15, 75]


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", "nan", "quarter"])
def test_a_bad_share_is_refused_not_read_as_one(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("IGNITER_EXAMPLE_SHARE", bad)
    with pytest.raises(ValueError, match="IGNITER_EXAMPLE_SHARE"):
        ex.examples(60)
