"""The pure modules of the control loop import no cloud, SSH, process or clock modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "autoscaler"
PURE = ["forecast.py", "reconcile.py", "lifecycle.py", "layout.py", "scaling.py", "sloguard.py", "controller.py",
        "fleet/console.py"]
FORBIDDEN = {"boto3", "botocore", "paramiko", "subprocess", "time", "datetime", "socket", "httpx"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module", PURE)
def test_no_side_effect_imports(module: str) -> None:
    assert not imported(ROOT / module) & FORBIDDEN


def test_pure_modules_only_import_pure_project_modules() -> None:
    allowed = {"autoscaler.fleet.base", "autoscaler.planner.types", "autoscaler.layout", "autoscaler.lifecycle"}
    for module in ["forecast.py", "reconcile.py", "lifecycle.py", "layout.py", "scaling.py", "sloguard.py"]:
        tree = ast.parse((ROOT / module).read_text())
        project = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                   and n.module.startswith("autoscaler")}
        assert project <= allowed, (module, project - allowed)
