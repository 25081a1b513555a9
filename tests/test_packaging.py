"""Installs from one distribution: the agent (GPU VM), the central service, both (dev).

The dependency checks read the distribution's metadata and follow each requirement through the
metadata of what is installed here (the dev environment has every extra), so the agent install's
whole dependency set is known without a network. The import checks run commands in subprocesses
where some imports fail (a sitecustomize finder), as on a host where that extra was not installed.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

DIST = "igniter-autoscaler"
AGENT_ONLY = {"torch", "nvidia-ml-py"}
# The central service's libraries, which a GPU VM must not get (issue 33).
NOT_ON_A_GPU_VM = {"scipy", "matplotlib", "boto3", "botocore", "paramiko", "apscheduler", "moto"}
BLOCKED = ("torch", "pynvml")
SERVICE_MODULES = ("scipy", "matplotlib", "boto3", "botocore", "paramiko", "apscheduler", "httpx", "psutil")


def blocker(blocked: tuple[str, ...]) -> str:
    return f"""
import importlib.abc, sys

class Blocker(importlib.abc.MetaPathFinder):
    \"\"\"Any import of {blocked} (or a submodule) fails, as on a host without them.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"{{name}} is blocked: not installed here", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""


BLOCKER = blocker(BLOCKED)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: str = DIST) -> list[Requirement]:
    return [Requirement(text) for text in importlib.metadata.requires(dist) or []]


def _extra_of(req: Requirement) -> str | None:
    """The extra a requirement belongs to (None: the base install)."""
    if req.marker is None:
        return None
    for extra in ("agent", "service", "plot", "dev"):
        if req.marker.evaluate({"extra": extra}) and not req.marker.evaluate({"extra": ""}):
            return extra
    return None


def closure(extras: set[str]) -> set[str]:
    """Every distribution `pip install 'igniter-autoscaler[EXTRAS]'` brings (normalised names),
    from the requirements' metadata as installed here, markers evaluated for this platform."""
    todo: list[tuple[str, set[str]]] = [(DIST, extras)]
    seen: set[str] = set()
    while todo:
        dist, wanted = todo.pop()
        for req in _requirements(dist):
            active = req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *wanted})
            name = _norm(req.name)
            if not active:
                continue
            if name == _norm(DIST):
                todo.append((DIST, set(req.extras)))
            elif name not in seen:
                seen.add(name)
                todo.append((name, set(req.extras)))
    return seen


def test_the_agent_install_brings_none_of_the_central_services_libraries() -> None:
    agent = closure({"agent"})
    assert not agent & {_norm(n) for n in NOT_ON_A_GPU_VM}, sorted(agent & {_norm(n) for n in NOT_ON_A_GPU_VM})
    assert {"torch", "nvidia-ml-py", "uvicorn", "starlette", "pydantic"} <= agent


def test_the_agent_install_brings_everything_agents_import() -> None:
    """Every third-party module imported anywhere under agents/ comes with the agent install."""
    import ast

    imported = set()
    for path in (ROOT / "agents").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    providers = importlib.metadata.packages_distributions()
    third_party = {m for m in imported if m in providers and m not in ("agents", "autoscaler")}
    agent = closure({"agent"})
    missing = {m: providers[m] for m in third_party if not {_norm(d) for d in providers[m]} & agent}
    assert not missing, f"agents/ imports these, which [agent] does not install: {missing}"


def test_torch_and_nvml_are_only_in_the_agent_extra() -> None:
    by_extra: dict[str | None, set[str]] = {}
    for req in _requirements():
        by_extra.setdefault(_extra_of(req), set()).add(req.name)
    assert not AGENT_ONLY & (by_extra[None] | by_extra["service"]), "the central service must not pull torch"
    assert AGENT_ONLY <= by_extra["agent"]
    assert {"uvicorn", "starlette", "httptools"} <= by_extra[None], "the HTTP stack both sides serve with"
    assert "uvloop" in by_extra["agent"], "the inference servers' event loop"
    assert {"scipy", "APScheduler", "boto3", "paramiko"} <= by_extra["service"]
    assert by_extra["plot"] == {"matplotlib"}
    assert not AGENT_ONLY & by_extra["dev"], "dev gets torch through the agent extra, not a second pin"
    dev_self = [r for r in _requirements() if r.name == DIST and _extra_of(r) == "dev"]
    assert [sorted(r.extras) for r in dev_self] == [["agent", "plot", "service"]], "dev must include every extra"
    assert "tritonclient" in by_extra["dev"]
    assert not {"torch", "nvidia-ml-py"} & closure({"service"})


