"""`igniter-agent`'s commands: run | apply | status | profile (the entry point is agents/cli.py).

Exit codes: 0 ok; 1 internal error (or a wait that did not succeed); 2 bad input, printed as
`FILE: field.path: what is wrong` with no traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from pydantic import ValidationError

from agents import logs, version
from agents.errors import InputError
from agents.exits import failed
from agents.node import status as status_mod
from agents.node.apply import apply_assignment
from agents.node.daemon import AgentLocked, Daemon, lock_state_dir
from agents.node.gpu import GpuMonitor, NoGpu, NvmlMonitor
from agents.node.mig import MigManager
from agents.node.mig_device import MigError, NvmlMig, Slice
from agents.node.mig_fake import FAKE_FILE, FakeMig
from agents.node.mig_geometry import GEOMETRIES
from agents.node.mps import Mps, NoMps, NvidiaMps, SliceDirsOnly
from agents.node.mps_fake import FakeMps
from agents.node.supervisor import RestartPolicy
from agents.node.zygote import STARTS, forks
from agents.spec import ServerLimits


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="igniter-agent", description="Runs MPS-partitioned inference servers on a GPU VM."
    )
    parser.add_argument("--version", action="version", version=f"igniter-agent {version()}")
    _log_format(parser, "text")
    _fake_mps(parser, False)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the agent daemon (foreground; systemd runs it)")
    _log_format(run, argparse.SUPPRESS)
    _fake_mps(run, argparse.SUPPRESS)
    run.add_argument("--state-dir", type=Path, required=True)
    run.add_argument("--no-gpu", action="store_true", help="run servers on the CPU even where a GPU exists")
    run.add_argument(
        "--fake-mig",
        metavar="GPU",
        help=f"with --no-gpu: cut fake MIG slices of this GPU ({', '.join(GEOMETRIES)}), kept in DIR/{FAKE_FILE}",
    )
    run.add_argument("--fake-gpus", type=int, default=1, help="how many fake MIG GPUs (default 1)")
    run.add_argument(
        "--server-start",
        choices=STARTS,
        default="auto",
        help="fork servers from a process that imported torch once, or exec each; auto (default): fork on a "
        "CPU node, exec on a GPU node (agents/node/zygote.py)",
    )
    run.add_argument("--interval", type=float, default=0.5, help="seconds between loops (default 0.5)")
    run.add_argument(
        "--backoff-initial", type=float, default=1.0, help="first restart delay in seconds (doubles, at most 30)"
    )
    limits = ServerLimits()
    for flag, default, what in (
        ("--drain-timeout", limits.drain_timeout_s, "seconds a removed server may take to answer what it holds"),
        ("--read-timeout", limits.read_timeout_s, "seconds a client has to send a whole request"),
        ("--idle-timeout", limits.idle_timeout_s, "seconds a connection may stay open without a request"),
        ("--max-connections", limits.max_connections, "open connections per server; past it requests get 503"),
        ("--max-header-kb", limits.max_header_kb, "KiB of request line and headers; past it requests get 431"),
        ("--max-request-items", limits.max_request_items, "items one request may carry (Triton's max_batch_size)"),
    ):
        run.add_argument(flag, type=type(default), default=default, help=f"{what} (default {default:g})")
    apply = sub.add_parser("apply", help="validate an assignment and hand it to the agent")
    apply.add_argument("--state-dir", type=Path, required=True)
    apply.add_argument("file", help="assignment JSON file, or - for stdin")
    apply.add_argument("--force", action="store_true", help="accept a generation that is not newer")
    apply.add_argument(
        "--skip-model-check", action="store_true", help="do not require model_dir/model.pt and model.yaml now"
    )
    apply.add_argument("--wait", type=float, metavar="SECONDS", help="then wait until every server is ready")
    stat = sub.add_parser("status", help="what the agent runs and how it is doing")
    stat.add_argument("--state-dir", type=Path, required=True)
    stat.add_argument("--json", action="store_true")
    prof = sub.add_parser("profile", help="measure a model's GPU profile (needs a real GPU)")
    prof.add_argument("--model-dir", type=Path, required=True)
    prof.add_argument("--out", type=Path, required=True)
    prof.add_argument("--model-name", help="name in the profile (default: the model directory's name)")
    prof.add_argument("--gpu-index", type=int, default=0)
    prof.add_argument("--seconds", type=float, default=3.0, help="measuring time per grid point")
    return parser


def _log_format(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default=default,
        help="stderr log lines: text (default) or json, one object per line (time, level, logger, message, fleet)",
    )


def _fake_mps(parser: argparse.ArgumentParser, default: object) -> None:
    """Before `run` too, so a configured agent command ("igniter-agent --fake-mps") can carry it."""
    parser.add_argument(
        "--fake-mps",
        action="store_true",
        default=default,
        help="with --no-gpu: a fake MPS daemon per GPU index whose crash kills its servers (tests)",
    )


def _hardware(args: argparse.Namespace) -> tuple[str, Mps, GpuMonitor]:
    """GPU mode when a GPU answers NVML and --no-gpu is absent; CPU mode otherwise."""
    if args.no_gpu:
        return "cpu", FakeMps(args.state_dir.resolve() / "mps") if args.fake_mps else NoMps(), NoGpu()
    monitor = NvmlMonitor()
    if not monitor.available():
        logging.getLogger("igniter-agent").warning("no GPU (%s); servers run on the CPU", monitor.error)
        monitor.close()
        return "cpu", NoMps(), NoGpu()
    return "cuda", NvidiaMps(args.state_dir.resolve() / "mps"), monitor


def _check_fake_mig(args: argparse.Namespace) -> None:
    """--fake-mig's input errors, before anything is created."""
    if args.fake_mig is None:
        return
    if args.fake_mig not in GEOMETRIES:
        raise InputError(
            "igniter-agent run", "--fake-mig", f"unknown GPU {args.fake_mig!r} (one of {', '.join(GEOMETRIES)})"
        )
    if not args.no_gpu:
        raise InputError("igniter-agent run", "--fake-mig", "needs --no-gpu (no GPU is behind fake slices)")
    if not 1 <= args.fake_gpus <= 16:
        raise InputError("igniter-agent run", "--fake-gpus", f"must be 1..16, got {args.fake_gpus}")
    path = args.state_dir / FAKE_FILE
    if path.exists():
        kind = FakeMig(path).describe().removeprefix("fake:")
        if kind != args.fake_mig:
            raise InputError(
                str(path), "kind", f"holds a fake {kind}, not {args.fake_mig}; use another state directory"
            )


