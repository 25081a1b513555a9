"""`igniter down POLICY [--state FILE]`: tear a fleet down.

Terminates every instance that carries the fleet's tag (whatever the state file says: ownership
is by tag) and stops its gateway. With the local provider this is how a local fleet is stopped
cleanly: its `igniter-agent` processes (and their servers) and its haproxy outlive `igniter run`
on purpose, as VMs would. Stop `igniter run` first, or it launches the fleet again.

Exit codes: 0 every instance was terminated and the gateway stopped; 1 something could not be;
2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DESCRIPTION = """Terminate every instance of the fleet (by its igniter:fleet tag) and stop its gateway.
Stop `igniter run` first: a running autoscaler would launch the fleet again."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "down", help="terminate the fleet's instances and stop its gateway", description=DESCRIPTION
    )
    p.add_argument("policy", type=Path, help="policy YAML")
    p.add_argument("--state", type=Path, help="SQLite state file (default ~/.local/state/igniter/<fleet>.sqlite)")
    p.set_defaults(func=cmd_down)
    return p


def cmd_down(args: argparse.Namespace) -> int:
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.service.wiring import default_state_path, make_gateway, make_provider

    policy = load_policy(args.policy)
    state = args.state if args.state is not None else default_state_path(policy)
    provider = make_provider(policy, state)
    failed = _terminate_all(provider)
    gateway = make_gateway(policy, state, provider)
    if gateway is not None:
        try:
            running = getattr(gateway, "running", None)  # a local haproxy knows; gateway hosts always run
            was_running = running() if callable(running) else True
            gateway.stop()
            said = "gateway stopped" if was_running else "no gateway was running"
            print(f"{said} ({policy.gateway.listen})", file=sys.stderr)
        except Exception as exc:
            print(f"error: could not stop the gateway: {exc}", file=sys.stderr)
            failed += 1
        finally:
            gateway.close()
    return 1 if failed else 0


def _terminate_all(provider: Any) -> int:
    """Terminate every listed instance; the number that failed."""
    failed = 0
    instances = provider.list_instances()
    for inst in instances:
        try:
            provider.terminate(inst.id)
            print(f"terminated {inst.id} ({inst.slot}, {inst.instance_type})", file=sys.stderr)
        except Exception as exc:
            print(f"error: could not terminate {inst.id}: {exc}", file=sys.stderr)
            failed += 1
    if instances:
        print(f"{len(instances) - failed} of {len(instances)} instance(s) terminated", file=sys.stderr)
    else:
        print("no instance of the fleet was running", file=sys.stderr)
    closer = getattr(provider, "close", None)
    if closer is not None:
        closer()
    return failed