@pytest.mark.unit
def test_installed_metadata_matches_pyproject() -> None:
    """A stale editable install would make the checks above test an old pyproject: reinstall (make venv)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {Requirement(r).name for r in project["dependencies"]}
    declared |= {Requirement(r).name for rs in project["optional-dependencies"].values() for r in rs}
    assert {r.name for r in _requirements()} == declared
    extras = set(importlib.metadata.metadata(DIST).get_all("Provides-Extra") or [])
    assert extras == set(project["optional-dependencies"])


def _run_blocked(tmp_path: Path, *argv: str, blocked: tuple[str, ...] = BLOCKED) -> subprocess.CompletedProcess:
    """Run argv with the import blocker loaded first (sitecustomize), as the console scripts run,
    with a cache directory of its own: an install without scipy finds no fitted profile kept by
    this machine's full install (loop/state/fit_files.py), as a fresh node would not."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(blocker(blocked))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "IGNITER_CACHE_DIR": str(tmp_path / "cache"),
    }
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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # one build at a time: setuptools writes build/ and the egg-info into the checkout, and xdist
    # workers share the run's base temp directory's parent (pytest-N/)
    lock = tmp_path_factory.getbasetemp().parent / "igniter-wheel.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(out),
                str(ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.e2e  # builds a wheel or runs the installed commands: real processes
def test_the_wheel_ships_the_bundled_profiles_policies_and_schema(wheel: zipfile.ZipFile) -> None:
    """A non-editable install has no policies/ beside the package: the wheel carries the profiles
    into <prefix>/share/igniter/profiles, where the default profiles_dir then points, and the
    example policies and the schema into share/igniter/policies, where `igniter example` reads them."""
    names = wheel.namelist()
    shipped = {Path(n).name for n in names if "/data/share/igniter/profiles/" in n}
    assert shipped == {p.name for p in (ROOT / "policies" / "profiles").glob("*.yaml")}
    policies = {Path(n).name for n in names if "/data/share/igniter/policies/" in n}
    assert policies == {p.name for p in (ROOT / "policies").glob("*.yaml")} | {"policy.schema.json"}


@pytest.mark.e2e  # builds a wheel or runs the installed commands: real processes
def test_the_wheels_metadata_keeps_the_agent_install_lean(wheel: zipfile.ZipFile) -> None:
    """The built METADATA (what pip resolves from): base + [agent] names none of the service's libraries."""
    (meta,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    reqs = [
        Requirement(line.split(":", 1)[1].strip())
        for line in wheel.read(meta).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    agent = {_norm(r.name) for r in reqs if r.marker is None or r.marker.evaluate({"extra": "agent"})}
    assert agent >= {"torch", "nvidia-ml-py", "pydantic", "uvicorn"}
    assert not agent & {_norm(n) for n in (*NOT_ON_A_GPU_VM, "httpx", "psutil")}, agent


@pytest.mark.e2e  # builds a wheel or runs the installed commands: real processes
def test_agent_commands_run_without_the_service_libraries(tmp_path: Path) -> None:
    state = tmp_path / "state"
    doc = '{"generation": 1, "servers": [{"name": "a", "workload": "w", "model_dir": "/nowhere", "batch": 4, "mps_percent": 50, "port": 9}]}'
    commands = [
        [_script("igniter-agent"), "--version"],
        [
            sys.executable,
            "-c",
            "import agents.cli, agents.node.daemon, agents.server.main, agents.server.app, agents.server.routes",
        ],
        [
            sys.executable,
            "-c",
            f"import sys; from agents.cli import main; sys.argv[1:] = []; sys.exit(main(['apply', '--state-dir', '{state}', '--skip-model-check', '-']))",
        ],
        [_script("igniter-agent"), "status", "--state-dir", str(state), "--json"],
    ]
    for argv in commands:
        done = _run_blocked(tmp_path, *argv, blocked=SERVICE_MODULES)
        if "apply" in argv[-1]:
            done = subprocess.run(
                argv,
                input=doc,
                capture_output=True,
                text=True,
                timeout=120,
                cwd=tmp_path,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])},
            )
        assert done.returncode == 0, f"{argv[1:]}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "is blocked" not in done.stderr


@pytest.mark.e2e  # builds a wheel or runs the installed commands: real processes
def test_a_missing_extra_is_one_line_naming_it(tmp_path: Path, trace: Path) -> None:
    policy = str(ROOT / "policies" / "example.yaml")
    plot = tmp_path / "out.png"
    cases = [
        ([_script("igniter"), "plan", policy], ("scipy",), "service"),
        ([_script("igniter"), "simulate", policy, "--trace", str(trace), "--plot", str(plot)], ("matplotlib",), "plot"),
    ]
    for argv, blocked, extra in cases:
        done = _run_blocked(tmp_path, *argv, blocked=blocked)
        assert done.returncode == 2, f"{argv[1:]}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert done.stderr.count("\n") == 1 and f"pip install 'igniter-autoscaler[{extra}]'" in done.stderr, done.stderr
    assert not plot.exists()
    helped = _run_blocked(tmp_path, _script("igniter"), "--help", blocked=("scipy",))  # loads no profile: no scipy
    assert helped.returncode == 0 and helped.stdout.startswith("usage: igniter"), helped.stderr[-2000:]


@pytest.mark.unit
def test_default_profiles_dir_falls_back_to_the_installed_share(tmp_path: Path) -> None:
    from autoscaler.config.policy import BUNDLED_PROFILES, bundled_profiles

    assert BUNDLED_PROFILES == ROOT / "policies" / "profiles"  # this checkout
    assert bundled_profiles(tmp_path / "site-packages", tmp_path) == tmp_path / "share" / "igniter" / "profiles"


def test_example_reads_the_checkout_or_the_installed_share(tmp_path: Path) -> None:
    from autoscaler.cli.example import examples_dir

    assert examples_dir() == ROOT / "policies"
    assert examples_dir(tmp_path / "site-packages", tmp_path) == tmp_path / "share" / "igniter" / "policies"
    done = subprocess.run([_script("igniter"), "example", "policy"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == (ROOT / "policies" / "example.yaml").read_text()
