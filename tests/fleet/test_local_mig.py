"""The local provider's agents for a MIG GPU type cut fake slices (`--fake-mig GPU --fake-gpus N`):
a MIG plan's assignments name slices, which an agent without a MIG device refuses."""

from __future__ import annotations

import shutil

import pytest
import yaml

from autoscaler.config.policy import load_policy
from autoscaler.fleet.local import fake_mig_flags
from tests.conftest import ROOT
from tests.kit.mig import import_a100, needs_shared

pytestmark = [pytest.mark.unit, needs_shared]


def test_a_mig_gpu_type_gets_fake_slices_and_an_mps_one_none(tmp_path):  # type: ignore[no-untyped-def]
    import_a100(tmp_path / "profiles")
    shutil.copy(ROOT / "policies" / "profiles" / "t4-synthetic.yaml", tmp_path / "profiles")
    data = {
        "profiles_dir": "profiles",
        "instance_types": [
            {"name": "a100-8", "gpu": "a100-80gb", "gpus": 8, "price_per_hour": 40.97},
            {"name": "a100-1", "gpu": "a100-80gb", "gpus": 1, "price_per_hour": 5.07},
            {"name": "g4dn.xlarge", "gpu": "t4-synthetic", "gpus": 1, "price_per_hour": 0.526},
        ],
        "workloads": [{"name": "r", "model": "resnet50", "slo_ms": 200, "rate_rps": 100}],
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    assert fake_mig_flags(load_policy(tmp_path / "p.yaml")) == {
        "a100-8": ("--fake-mig", "a100-80gb", "--fake-gpus", "8"),
        "a100-1": ("--fake-mig", "a100-80gb", "--fake-gpus", "1"),
    }
