"""The pure core imports no cloud SDK, no SSH, no processes and no clock (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PURE = ["autoscaler/perfmodel.py", "autoscaler/policy.py", "autoscaler/profile.py", "autoscaler/forecast.py",
        "autoscaler/reconcile.py", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "autoscaler" / "planner").glob("*.py"))]
FORBIDDEN = {"boto3", "botocore", "paramiko", "subprocess", "time", "datetime", "socket", "httpx", "requests"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_side_effects(module):
    path = ROOT / module
    assert path.exists(), module
    assert not imported_roots(path) & FORBIDDEN
