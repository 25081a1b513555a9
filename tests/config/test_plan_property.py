"""Property: whatever policy `igniter validate` accepts, `igniter plan` answers without raising.

Policies are drawn across the whole accepted range (rates up to the ceiling, SLOs from a
microsecond to ten minutes, prices, caps, every fast planner); the plan must exit 0 or 3, or 2
with a `FILE: field.path: message` line, never 1 (an internal error) and never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.cli import main
from autoscaler.config import limits
from tests.kit.examples import examples

pytestmark = [pytest.mark.property, pytest.mark.slow]


MODELS = ["alexnet", "resnet50", "vgg19", "ssd"]
FIELD_ERROR = re.compile(r"^error: \S+: [A-Za-z_]+(\[\d+\])?(\.[A-Za-z_]+(\[\d+\])?)*: \S", re.MULTILINE)


def _edge_floats(lo: float, hi: float, exclude_min: bool = False) -> st.SearchStrategy[float]:
    """Anywhere in [lo, hi], with the ends and the powers of ten in between drawn often."""
    tens = [10.0**k for k in range(-6, 8) if lo < 10.0**k < hi]
    ends = ([] if exclude_min else [lo]) + [hi]
    return st.one_of(
        st.sampled_from(ends + tens),
        st.floats(lo, hi, exclude_min=exclude_min, allow_nan=False, allow_infinity=False),
    )


instance_type = st.fixed_dictionaries(
    {
        "gpu": st.sampled_from(["v100", "t4-synthetic"]),
        "gpus": st.integers(1, 16),
        "price_per_hour": _edge_floats(0.0, limits.MAX_PRICE_PER_HOUR, exclude_min=True),
    },
    optional={"max_instances": st.integers(0, 50)},
)
workload = st.fixed_dictionaries(
    {
        "model": st.sampled_from(MODELS),
        "slo_ms": _edge_floats(0.0, limits.MAX_SLO_MS, exclude_min=True),
        "rate_rps": _edge_floats(0.0, limits.MAX_RATE_RPS),
    },
    optional={"min_rate_rps": _edge_floats(0.0, limits.MAX_RATE_RPS)},
)
scaling = st.fixed_dictionaries(
    {"planner": st.sampled_from(["igniter", "ffd", "gslice", "gpulets"])},
    optional={
        "max_cost_per_hour": _edge_floats(0.0, limits.MAX_FLEET_COST_PER_HOUR, exclude_min=True),
        "max_instances": st.integers(1, 20_000),
    },
)


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    types = draw(st.lists(instance_type, min_size=1, max_size=3))
    loads = draw(st.lists(workload, min_size=1, max_size=4))
    return {
        "instance_types": [{"name": f"type-{i}", **t} for i, t in enumerate(types)],
        "workloads": [{"name": f"w{i}", **w} for i, w in enumerate(loads)],
        "scaling": draw(scaling),
    }


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies())
def test_plan_never_raises_on_a_policy_validate_accepts(policy: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.yaml"
        path.write_text(yaml.safe_dump(policy))
        valid, _, verr = _cli("validate", str(path))
        code, out, err = _cli("plan", str(path), "--json")
    assert "Traceback" not in err and "internal error" not in err, err
    if valid != 0:  # validate refused it (e.g. too many instances): plan must refuse it the same way
        assert valid == 2 and FIELD_ERROR.search(verr), verr
        assert code == 2 and FIELD_ERROR.search(err), err
        return
    assert code in (0, 2, 3), (code, err)
    if code == 2:
        assert FIELD_ERROR.search(err), err
        return
    plan = json.loads(out)
    assert (code == 3) == bool(plan["unplaced"])
    assert all(isinstance(i["price_per_hour"], float | int) for i in plan["instances"])
    limit = policy["scaling"].get("max_instances")
    if limit is None and "max_cost_per_hour" not in policy["scaling"]:
        limit = limits.MAX_INSTANCES
    assert limit is None or len(plan["instances"]) <= limit
