"""Two installs from one distribution: the central service without torch or NVML, the agent with them.

The metadata check reads the installed distribution (what pip would resolve); the import check runs
the central service's own commands in subprocesses where `import torch` and `import pynvml` fail,
so a stray import anywhere on their path breaks this test rather than a controller host.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT

DIST = "igniter-autoscaler"
AGENT_ONLY = {"torch", "nvidia-ml-py"}
BLOCKED = ("torch", "pynvml")
BLOCKER = f"""
import importlib.abc, sys

class Blocker(importlib.abc.MetaPathFinder):
    \"\"\"Any import of {BLOCKED} (or a submodule) fails, as on a host without them.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is blocked: the central service must not need it")
        return None

sys.meta_path.insert(0, Blocker())
"""


def _requirements() -> list[Requirement]:
    return [Requirement(text) for text in importlib.metadata.requires(DIST) or []]


def _extra_of(req: Requirement) -> str | None:
    """The extra a requirement belongs to (None: the base install)."""
    if req.marker is None:
        return None
    for extra in ("agent", "dev"):
        if req.marker.evaluate({"extra": extra}) and not req.marker.evaluate({"extra": ""}):
            return extra
    return None


@pytest.mark.e2e
def test_torch_and_nvml_are_only_in_the_agent_extra() -> None:
    by_extra: dict[str | None, set[str]] = {}
    for req in _requirements():
        by_extra.setdefault(_extra_of(req), set()).add(req.name)
    assert not AGENT_ONLY & by_extra[None], f"the base install pulls {AGENT_ONLY & by_extra[None]}"
    assert AGENT_ONLY <= by_extra["agent"]
    assert {"uvicorn", "starlette", "httptools"} <= by_extra["agent"], "the inference server's HTTP stack"
    assert not AGENT_ONLY & by_extra["dev"], "dev gets torch through the agent extra, not a second pin"
    dev_self = [r for r in _requirements() if r.name == DIST and _extra_of(r) == "dev"]
    assert [sorted(r.extras) for r in dev_self] == [["agent"]], "the dev extra must include the agent extra"
    assert "tritonclient" in by_extra["dev"]


@pytest.mark.unit
def test_installed_metadata_matches_pyproject() -> None:
    """A stale editable install would make the check above test an old pyproject: reinstall (make venv)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {Requirement(r).name for r in project["dependencies"]}
    declared |= {Requirement(r).name for rs in project["optional-dependencies"].values() for r in rs}
    assert {r.name for r in _requirements()} == declared


def _run_blocked(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """Run argv with the import blocker loaded first (sitecustomize), as the console scripts run."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)


def _script(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@pytest.mark.e2e
def test_the_blocker_really_blocks(tmp_path: Path) -> None:
    for module in (*BLOCKED, "agents.server.app"):
        done = _run_blocked(tmp_path, sys.executable, "-c", f"import {module}")
        assert done.returncode == 1 and "is blocked" in done.stderr, module


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    rows = ["time_s,alexnet-a,resnet50-a,vgg19-a,ssd-a"]
    rows += [f"{t * 30},{400 + 10 * t},{300},{150},{100 + t}" for t in range(6)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.e2e
def test_central_service_commands_run_without_torch_or_nvml(tmp_path: Path, trace: Path) -> None:
    policy = str(ROOT / "policies" / "example.yaml")
    commands = [
        [_script("igniter"), "validate", policy],
        [_script("igniter"), "plan", policy, "--json"],
        [_script("igniter"), "simulate", policy, "--trace", str(trace), "--json"],
        [sys.executable, "-m", "autoscaler", "plan", policy],
        [sys.executable, "-m", "autoscaler", "--help"],
    ]
    for argv in commands:
        done = _run_blocked(tmp_path, *argv)
        assert done.returncode == 0, f"{argv[1:]}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "is blocked" not in done.stderr


@pytest.mark.e2e
def test_the_wheel_ships_the_bundled_profiles(tmp_path: Path) -> None:
    """A non-editable install has no policies/ beside the package: the wheel carries the profiles
    into <prefix>/share/igniter/profiles, where the default profiles_dir then points."""
    out = tmp_path / "wheel"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if "/data/share/igniter/profiles/" in n}
    assert shipped == {p.name for p in (ROOT / "policies" / "profiles").glob("*.yaml")}


@pytest.mark.unit
def test_default_profiles_dir_falls_back_to_the_installed_share(tmp_path: Path) -> None:
    from autoscaler.config.policy import BUNDLED_PROFILES, bundled_profiles

    assert BUNDLED_PROFILES == ROOT / "policies" / "profiles"  # this checkout
    assert bundled_profiles(tmp_path / "site-packages", tmp_path) == tmp_path / "share" / "igniter" / "profiles"
