"""Policy variations a what-if replay asks for: spot prices where the policy has none, another
on-demand floor. Pure: a policy in, a policy out (validated like the file it came from)."""

from __future__ import annotations

from autoscaler.config.policy import Policy


def with_spot(policy: Policy, price_ratio: float | None = None, floor: float | None = None) -> Policy:
    """`policy` with spot_price_per_hour = price_ratio x price_per_hour on every type that has no
    spot price (a spot market at a fixed discount, e.g. 0.35), and/or min_on_demand_fraction =
    `floor` for every workload (the policy-wide setting, and each workload's own)."""
    data = policy.model_dump(exclude={"source"})
    if price_ratio is not None:
        for t in data["instance_types"]:
            if t.get("spot_price_per_hour") is None:
                t["spot_price_per_hour"] = round(t["price_per_hour"] * price_ratio, 6)
    if floor is not None:
        data["scaling"]["spot"]["min_on_demand_fraction"] = floor
        for w in data["workloads"]:
            w["min_on_demand_fraction"] = None
    return Policy.model_validate({**data, "source": policy.source})
