"""The planner: pure functions from (demands, instance types, fitted models[, current plan]) to a Plan.

`make_plan` runs a named planner (`PLANNERS`: igniter, ffd, gslice, gpulets, exact); `check_plan`
re-checks any plan against the model; `planning_inputs` turns a policy into planner inputs.
See docs/planner.md for the algorithms and what each extension buys.
"""

from autoscaler.planner.api import EXTRA, PLANNERS, make_plan, planning_inputs
from autoscaler.planner.check import check_plan
from autoscaler.planner.exact import TooLarge
from autoscaler.planner.limits import TooManyInstances
from autoscaler.planner.types import Demand, GpuOut, InstanceOption, InstanceOut, PlacementOut, Plan, Unplaced

__all__ = [
    "EXTRA",
    "PLANNERS",
    "Demand",
    "GpuOut",
    "InstanceOption",
    "InstanceOut",
    "PlacementOut",
    "Plan",
    "TooLarge",
    "TooManyInstances",
    "Unplaced",
    "check_plan",
    "make_plan",
    "planning_inputs",
]
