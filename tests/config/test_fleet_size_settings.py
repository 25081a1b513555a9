"""The fleet-size settings (issue 50): agents.max_concurrency and state.history_s, their defaults,
and bad values refused with exit 2 naming the field."""

from __future__ import annotations

import pytest

from autoscaler.config.policy import AgentsConfig, StateConfig
from tests.config.test_policy import GOOD, write

pytestmark = pytest.mark.unit


def test_the_defaults() -> None:
    assert AgentsConfig().max_concurrency == 32
    assert StateConfig().history_s == 7 * 86400.0


@pytest.mark.parametrize(
    ("section", "value", "field"),
    [
        ({"agents": {"max_concurrency": 0}}, "greater than or equal to 1", "agents.max_concurrency"),
        ({"agents": {"max_concurrency": 5000}}, "above the ceiling 1,024", "agents.max_concurrency"),
        ({"agents": {"max_concurrency": "many"}}, "valid integer", "agents.max_concurrency"),
        ({"agents": {"max_concurrency": 2.5}}, "valid integer", "agents.max_concurrency"),
        ({"state": {"history_s": 0}}, "greater than 0", "state.history_s"),
        ({"state": {"keep": 3}}, "unknown key", "state.keep"),
    ],
)
def test_bad_values_exit_2_naming_the_field(igniter, tmp_path, section, value, field) -> None:
    path = write(tmp_path, {**GOOD, **section})
    res = igniter("validate", path)
    assert res.code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {field}: "), res.err
    assert value in lines[0].lower() and res.out == ""
