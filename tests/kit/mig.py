"""MIG test helpers: ParvaGPU's public A100 80GB tables, read from ../shared beside the clone.

The tables are third-party data and stay in ../shared (CI has it); the repository never holds a
copy or a conversion, so tests import them into tmp_path. Where ../shared is absent, the tests
that need it skip and say why.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from autoscaler.config.tables import SCENARIO_MODELS, parvagpu_scenarios
from tests.conftest import ROOT

SHARED = ROOT.parent / "shared"
TABLES = SHARED / "profiles" / "a100-80gb-mig"
SCENARIOS = SHARED / "scenarios" / "mig"
MODELS = SCENARIO_MODELS

needs_shared = pytest.mark.skipif(
    not TABLES.is_dir(), reason=f"ParvaGPU's A100 tables are not at {TABLES} (../shared beside the clone)"
)


def import_a100(out_dir: Path) -> Path:
    """`igniter profile import` of the public tables into out_dir/a100-80gb.yaml."""
    from autoscaler.cli import main

    out = out_dir / "a100-80gb.yaml"
    if not out.exists():
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["profile", "import", str(TABLES), "--gpu", "a100-80gb", "--out", str(out)]) == 0
    return out


def scenarios() -> list[tuple[int, dict[str, tuple[float, float]]]]:
    """ParvaGPU's six scenarios: (index, {model: (rate_rps, slo_ms)}), models it does not serve left out."""
    rates = (SCENARIOS / "parvagpu-slo-req-rate.csv").read_text()
    slos = (SCENARIOS / "parvagpu-slo-latency.csv").read_text()
    return list(enumerate(parvagpu_scenarios(rates, slos)))
