"""Fixtures for the agent tests: tiny TorchScript models made here, and real agent processes that
are always cleaned up (helpers live in tests/kit/agent.py)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from tests.kit.agent import Agent


class TinyCNN(torch.nn.Module):
    """x [3, 8, 8] FP32 -> y [5] FP32; scripted."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).relu().mean(dim=(2, 3)))


class TwoHeads(torch.nn.Module):
    """a [4] FP32 and b [4] INT64 -> (mix [4] FP32, top [] INT64); traced."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * 2.0 + b.to(torch.float32), torch.argmax(a, dim=1)


class Log(torch.nn.Module):
    """x [4] FP32 -> y [4] FP32 = log(x): NaN for negative x, a model output JSON cannot carry."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


class Spin(torch.nn.Module):
    """x [1] FP32 -> y [1] FP32 = x, after int(max(x)) 64x64 matmuls: a request that is as slow as it asks."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = torch.eye(64)
        for _ in range(int(x.max())):
            m = m @ m
        return x + 0.0 * m[0, 0]


def _script(module: torch.nn.Module) -> torch.jit.ScriptModule:
    """TorchScript is the served format; torch 2.x warns that it is deprecated, which we know."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(module)


def _trace(module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.trace(module, example)


def _write_model(directory: Path, module: torch.jit.ScriptModule, yaml_text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    module.save(str(directory / "model.pt"))
    (directory / "model.yaml").write_text(yaml_text)
    return directory


@pytest.fixture(scope="session")
def cnn_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    yaml_text = (
        "inputs:\n- {name: x, shape: [3, 8, 8], datatype: FP32}\noutputs:\n- {name: y, shape: [5], datatype: FP32}\n"
    )
    return _write_model(tmp_path_factory.mktemp("cnn"), _script(TinyCNN().eval()), yaml_text)


@pytest.fixture(scope="session")
def two_heads_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    traced = _trace(TwoHeads(), (torch.rand(2, 4), torch.ones(2, 4, dtype=torch.int64)))
    yaml_text = (
        "inputs:\n- {name: a, shape: [4], datatype: FP32}\n- {name: b, shape: [4], datatype: INT64}\n"
        "outputs:\n- {name: mix, shape: [4], datatype: FP32}\n- {name: top, shape: [], datatype: INT64}\n"
    )
    return _write_model(tmp_path_factory.mktemp("twoheads"), traced, yaml_text)


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    yaml_text = "inputs:\n- {name: x, shape: [4], datatype: FP32}\noutputs:\n- {name: y, shape: [4], datatype: FP32}\n"
    return _write_model(tmp_path_factory.mktemp("log"), _script(Log()), yaml_text)


@pytest.fixture(scope="session")
def spin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    yaml_text = "inputs:\n- {name: x, shape: [1], datatype: FP32}\noutputs:\n- {name: y, shape: [1], datatype: FP32}\n"
    return _write_model(tmp_path_factory.mktemp("spin"), _script(Spin()), yaml_text)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    running = Agent(tmp_path / "state")
    yield running
    running.close()


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    """For tests that need agent options (e.g. a short restart backoff)."""
    started: list[Agent] = []

    def make(*extra: str) -> Agent:
        started.append(Agent(tmp_path / f"state{len(started)}", *extra))
        return started[-1]

    yield make
    for running in started:
        running.close()
