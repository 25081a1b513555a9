"""Fixtures for the Terraform tests (helpers live in tfhelpers.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.terraform.tfhelpers import AUTOSCALER_DIR, EXAMPLE_DIR, FLEET_DIR, GATEWAY_DIR, load_config, terraform_bin


@pytest.fixture(scope="session")
def fleet() -> dict[str, Any]:
    return load_config(FLEET_DIR)


@pytest.fixture(scope="session")
def autoscaler() -> dict[str, Any]:
    return load_config(AUTOSCALER_DIR)


@pytest.fixture(scope="session")
def gateway() -> dict[str, Any]:
    return load_config(GATEWAY_DIR)


@pytest.fixture(scope="session")
def example() -> dict[str, Any]:
    return load_config(EXAMPLE_DIR)


@pytest.fixture
def needs_terraform() -> str:
    binary = terraform_bin()
    if binary is None:
        pytest.skip(
            "the terraform binary is not installed; this check is optional (python-hcl2 and checkov cover the rest)"
        )
    return binary
