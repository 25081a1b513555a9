"""Offerings: an instance type bought on-demand or as spot. Pure; the names every layer shares.

A type with a spot price (and scaling.spot enabled) is two offerings. One string names each, so
unavailability, caps and prices can be keyed by it: the type's own name on-demand, `<type>@spot`
for spot ('@' is not allowed in policy names, so the two never collide with a real type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from autoscaler.config.policy import Policy

CapacityType = Literal["on-demand", "spot"]
ON_DEMAND: CapacityType = "on-demand"
SPOT: CapacityType = "spot"
SPOT_SUFFIX = "@spot"


def offering_key(instance_type: str, capacity_type: str = ON_DEMAND) -> str:
    """The type itself on-demand, `<type>@spot` for spot: a spot capacity error never caps the
    type's on-demand offering, nor the other way round."""
    return instance_type if capacity_type == ON_DEMAND else instance_type + SPOT_SUFFIX


def offering_prices(policy: Policy) -> dict[str, float]:
    """$/h of every offering the policy may buy, keyed by offering_key (spot only where it buys spot)."""
    out = {t.name: t.price_per_hour for t in policy.instance_types}
    if policy.buys_spot():
        out |= {
            offering_key(t.name, SPOT): t.spot_price_per_hour
            for t in policy.instance_types
            if t.spot_price_per_hour is not None
        }
    return out
