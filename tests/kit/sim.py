"""Fixtures for the simulator tests: small policies and traces written to a temp dir."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.config.policy import Policy, load_policy

BASE: dict[str, Any] = {
    "fleet": "simtest",
    "instance_types": [{"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.5}],
    "workloads": [{"name": "a", "model": "resnet50", "slo_ms": 40, "rate_rps": 600}],
    "agents": {"transport": "none"},
    "scaling": {"interval_s": 60, "boot_s": 180, "headroom": 0.0, "scale_down_delay_s": 300, "forecast": "last"},
}


@pytest.fixture
def make_policy(tmp_path: Path) -> Callable[..., Policy]:
    """A policy from BASE with top-level keys replaced and `scaling` keys merged."""

    def make(scaling: Mapping[str, Any] | None = None, **top: Any) -> Policy:
        data = {**BASE, **top, "scaling": {**BASE["scaling"], **(scaling or {})}}
        path = tmp_path / "policy.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return load_policy(path)

    return make


@pytest.fixture
def write_csv(tmp_path: Path) -> Callable[[str, Sequence[Sequence[Any]]], Path]:
    def write(name: str, rows: Sequence[Sequence[Any]]) -> Path:
        path = tmp_path / name
        path.write_text("\n".join(",".join(str(c) for c in r) for r in rows) + "\n", encoding="utf-8")
        return path

    return write