def _mig(args: argparse.Namespace, device: str) -> MigManager | None:
    """The MIG manager: fake slices with --fake-mig, NVML's on a GPU machine, none on the CPU."""
    root = args.state_dir.resolve()
    if args.fake_mig is not None:
        fake = FakeMig.make(root / FAKE_FILE, args.fake_mig, args.fake_gpus)
        manager = MigManager(fake, root / "mig", lambda s: SliceDirsOnly(_slice_root(root, s), str(s.uuid)))
    elif device == "cuda":
        import pynvml

        try:
            nvml = NvmlMig(pynvml)
        except MigError as exc:
            logging.getLogger("igniter-agent").warning("MIG unavailable: %s", exc)
            return None
        manager = MigManager(nvml, root / "mig", lambda s: NvidiaMps(_slice_root(root, s), visible=str(s.uuid)))
    else:
        return None
    manager.adopt()
    return manager


def _slice_root(root: Path, s: Slice) -> Path:
    """A slice's MPS directories: short (MPS's Unix sockets have a 108-byte path limit)."""
    return root / "mps" / f"g{s.gpu}i{s.gi_id}"


AGENT_EXTRA = "pip install 'igniter-autoscaler[agent]'"


def _serving_unavailable() -> str | None:
    """Why this VM cannot run inference servers (they import torch), or None. Checked without
    importing torch: the agent itself never needs it, and the import costs seconds."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except ImportError:  # a finder that refuses it: as good as missing
        found = False
    if not found:
        return f"torch is not installed: install the agent extra ({AGENT_EXTRA})"
    return None


PRIVATE_UMASK = 0o077  # what run and apply create (and the servers and MPS daemon they start) is private


def _limits(args: argparse.Namespace) -> ServerLimits:
    """The servers' limits from the flags; a bad value is exit 2 naming the flag."""
    values = {
        "drain_timeout_s": args.drain_timeout,
        "read_timeout_s": args.read_timeout,
        "idle_timeout_s": args.idle_timeout,
        "max_connections": args.max_connections,
        "max_header_kb": args.max_header_kb,
        "max_request_items": args.max_request_items,
    }
    try:
        return ServerLimits(**values)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        flag = "--" + str(err["loc"][0]).removesuffix("_s").replace("_", "-")
        raise InputError("igniter-agent run", flag, err["msg"]) from None


