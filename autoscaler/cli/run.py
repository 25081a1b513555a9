"""`igniter run POLICY [--once] [--state FILE]`: the autoscaler control loop.

Exit codes: 0 ok (for --once: the tick ran without error, or this process is a standby and did
nothing); 1 internal error or a failed --once tick (a gateway that could not be started or
reached fails it too); 2 bad input (`FILE: field.path: message`, no
traceback), a bad state file included (`STATE: what is wrong; what to do`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import agents.logs as logs
from autoscaler.config.errors import InputError

DESCRIPTION = """Autoscale a GPU inference fleet: every scaling.interval_s observe the rates and the fleet,
forecast, plan with the planner and converge the fleet (EC2 or processes on this machine).
SIGTERM finishes the tick in progress and exits; SIGHUP (or editing the file) reloads the policy.
One process per fleet leads (policy `leader`); any other is a standby that acts on nothing and
takes over when the leader goes."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `run` subcommand to the igniter CLI."""
    p = subparsers.add_parser("run", help="run the autoscaler control loop", description=DESCRIPTION)
    p.add_argument("policy", type=Path, help="policy YAML")
    p.add_argument("--once", action="store_true", help="run exactly one tick and exit")
    p.add_argument("--state", type=Path, help="SQLite state file (default ~/.local/state/igniter/<fleet>.sqlite)")
    p.add_argument(
        "--status-listen",
        default=None,
        metavar="HOST:PORT",
        help="status endpoint address (default scaling.status_listen, 127.0.0.1:9464); HOST: loopback or private",
    )
    p.add_argument(
        "--status-port",
        type=int,
        default=None,
        help="status port on 127.0.0.1 (the older form of --status-listen; 0 picks a free port)",
    )
    p.add_argument("--no-status", action="store_true", help="do not serve the status endpoint")
    p.add_argument(
        "--advisory",
        action="store_true",
        help="read the fleet and publish what would be done (/v1/advice, the log), change nothing, take no lease "
        "(default state file: <fleet>.advisory.sqlite beside the autoscaler's)",
    )
    p.add_argument(
        "--log-level",
        default=None,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level on stderr (default INFO; `igniter -v` means DEBUG)",
    )
    from autoscaler.cli import add_log_format

    add_log_format(p, default=argparse.SUPPRESS)  # `igniter run POLICY --log-format json` as well as before `run`
    p.set_defaults(func=cmd_run, handler=cmd_run)
    return p


def cmd_run(args: argparse.Namespace) -> int:
    """Dispatch; InputError propagates to the CLI's handler (exit 2, no traceback)."""
    if args.log_level:
        logging.getLogger().setLevel(args.log_level)
    if args.once and args.advisory:
        raise InputError("command line", "--advisory", "runs until stopped; give it without --once")
    return _once(args) if args.once else _serve(args)


def _state_path(args: argparse.Namespace) -> Path:
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.service.wiring import default_state_path

    return args.state if args.state is not None else default_state_path(load_policy(args.policy))


def _once(args: argparse.Namespace) -> int:
    """One tick, as the leader only: a standby says who leads and does nothing (exit 0)."""
    import time

    from autoscaler.config.policy import load_policy
    from autoscaler.leader.base import Fence, LeaseError
    from autoscaler.loop.service.wiring import build_controller, make_leadership

    policy = load_policy(args.policy)
    logs.set_fleet(policy.fleet)
    fence = Fence(time.monotonic)
    controller = build_controller(policy, _state_path(args), fence=fence)
    leadership = make_leadership(policy, fence)
    try:
        if not _lead(args, policy, leadership):
            print(f"standby: {leadership.snapshot()['note']}; this --once run did nothing", file=sys.stderr)
            return 0
        report = controller.tick()
    except LeaseError as exc:
        field = "leader.table" if policy.leader.kind == "dynamodb" else "leader.lock_dir"
        raise InputError(args.policy, field, str(exc)) from None
    finally:
        leadership.stop()
        controller.deps.transport.close()
        if controller.deps.gateway is not None:
            controller.deps.gateway.close()
        controller.store.close()
    print(
        f"tick {report.tick}: {report.decision or report.error}; "
        f"{len(report.outcome.done)} action(s) done, {len(report.outcome.failed)} failed",
        file=sys.stderr,
    )
    gateway = report.gateway.error if report.gateway is not None else None
    if gateway:  # the tick's other work went through, but clients are not served: not a success
        print(f"gateway: {gateway}", file=sys.stderr)
    return 0 if report.ok and not gateway else 1


