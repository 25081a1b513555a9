"""Spot capacity on EC2 through boto3, against moto's server mode on 127.0.0.1.

Agents are never contacted (`agents.transport: none`): moto gives instances 10.x addresses.
Capacity errors are injected on the provider's real boto3 client (botocore's before-call hook),
since moto never answers with one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from autoscaler.config.policy import load_policy
from autoscaler.fleet.base import TAG_CAPACITY, TAG_FLEET, TAG_SLOT
from autoscaler.loop.wiring import default_planner
from tests.fleet.test_ec2 import WORKLOADS, controller, fleet_instances, setup_templates, tags
from tests.kit.backends import Moto
from tests.kit.control import Clock, write_policy

TYPES = [
    {"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06, "spot_price_per_hour": 1.071},
    {"name": "p3.8xlarge", "gpu": "v100", "gpus": 4, "price_per_hour": 12.24, "spot_price_per_hour": 4.284},
]


def spot_policy(tmp_path: Path, moto: Moto, **spot: Any) -> Path:
    return write_policy(
        tmp_path / "policy.yaml",
        fleet="prod",
        instance_types=TYPES,
        workloads=WORKLOADS,
        provider={
            "kind": "ec2",
            "region": "us-east-1",
            "endpoint_url": moto.url,
            "launch_templates": {"p3.2xlarge": "gpu-p3", "p3.8xlarge": "gpu-p3-big"},
        },
        agents={"transport": "none"},
        scaling={
            "interval_s": 30,
            "headroom": 0.0,
            "forecast": "last",
            "scale_down_delay_s": 0,
            "spot": {"min_on_demand_fraction": 0.3, **spot},
        },
    )


class RunRequests:
    """The RunInstances parameters the provider's real client sends (after botocore's validation)."""

    def __init__(self, client: Any) -> None:
        self.params: list[dict[str, Any]] = []
        client.meta.events.register("before-call.ec2.RunInstances", self._record)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.params.append(params["body"])


def test_a_spot_launch_carries_the_market_options_and_tags(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    ctl, _calls, _ = controller(spot_policy(tmp_path, moto), tmp_path / "state.sqlite", Clock())
    sent = RunRequests(ctl.deps.provider.client)  # type: ignore[attr-defined]
    report = ctl.tick()
    assert report.ok and report.layout is not None
    spot_slots = {s.slot for s in report.layout.slots if s.capacity_type == "spot"}
    od_slots = {s.slot for s in report.layout.slots if s.capacity_type == "on-demand"}
    assert spot_slots and od_slots and all("-spot-" in s for s in spot_slots)
    by_slot = {_tag(p, TAG_SLOT): p for p in sent.params}
    for slot in spot_slots:
        p = by_slot[slot]
        assert p["InstanceMarketOptions.MarketType"] == "spot"
        assert p["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time"
        assert p["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"
        assert _tag(p, TAG_CAPACITY) == "spot" and _tag(p, TAG_FLEET) == "prod"
    for slot in od_slots:
        assert not any(k.startswith("InstanceMarketOptions") for k in by_slot[slot])
        assert _tag(by_slot[slot], TAG_CAPACITY) == "on-demand"
    running = {tags(i)[TAG_SLOT]: i for i in fleet_instances(moto)}
    assert set(running) == spot_slots | od_slots
    assert {s for s, i in running.items() if i.get("InstanceLifecycle") == "spot"} == spot_slots
    assert {s for s, i in running.items() if tags(i)[TAG_CAPACITY] == "spot"} == spot_slots
    records = {r.slot: r.capacity_type for r in ctl.store.open_records()}
    assert {s for s, c in records.items() if c == "spot"} == spot_slots


def _tag(params: dict[str, Any], key: str) -> str | None:
    """A tag's value from RunInstances' flattened query parameters."""
    for k, v in params.items():
        if k.startswith("TagSpecification.1.Tag.") and k.endswith(".Key") and v == key:
            return params[k[: -len("Key")] + "Value"]
    return None


def test_an_injected_spot_capacity_error_replans_on_on_demand_in_the_same_tick(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    path = spot_policy(tmp_path, moto)
    policy = load_policy(path)
    rates = {w.name: w.rate_rps for w in policy.workloads}
    first = default_planner(policy, rates, {}, {}, None)
    spot_types = Counter(i.instance_type for i in first.instances if i.capacity_type == "spot")
    assert spot_types
    ctl, _calls, _ = controller(path, tmp_path / "state.sqlite", Clock())
    refused: list[str] = []

    def no_spot(params: dict[str, Any], **_: Any) -> None:
        body = params["body"]
        if body.get("InstanceMarketOptions.MarketType") == "spot":
            refused.append(body["InstanceType"])
            code = "InsufficientInstanceCapacity" if len(refused) % 2 else "SpotMaxPriceTooLow"
            raise ClientError({"Error": {"Code": code, "Message": "no spot capacity (injected)"}}, "RunInstances")

    ctl.deps.provider.client.meta.events.register("before-call.ec2.RunInstances", no_spot)  # type: ignore[attr-defined]
    report = ctl.tick()
    assert report.ok and report.rounds >= 2 and report.layout is not None, report.outcome.failed
    assert refused and report.outcome.errors.get("capacity") == len(refused)
    assert all(s.capacity_type == "on-demand" for s in report.layout.slots)
    running = fleet_instances(moto)
    assert running and not any(i.get("InstanceLifecycle") == "spot" for i in running)
    assert Counter(i["InstanceType"] for i in running) == Counter(s.instance_type for s in report.layout.slots)
    unavailable = ctl.current_state().unavailable
    assert {f"{t}@spot" for t in refused} <= set(unavailable)
    assert not set(unavailable) & {t["name"] for t in TYPES}  # the on-demand offerings stay available
    assert sum(report.layout.capacity().values()) >= sum(rates.values()) * 0.999
