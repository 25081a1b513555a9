"""`igniter run POLICY [--once] [--state FILE]`: the autoscaler control loop.

Exit codes: 0 ok (for --once: the tick ran without error); 1 internal error or a failed --once
tick; 2 bad input (`FILE: field.path: message`, no traceback).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from autoscaler.config.errors import InputError

DESCRIPTION = """Autoscale a GPU inference fleet: every scaling.interval_s observe the rates and the fleet,
forecast, plan with the planner and converge the fleet (EC2 or processes on this machine).
SIGTERM finishes the tick in progress and exits; SIGHUP (or editing the file) reloads the policy."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `run` subcommand to the igniter CLI."""
    p = subparsers.add_parser("run", help="run the autoscaler control loop", description=DESCRIPTION)
    p.add_argument("policy", type=Path, help="policy YAML")
    p.add_argument("--once", action="store_true", help="run exactly one tick and exit")
    p.add_argument("--state", type=Path, help="SQLite state file (default ~/.local/state/igniter/<fleet>.sqlite)")
    p.add_argument(
        "--status-port",
        type=int,
        default=None,
        help="status HTTP port on 127.0.0.1 (default scaling.status_port; 0 picks a free port)",
    )
    p.add_argument("--no-status", action="store_true", help="do not serve the status endpoint")
    p.add_argument(
        "--log-level",
        default=None,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level on stderr (default INFO; `igniter -v` means DEBUG)",
    )
    p.set_defaults(func=cmd_run, handler=cmd_run)
    return p


def cmd_run(args: argparse.Namespace) -> int:
    """Dispatch; InputError propagates to the CLI's handler (exit 2, no traceback)."""
    if args.log_level:
        logging.getLogger().setLevel(args.log_level)
    for noisy in ("botocore", "boto3", "urllib3", "paramiko", "apscheduler.executors", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return _once(args) if args.once else _serve(args)


def _state_path(args: argparse.Namespace) -> Path:
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.wiring import default_state_path

    return args.state if args.state is not None else default_state_path(load_policy(args.policy))


def _once(args: argparse.Namespace) -> int:
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.wiring import build_controller

    controller = build_controller(load_policy(args.policy), _state_path(args))
    try:
        report = controller.tick()
    finally:
        controller.deps.transport.close()
        controller.store.close()
    print(
        f"tick {report.tick}: {report.decision or report.error}; "
        f"{len(report.outcome.done)} action(s) done, {len(report.outcome.failed)} failed",
        file=sys.stderr,
    )
    return 0 if report.ok else 1


def _serve(args: argparse.Namespace) -> int:
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.service import Service

    policy = load_policy(args.policy)
    port = (
        None if args.no_status else (args.status_port if args.status_port is not None else policy.scaling.status_port)
    )
    return Service(args.policy, _state_path(args), port).run()


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m autoscaler.cli.run POLICY ...`), equivalent to `igniter run`."""
    parser = argparse.ArgumentParser(prog="igniter")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["run", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except InputError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Exception as exc:  # the last resort: one line, exit 1
        print(f"igniter run: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
