"""End to end on this machine: the local provider runs real `igniter-agent run --no-gpu` processes,
the local transport configures them, the servers answer real KServe v2 requests, directly and
through the fleet's gateway (a real haproxy). Two workloads, a rate step up then down; the fleet
and the gateway follow."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from autoscaler.config.policy import load_policy
from autoscaler.core.fleet.lifecycle import State
from autoscaler.fleet.local import LocalProvider
from autoscaler.loop.service.wiring import build_controller, default_planner
from autoscaler.loop.tick.controller import Controller
from autoscaler.rates.reader import RateReader
from autoscaler.rates.static import ManualRates
from autoscaler.transport.base import parse_status
from tests.kit import web
from tests.kit.agent import free_port
from tests.kit.control import write_policy
from tests.kit.fleet import free_base

pytestmark = pytest.mark.e2e


LOW = {"alex": 100.0, "res": 50.0}


def high_rates(policy: Any) -> dict[str, float]:
    """Rates that need more instances than LOW, but few (each instance is a real process tree)."""
    low = len(default_planner(policy, LOW, {}, {}, None).instances)
    for scale in (2, 4, 8, 16, 32, 64):
        rates = {w: r * scale for w, r in LOW.items()}
        n = len(default_planner(policy, rates, {}, {}, None).instances)
        if n > low:
            assert n <= low + 3, f"the step to {rates} needs {n} instances: too many for this test"
            return rates
    raise AssertionError("no rate step needs more instances")


@pytest.fixture()
def fleet(tmp_path: Path, tiny_model_dir: Path) -> Iterator[tuple[Controller, ManualRates]]:
    path = write_policy(
        tmp_path / "policy.yaml",
        fleet="e2e",
        instance_types=[{"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06}],
        workloads=[
            {
                "name": "alex",
                "model": "alexnet",
                "slo_ms": 15,
                "rate_rps": LOW["alex"],
                "model_dir": str(tiny_model_dir),
            },
            {
                "name": "res",
                "model": "resnet50",
                "slo_ms": 40,
                "rate_rps": LOW["res"],
                "model_dir": str(tiny_model_dir),
            },
        ],
        provider={"kind": "local", "base_port": free_base(400), "state_root": str(tmp_path / "instances")},
        agents={"transport": "local", "command_timeout_s": 30},
        scaling={"interval_s": 1, "headroom": 0.0, "forecast": "last", "scale_down_delay_s": 0},
        gateway={
            "kind": "haproxy",
            "listen": f"127.0.0.1:{free_port()}",
            "check_interval_s": 0.3,
            "drain_timeout_s": 5,
        },
    )
    ctl = build_controller(load_policy(path), tmp_path / "state.sqlite")
    rates = ManualRates(LOW)
    ctl.deps.rates = RateReader(rates, 300)
    try:
        yield ctl, rates
    finally:
        provider = ctl.deps.provider
        for inst in provider.list_instances():
            provider.terminate(inst.id)
        assert provider.list_instances() == []
        assert ctl.deps.gateway is not None
        ctl.deps.gateway.stop()
        ctl.store.close()


def servers(ctl: Controller) -> dict[str, tuple[str, int]]:
    """Server name -> (workload, port) for what the agents were last told to run."""
    instances = {i.id: i for i in ctl.deps.provider.list_instances()}
    applied = ctl.store.applied()
    out = {}
    for rec in ctl.store.open_records():
        inst = instances.get(rec.instance_id or "")
        if inst is None or rec.key not in applied:
            continue
        base = int(inst.tags["igniter:port_base"])
        out.update({s.name: (s.workload, base + s.index) for s in applied[rec.key][1]})
    return out


def converged(ctl: Controller) -> bool:
    """Every slot of the layout is ready and its agent reports exactly the layout's servers ready."""
    layout = ctl.store.current_layout()
    recs = {r.slot: r for r in ctl.store.open_records()}
    if layout is None or set(recs) != {s.slot for s in layout.slots}:
        return False
    instances = {i.id: i for i in ctl.deps.provider.list_instances()}
    for spec in layout.slots:
        rec = recs[spec.slot]
        if rec.state is not State.READY or rec.instance_id not in instances:
            return False
        status = parse_status(ctl.deps.transport.status(instances[rec.instance_id]))
        if status.ready_names() != {s.name for s in spec.servers} or len(status.servers) != len(spec.servers):
            return False
    gateway = ctl.deps.gateway.observe()  # type: ignore[union-attr]
    return gateway.serving() == {s.name for _, s in layout.servers()} and len(gateway.servers) == len(layout.servers())


def run_until_converged(ctl: Controller, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = ctl.tick()
        assert report.ok, report.error
        if converged(ctl):
            return
        time.sleep(0.5)
    raise AssertionError(f"fleet did not converge; last actions: {ctl.store.actions()[-5:]}")


def answers(ctl: Controller, model_dir: Path) -> None:
    """Each server answers a real inference request with the tiny model's output (torch's own)."""
    x = [float(i) / 8 for i in range(8)]
    with torch.no_grad():
        want = torch.jit.load(str(model_dir / "model.pt"))(torch.tensor([x])).flatten().tolist()
    for name, (workload, port) in servers(ctl).items():
        reply = web.post(
            f"http://127.0.0.1:{port}/v2/models/{workload}/infer",
            timeout=20,
            json={"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": x}]},
        )
        assert reply.status_code == 200, (name, reply.text)
        out = reply.json()["outputs"][0]
        assert out["shape"] == [1, 4] and out["data"] == pytest.approx(want, abs=1e-5)
    listen = ctl.policy.gateway.listen
    for workload in ("alex", "res"):
        reply = web.post(
            f"http://{listen}/v2/models/{workload}/infer",
            timeout=20,
            json={"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.5] * 8}]},
        )
        assert reply.status_code == 200, (workload, reply.text)
    assert web.get(f"http://{listen}/v2/health/ready", timeout=5).status_code == 200


def test_fleet_follows_a_rate_step_up_then_down(fleet: tuple[Controller, ManualRates], tiny_model_dir: Path) -> None:
    ctl, rates = fleet
    torch.manual_seed(0)
    run_until_converged(ctl)
    low_slots = {s.slot for s in ctl.store.current_layout().slots}  # type: ignore[union-attr]
    answers(ctl, tiny_model_dir)
    assert {w for w, _ in servers(ctl).values()} == {"alex", "res"}

    rates.set(**high_rates(ctl.policy))
    run_until_converged(ctl)
    high_slots = {s.slot for s in ctl.store.current_layout().slots}  # type: ignore[union-attr]
    assert len(high_slots) > len(low_slots) and low_slots <= high_slots  # scale-out keeps what runs
    assert len(ctl.deps.provider.list_instances()) == len(high_slots)
    answers(ctl, tiny_model_dir)

    rates.set(**LOW)
    run_until_converged(ctl)
    final = {s.slot for s in ctl.store.current_layout().slots}  # type: ignore[union-attr]
    assert len(final) == len(low_slots)
    assert {i.slot for i in ctl.deps.provider.list_instances()} == final
    answers(ctl, tiny_model_dir)
    reasons = [h["reason"] for h in ctl.store.history()]
    assert "drain" in reasons and "scale_in" in reasons and "gone" in reasons
    assert isinstance(ctl.deps.provider, LocalProvider)
