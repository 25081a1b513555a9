"""`igniter validate POLICY...`: check policies and say what is wrong, naming file and field."""

from __future__ import annotations

import argparse
import sys

from autoscaler.config.errors import InputError
from autoscaler.config.policy import Policy, load_policy
from autoscaler.planner import TooManyInstances, planning_inputs
from autoscaler.planner.limits import as_input_error, check_bound


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="validate one or more policy files")
    p.add_argument("policies", nargs="+", metavar="POLICY")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate every file; report each error, exit 2 if any failed."""
    failed = 0
    for path in args.policies:
        try:
            policy = load_policy(path)
            check_size(policy)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{path}: ok ({len(policy.workloads)} workloads, {len(policy.instance_types)} instance types)")
    return 2 if failed else 0


def check_size(policy: Policy) -> None:
    """The policy's own rates must not need more instances than it allows (a cheap lower bound)."""
    try:
        check_bound(*planning_inputs(policy), policy.scaling.instance_limit)
    except TooManyInstances as exc:
        raise as_input_error(policy, exc) from None
