"""MIG planning: segments from measured rows, slices packed at valid starts (docs/planner.md)."""

from autoscaler.planner.mig.plan import lower_bound_gpus, plan_mig

__all__ = ["lower_bound_gpus", "plan_mig"]
