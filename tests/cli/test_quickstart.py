"""The README's quick start, as a new user runs it: `igniter run policies/example.yaml` on a fresh
state directory serves real inference for every workload through the gateway, with no hand work.

The example policy is copied with only what two runs on one machine cannot share changed: the
gateway's port, the instances' port range and the lease's lock directory. HOME is the test's own,
so nothing is written outside tmp_path. Every workload answers tritonclient through the gateway
with the output torch computes from the sample model `igniter run` wrote beside the state file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
import yaml

from autoscaler.fleet.samples import SAMPLE_MARK
from tests.kit import web
from tests.kit.agent import free_port
from tests.kit.control import REPO
from tests.kit.fleet import free_base
from tests.loop.test_service import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ITEMS = 4  # per request: past the batch of every server the example plans (agents' max_request_items: 64)


class Run:
    """`igniter run POLICY` in its own HOME, and `igniter down` once it is stopped."""

    def __init__(self, tmp_path: Path) -> None:
        policy = yaml.safe_load((REPO / "policies" / "example.yaml").read_text())
        policy["gateway"] = {"listen": f"127.0.0.1:{free_port()}"}
        policy["provider"] = {"base_port": free_base(500)}
        policy["leader"] = {"lock_dir": str(tmp_path / "locks")}
        self.policy = tmp_path / "example.yaml"
        self.policy.write_text(yaml.safe_dump(policy), encoding="utf-8")
        self.gateway = policy["gateway"]["listen"]
        self.status = f"127.0.0.1:{free_port()}"
        self.state = tmp_path / "state" / "example.sqlite"
        self.env = {**os.environ, "HOME": str(tmp_path / "home")}
        self.log = tmp_path / "run.log"
        argv = ["run", str(self.policy), "--state", str(self.state), "--status-listen", self.status]
        self.proc = subprocess.Popen(self._cmd(*argv), cwd=tmp_path, env=self.env, stderr=open(self.log, "wb"))

    def _cmd(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "autoscaler", *argv]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)

    def down(self) -> subprocess.CompletedProcess[str]:
        cmd = self._cmd("down", str(self.policy), "--state", str(self.state))
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    r = Run(tmp_path)
    try:
        yield r
    finally:
        r.stop()
        r.down()


def test_the_example_policy_serves_every_workload_through_the_gateway(run: Run) -> None:
    import tritonclient.http as triton

    policy = yaml.safe_load(run.policy.read_text())
    workloads = {w["name"]: w["model"] for w in policy["workloads"]}
    client = triton.InferenceServerClient(url=run.gateway)
    for name in workloads:  # four instances, five servers, each loading torch: a minute or two here
        wait_for(lambda n=name: client.is_model_ready(n), 300, f"{name} to be ready through the gateway")
    models = run.state.parent / "models"
    for name, model in workloads.items():
        assert (models / model / SAMPLE_MARK).is_file(), f"no sample model for {model} under {models}"
        scripted = torch.jit.load(str(models / model / "model.pt"))
        meta = client.get_model_metadata(name)
        inputs, wanted = [], []
        rng = np.random.default_rng(7)
        for spec in meta["inputs"]:  # 4 items: more than the batch of any of the example's servers
            # (it plans ssd-a on two, at batch 3 and at 1); each takes it whole
            x = rng.standard_normal([ITEMS, *spec["shape"][1:]]).astype(np.float32)
            inp = triton.InferInput(spec["name"], list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            inputs.append(inp)
            wanted.append(torch.from_numpy(x))
        with torch.no_grad():
            out = scripted(*wanted)
        expected = out if isinstance(out, tuple) else (out,)
        for _ in range(3):  # the gateway spreads them over the workload's servers
            result = client.infer(name, inputs)
            for spec, want in zip(meta["outputs"], expected):
                np.testing.assert_allclose(result.as_numpy(spec["name"]), want.numpy(), rtol=1e-4, atol=1e-5)
    ok = wait_for(lambda: web.get(f"http://{run.status}/healthz", timeout=5).json()["status"] == "ok", 60, "ok")
    assert ok and web.get(f"http://{run.status}/readyz", timeout=5).text == "ok\n"
    assert "wrote sample models for alexnet, resnet50, ssd, vgg19" in run.log.read_text()
    client.close()  # as the README's curl does: an idle keep-alive connection holds haproxy's soft stop (10 s)
    run.stop()
    assert run.proc.returncode == 0
    down = run.down()
    assert down.returncode == 0 and re.search(r"(\d+) of \1 instance\(s\) terminated", down.stderr), down.stderr
    with pytest.raises(httpx.ConnectError):
        web.get(f"http://{run.gateway}/v2/health/ready", timeout=5)