def _lead(args: argparse.Namespace, policy: Any, leadership: Any) -> bool:
    """Take the lease if it is free or abandoned: a DynamoDB lease nobody renews is taken after
    lease_s; one renewed meanwhile proves a live leader, and --once stops waiting."""
    leadership.attempt(strict=True)
    if leadership.fence.held:
        return True
    wait = policy.leader.lease_s + 2 * leadership.poll_s if policy.leader.kind == "dynamodb" else 0.0
    return bool(wait) and leadership.wait_for_term(wait)


def _serve(args: argparse.Namespace) -> int:
    from autoscaler.config.policy import load_policy
    from autoscaler.loop.service.scheduler import Service

    policy = load_policy(args.policy)
    logs.set_fleet(policy.fleet)
    state = _state_path(args)
    if args.advisory and args.state is None:
        state = state.with_suffix(".advisory.sqlite")  # beside the autoscaler's: the same local fleet and gateway
    bind = None if args.no_status else status_bind(args, policy)
    if args.advisory:
        _say_if_no_gateway(policy, state)
    return Service(args.policy, state, bind, advisory=args.advisory).run()


def _say_if_no_gateway(policy: Any, state: Path) -> None:
    """Advisory mode reads a fleet another `igniter run` drives; with no local gateway running,
    every tick's gateway steps fail ("2 failed"), which says nothing of why: say it once, first."""
    from autoscaler.gateway.local import LocalHaproxy
    from autoscaler.loop.service.wiring import gateway_dir

    if policy.gateway.kind == "none" or policy.gateway.remote:
        return
    where = gateway_dir(policy, state)
    if not LocalHaproxy(where, policy.gateway.haproxy_command).running():
        logging.getLogger("igniter").warning(
            "advisory: no gateway is running for fleet %s (none in %s): nothing to advise beside; start "
            "`igniter run %s` first (with the same state directory). Until then each tick's gateway steps fail",
            policy.fleet,
            where,
            policy.source or "POLICY",
        )


def status_bind(args: argparse.Namespace, policy: Any) -> Any:
    """Where the status endpoint listens (flag, then policy, then 127.0.0.1:9464) and its token."""
    from autoscaler.config.listen import parse_listen
    from autoscaler.loop.service.scheduler import StatusBind

    token = _token(args.policy, policy.scaling.status_token_file, policy)
    if args.status_listen is not None:
        try:
            host, port = parse_listen(args.status_listen)
        except ValueError as exc:
            raise InputError("command line", "--status-listen", str(exc)) from None
        return StatusBind(host=host, port=port, field="--status-listen", token=token)
    if args.status_port is not None:
        return StatusBind(port=args.status_port, field="scaling.status_port", token=token)
    host, port = policy.scaling.status_address
    field = "scaling.status_port" if policy.scaling.status_port is not None else "scaling.status_listen"
    return StatusBind(host=host, port=port, field=field, token=token)


def _token(source: Path, path: str | None, policy: Any) -> str | None:
    """The bearer token /v1/* requires: the first line of scaling.status_token_file."""
    if path is None:
        return None
    file = Path(path).expanduser()
    file = file if file.is_absolute() else (policy.source or source).parent / file
    try:
        token = file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, "scaling.status_token_file", f"cannot read {file}: {exc}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise InputError(
            source, "scaling.status_token_file", f"{file}: the token must be one word of at least 16 characters"
        )
    if file.stat().st_mode & 0o077:
        logging.getLogger(__name__).warning("%s is readable by others: chmod 600 it", file)
    return token


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m autoscaler.cli.run POLICY ...`), equivalent to `igniter run`."""
    parser = argparse.ArgumentParser(prog="igniter")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["run", *(sys.argv[1:] if argv is None else argv)])
    logs.configure(getattr(args, "log_format", "text"))
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
