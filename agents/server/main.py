"""One inference server process: a TorchScript model behind the KServe v2 REST subset.

`python -m agents.server --spec JSON` is what the agent starts, once per assigned server. It binds
its port first (so the agent sees "starting" and port conflicts early), then loads and warms the
model, then reports ready (agents/server/lifecycle.py does that part). SIGTERM drains it: no new
requests, every accepted one answered, then exit 0. It exits at once when its agent is gone.
Cheap checks run before torch is imported, so a broken model directory fails in a fraction of a
second instead of after the import.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
import zipfile
from pathlib import Path

from agents import logs
from agents.fsutil import atomic_write_json
from agents.spec import ServerLimits, ServerSpec, load_model_config

log = logging.getLogger("igniter-server")


def watch_parent(parent_pid: int, stop: threading.Event) -> None:
    """If the agent dies (even by kill -9) this server is reparented: exit at once.

    PR_SET_PDEATHSIG (set by the agent) covers Linux; this poll covers the rest and the window
    before the prctl took effect.
    """

    def check() -> None:
        if os.getppid() != parent_pid:
            log.error("agent (pid %d) is gone; exiting", parent_pid)
            os._exit(3)

    def loop() -> None:
        while not stop.wait(0.2):
            check()

    check()
    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


def preflight(spec: ServerSpec) -> None:
    """Fail in milliseconds on what needs no torch: model.yaml, and model.pt being an archive."""
    load_model_config(spec.model_dir)
    model = Path(spec.model_dir) / "model.pt"
    if not model.is_file():
        raise FileNotFoundError(f"{model} does not exist")
    if not zipfile.is_zipfile(model):
        raise ValueError(f"{model} is not a TorchScript archive (torch.jit.save writes a zip file)")


def _start(args: argparse.Namespace, stop: threading.Event) -> None:
    spec = ServerSpec.model_validate_json(args.spec)
    preflight(spec)
    import torch  # seconds: only once the cheap checks passed

    from agents.server.lifecycle import serve

    torch.set_num_threads(max(1, args.threads))
    limits = ServerLimits(
        read_timeout_s=args.read_timeout,
        idle_timeout_s=args.idle_timeout,
        max_connections=args.max_connections,
        max_header_kb=args.max_header_kb,
        drain_timeout_s=args.drain_timeout,
        max_request_items=args.max_request_items,
    )
    serve(spec, args.device, args.stats_file, limits, stop)


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agents.server", description=__doc__)
    parser.add_argument("--spec", required=True, help="ServerSpec as JSON (one server of an assignment)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--stats-file", type=Path)
    parser.add_argument("--parent-pid", type=int, help="exit when this process is no longer the parent")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (servers share the CPUs)")
    parser.add_argument(
        "--log-format", choices=logs.FORMATS, default="text", help="the agent's own (one JSON object per line: json)"
    )
    defaults = ServerLimits()
    parser.add_argument(
        "--read-timeout", type=float, default=defaults.read_timeout_s, help="seconds for a whole request"
    )
    parser.add_argument("--idle-timeout", type=float, default=defaults.idle_timeout_s, help="seconds without a request")
    parser.add_argument("--max-connections", type=int, default=defaults.max_connections)
    parser.add_argument("--max-header-kb", type=int, default=defaults.max_header_kb, help="request line and headers")
    parser.add_argument(
        "--drain-timeout", type=float, default=defaults.drain_timeout_s, help="bound of a graceful stop"
    )
    parser.add_argument(
        "--max-request-items", type=int, default=defaults.max_request_items, help="Triton's max_batch_size"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    logs.configure(args.log_format)
    logs.set_fleet(os.environ.get("IGNITER_FLEET") or None)  # the agent's environment, inherited
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.parent_pid:
        watch_parent(args.parent_pid, stop)
    try:
        _start(args, stop)
    except Exception as exc:  # a fatal start-up error: one line the agent shows as last_error
        message = f"{type(exc).__name__}: {exc}"
        log.error("fatal: %s", message)
        if args.stats_file:
            atomic_write_json(
                args.stats_file, {"pid": os.getpid(), "ready": False, "error": message, "updated_at": time.time()}
            )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
