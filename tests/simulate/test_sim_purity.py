"""Simulated time only: the simulator's modules never read a clock or touch processes or clouds."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.foundation.test_purity import FORBIDDEN, imported_roots

MODULES = ["autoscaler/simulate.py", "autoscaler/fleet/sim.py", "autoscaler/traces.py", "autoscaler/strategies.py",
           "autoscaler/simreport.py"]


@pytest.mark.parametrize("module", MODULES)
def test_simulator_modules_read_no_clock(module):
    assert not imported_roots(ROOT / module) & FORBIDDEN
