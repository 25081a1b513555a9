"""scaling.warm_pool: the defaults (off), what each setting resolves to, and bad settings: exit 2,
one line naming the field, nothing written (`igniter validate`, and `igniter run` for what only
the provider can refuse)."""

from __future__ import annotations

import pytest

from autoscaler.config.policy import load_policy
from tests.config.test_policy import GOOD, write

pytestmark = pytest.mark.unit


def pool(**fields):
    return {**GOOD, "scaling": {"warm_pool": fields}}


def test_off_by_default_and_priced_from_its_volumes(tmp_path):
    off = load_policy(write(tmp_path, GOOD)).scaling.warm_pool
    assert not off.enabled and off.warm_boot_s == 45.0
    assert off.stopped_price_per_hour == pytest.approx(200 * 0.08 / 730)  # gp3 at $0.08/GB-month, 730 h
    on = load_policy(write(tmp_path, pool(size=2))).scaling.warm_pool
    assert on.enabled and on.cap == 2
    auto = load_policy(write(tmp_path, pool(size="auto", types=["p3.2xlarge"]))).scaling.warm_pool
    assert auto.enabled and auto.cap == 4 and auto.types == ["p3.2xlarge"]
    assert auto.reuse_on_scale_in and auto.refill_delay_s == 1800.0  # ReuseOnScaleIn by default
    assert load_policy(write(tmp_path, pool(size="auto", max=9))).scaling.warm_pool.cap == 9


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"size": "lots"}, "scaling.warm_pool.size: must be 'auto' or a count of instances (0, 1, 2, ...), got 'lots'"),
        ({"size": -1}, "scaling.warm_pool.size: must be 'auto' or a count of instances (0, 1, 2, ...), got -1"),
        ({"size": True}, "scaling.warm_pool.size: must be 'auto' or a count of instances (0, 1, 2, ...), got True"),
        ({"size": 5, "max": 3}, "scaling.warm_pool.size: 5 is above scaling.warm_pool.max (3)"),
        ({"size": 1, "types": ["g9.huge"]}, "scaling.warm_pool.types[0]: 'g9.huge' is not one of instance_types"),
        ({"size": 1, "warm_boot_s": -5}, "scaling.warm_pool.warm_boot_s:"),
        ({"size": 1, "price_per_gb_month": -1}, "scaling.warm_pool.price_per_gb_month:"),
        ({"size": 1, "min": 1}, "scaling.warm_pool.min:"),
        ({"size": 1, "refill_delay_s": -1}, "scaling.warm_pool.refill_delay_s:"),
        ({"size": 1, "reuse_on_scale_in": "sometimes"}, "scaling.warm_pool.reuse_on_scale_in:"),
    ],
    ids=[
        "word",
        "negative",
        "bool",
        "above max",
        "unknown type",
        "negative boot",
        "negative price",
        "unknown key",
        "negative refill delay",
        "reuse not a bool",
    ],
)
def test_bad_settings_exit_2_with_one_line(igniter, tmp_path, fields, line):
    path = write(tmp_path, pool(**fields))
    res = igniter("validate", path)
    assert res.code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {line}"), res.err


def test_the_local_provider_refuses_a_pool_before_anything_is_written(igniter, tmp_path):
    path = write(tmp_path, {**pool(size=1), "agents": {"transport": "none"}})
    state = tmp_path / "state.sqlite"
    res = igniter("run", path, "--once", "--state", state)
    assert res.code == 2, res
    assert res.err.strip() == (
        f"error: {path}: scaling.warm_pool: the local provider has no stopped state to keep instances in; "
        "use provider ec2 (or size: 0)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.yaml"]  # no state file, no instance dir