def cmd_run(args: argparse.Namespace) -> int:
    limits = _limits(args)  # before anything is created: bad input changes nothing
    _check_fake_mig(args)
    if args.fake_mps and not args.no_gpu:
        raise InputError("igniter-agent run", "--fake-mps", "needs --no-gpu (no GPU is behind a fake MPS daemon)")
    os.umask(PRIVATE_UMASK)
    logs.configure(args.log_format)
    logs.set_fleet(os.environ.get("IGNITER_FLEET") or None)  # the node's cloud-init writes it to node.env
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # HUP too: a closed terminal stops cleanly
        signal.signal(signum, lambda *_: stop.set())
    lock = lock_state_dir(args.state_dir)
    device, mps, gpus = _hardware(args)
    policy = RestartPolicy(initial_backoff_s=args.backoff_initial)
    cannot_serve = _serving_unavailable()
    daemon = Daemon(
        args.state_dir.resolve(),
        mps,
        gpus,
        device,
        policy,
        limits=limits,
        mig=_mig(args, device),
        cannot_serve=cannot_serve,
        start=args.server_start,
    )
    logging.getLogger("igniter-agent").info(
        "pid %d, state dir %s, device %s, servers %s",
        os.getpid(),
        args.state_dir,
        device,
        "forked" if forks(args.server_start, device) else "exec'd",
    )
    if cannot_serve is not None:  # said once here; status.json repeats it on every server it refuses
        logging.getLogger("igniter-agent").error("%s; every assigned server is refused until then", cannot_serve)
    try:
        daemon.run(stop, args.interval)
    finally:
        lock.close()
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    os.umask(PRIVATE_UMASK)
    source = "<stdin>" if args.file == "-" else args.file
    try:  # bytes: the strict parser names the line where UTF-8 breaks instead of a decode traceback
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        raise InputError(source, "", f"cannot read: {exc.strerror or exc}") from None
    assignment, changed = apply_assignment(args.state_dir, data, source, args.force, not args.skip_model_check)
    verb = "handed over" if changed else "unchanged (already handed over)"
    print(f"generation {assignment.generation} with {len(assignment.servers)} server(s) {verb} to {args.state_dir}")
    if args.wait is None:
        return 0
    ok, why = status_mod.wait_for(args.state_dir, assignment.generation, args.wait)
    if not ok:
        print(f"igniter-agent apply: {why}", file=sys.stderr)
    return 0 if ok else 1


def cmd_status(args: argparse.Namespace) -> int:
    return status_mod.print_status(args.state_dir, args.json)


def cmd_profile(args: argparse.Namespace) -> int:
    from agents.profiler import measure as profiler  # the workers it starts import torch; this process does not

    return profiler.run(args.model_dir, args.out, args.model_name, args.gpu_index, args.seconds)


COMMANDS = {"run": cmd_run, "apply": cmd_apply, "status": cmd_status, "profile": cmd_profile}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except InputError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except AgentLocked as exc:
        print(f"igniter-agent: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        return failed(exc)
