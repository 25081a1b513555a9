"""docs/operations.md documents every lifecycle edge and every policy default it lists."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autoscaler.config.policy import (
    AgentsConfig,
    GatewayConfig,
    LeaderConfig,
    ProviderConfig,
    RatesConfig,
    ScalingConfig,
)
from autoscaler.core.fleet.lifecycle import TRANSITIONS

pytestmark = pytest.mark.unit


DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def test_every_transition_is_in_the_table() -> None:
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3:
            rows.append(({f.strip() for f in cells[0].split(",")}, cells[1], cells[2]))
    for a, reason, b in [(a.value, r.value, b.value) for (a, r), b in TRANSITIONS.items()]:
        assert any(a in froms and reason == r and b == to for froms, r, to in rows), (a, reason, b)


def test_documented_defaults_match_the_schema() -> None:
    text = DOC.read_text()
    block = text.split("## Policy sections (all optional)", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    doc = yaml.safe_load(block)
    for section, model in (
        ("provider", ProviderConfig),
        ("agents", AgentsConfig),
        ("scaling", ScalingConfig),
        ("rates", RatesConfig),
        ("leader", LeaderConfig),
        ("gateway", GatewayConfig),
    ):
        defaults = model().model_dump()
        for key, value in doc[section].items():
            assert key in defaults, f"{section}.{key} is documented but not in the schema"
            assert defaults[key] == value, f"{section}.{key}: documented {value!r}, default {defaults[key]!r}"
        assert set(doc[section]) == set(defaults), f"{section}: undocumented {set(defaults) - set(doc[section])}"
