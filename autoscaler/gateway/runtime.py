"""HAProxy's runtime API: commands for the routing operations, and what `show stat` and
`show servers state` say, parsed into a GatewayView.

Commands go in one session in interactive (`prompt`) mode, so a batch costs one connection and
each command's answer can be told apart (every answer ends at the next `\\n> ` prompt). The
channel is a function from the session's input to its output: a unix socket here
(UnixSocketChannel), or the same bytes piped through SSH to a gateway host (remote.py).
"""

from __future__ import annotations

import csv
import io
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoscaler.core.routing.routes import (
    AddServer,
    AdminState,
    BackendSeen,
    DelServer,
    GatewayView,
    Op,
    ServerSeen,
    SetState,
    SetWeight,
)
from autoscaler.gateway.base import GatewayError, GatewaySpec, backend, workload_of
from autoscaler.gateway.config import server_options

Channel = Callable[[bytes], bytes]  # a whole session's input -> its output
PROMPT = b"\n> "
# srv_admin_state bits (HAProxy's SRV_ADMF_*): forced/inherited/config/resolution maintenance, drain
MAINT_BITS = 0x01 | 0x02 | 0x04 | 0x20
DRAIN_BITS = 0x08 | 0x10
SRV_RUNNING, CHECK_UNKNOWN, CHECK_PASSED = 2, 0, 3


class UnixSocketChannel:
    """One connection per session to a local runtime socket. The session's input is written by a
    thread while this one reads the answers: HAProxy stops reading commands while its answers wait
    unread, so writing the whole input first deadlocks once the answers outgrow the socket's
    buffers (about 60,000 commands: the 20,000 servers of a 2,000-instance fleet)."""

    def __init__(self, path: str, timeout_s: float = 10.0) -> None:
        self.path, self.timeout_s = path, timeout_s

    def __call__(self, data: bytes) -> bytes:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout_s)
                sock.connect(self.path)
                failed: list[OSError] = []
                writer = threading.Thread(target=_send_all, args=(sock, data, failed), daemon=True)
                writer.start()
                out = _read_all(sock)
                writer.join(self.timeout_s)
                if failed:
                    raise failed[0]
                return out
        except OSError as exc:
            raise GatewayError(f"runtime API {self.path}: {exc.strerror or exc}") from None


def _send_all(sock: socket.socket, data: bytes, failed: list[OSError]) -> None:
    try:
        sock.sendall(data)
    except OSError as exc:  # the reader sees the session end and reports this
        failed.append(exc)


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def session(channel: Channel, commands: Sequence[str]) -> list[str]:
    """Run commands in one interactive session; one answer per command, in order."""
    if not commands:
        return []
    for c in commands:
        if "\n" in c or ";" in c:
            raise ValueError(f"runtime command with a separator: {c!r}")
    data = ("prompt\n" + "".join(c + "\n" for c in commands) + "quit\n").encode()
    answers = channel(data).split(PROMPT)
    # answers[0] is what came before the first prompt (the `prompt` command's empty answer)
    out = [a.decode(errors="replace").strip("\n") for a in answers[1 : len(commands) + 1]]
    if len(out) < len(commands):
        raise GatewayError(f"runtime API closed the session after {len(out)} of {len(commands)} commands")
    return out


# -- operations -> commands ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Step:
    """One command of an operation and how its answer says it worked (None: an empty answer)."""

    command: str
    ok: str | None = None


def steps(op: Op, spec: GatewaySpec) -> list[Step]:
    """A server is added with weight 0 and its health check enabled, then made ready: it gets a
    weight only once its check has passed (core.routing.routes). Deleting takes maint first."""
    where = f"{backend(op.workload)}/{op.name}"
    if isinstance(op, AddServer):
        return [
            Step(f"add server {where} {op.address} {server_options(spec, 0)}", "New server registered."),
            Step(f"enable health {where}"),
            Step(f"set server {where} state ready"),
        ]
    if isinstance(op, SetWeight):
        return [Step(f"set server {where} weight {op.weight}")]
    if isinstance(op, SetState):
        return [Step(f"set server {where} state {op.state}")]
    assert isinstance(op, DelServer)
    return [Step(f"set server {where} state maint"), Step(f"del server {where}", "Server deleted.")]


def apply_ops(channel: Channel, ops: Sequence[Op], spec: GatewaySpec) -> list[str]:
    """Every operation's commands in one session; one message per operation that failed."""
    plan = [(op, st) for op in ops for st in steps(op, spec)]
    answers = session(channel, [st.command for _, st in plan])
    failed: dict[int, str] = {}
    for (op, st), answer in zip(plan, answers):
        good = answer == "" if st.ok is None else st.ok in answer
        if not good and id(op) not in failed:
            failed[id(op)] = f"{st.command}: {answer.strip() or 'no answer'}"
    return list(failed.values())


# -- observation -----------------------------------------------------------------------------------
def observe(channel: Channel) -> GatewayView:
    """Counters from `show stat`, admin state and health from `show servers state`."""
    stat, state = session(channel, ["show stat", "show servers state"])
    return parse_view(stat, state)


def clear_maxima(channel: Channel) -> None:
    """`clear counters`: every proxy's and server's maxima (rate_max, smax, qmax, ...) start
    again; the cumulative counters (req_tot, stot, hrsp_*) are untouched. Needs the operator or
    admin level (the gateway's socket is admin)."""
    (answer,) = session(channel, ["clear counters"])
    if answer.strip():
        raise GatewayError(f"runtime API: clear counters: {answer.strip()[:200]}")


# The `show stat` columns read (of about 100): 20,000 servers' rows are 5 MB, and a dict of every
# column per row cost most of a 2,000-instance fleet's observation.
STAT_FIELDS = (
    "pxname",
    "svname",
    "req_tot",
    "hrsp_5xx",
    "scur",
    "act",
    "rate_max",
    "addr",
    "uweight",
    "status",
    "stot",
)


def parse_view(stat: str, state: str) -> GatewayView:
    rows = _stat_rows(stat)
    states = parse_servers_state(state)
    backends: dict[str, BackendSeen] = {}
    servers: dict[tuple[str, str], ServerSeen] = {}
    for r in rows:
        w = workload_of(r["pxname"])
        if w is None:
            continue
        if r["svname"] == "BACKEND":
            backends[w] = BackendSeen(
                workload=w,
                requests_total=_int(r.get("req_tot")),
                errors_5xx=_int(r.get("hrsp_5xx")),
                sessions=_int(r.get("scur")),
                servers_up=_int(r.get("act")),
                rate_max=_int(r.get("rate_max")),
            )
        elif r["svname"] != "FRONTEND":
            servers[(w, r["svname"])] = _server(w, r, states.get((r["pxname"], r["svname"]), {}))
    return GatewayView(backends, servers)


def _stat_rows(stat: str) -> list[dict[str, str]]:
    """`show stat`'s CSV (a `# `-prefixed header), each row cut to STAT_FIELDS."""
    reader = csv.reader(io.StringIO(stat.lstrip("# ")))
    header = next(reader, [])
    if "pxname" not in header or "svname" not in header:
        raise GatewayError(f"runtime API: `show stat` gave no table: {stat[:200]!r}")
    where = [(f, header.index(f)) for f in STAT_FIELDS if f in header]
    rows = [{f: row[i] for f, i in where if i < len(row)} for row in reader if row]
    if not rows:
        raise GatewayError(f"runtime API: `show stat` gave no table: {stat[:200]!r}")
    return rows


def _server(workload: str, r: dict[str, str], st: dict[str, str]) -> ServerSeen:
    admin_bits = _int(st.get("srv_admin_state"))
    admin: AdminState = "maint" if admin_bits & MAINT_BITS else "drain" if admin_bits & DRAIN_BITS else "ready"
    addr = f"{st['srv_addr']}:{st['srv_port']}" if st.get("srv_addr") else (r.get("addr") or "")
    weight = _int(st.get("srv_uweight", r.get("uweight")))
    return ServerSeen(
        workload=workload,
        name=r["svname"],
        address=addr,
        admin=admin,
        status=r.get("status") or "",
        check_ok=_check_ok(st, weight),
        weight=weight,
        sessions=_int(r.get("scur")),
        requests_total=_int(r.get("stot")),
        errors_5xx=_int(r.get("hrsp_5xx")),
    )


def _check_ok(st: dict[str, str], weight: int) -> bool:
    """Up, and its last health check passed. Right after a reload no check has run yet: a server
    that was weighted (so it had passed before) counts as passing until its first check says
    otherwise; a server just added (weight 0) waits for its first pass."""
    result = _int(st.get("srv_check_result"))
    return _int(st.get("srv_op_state")) == SRV_RUNNING and (
        result == CHECK_PASSED or (result == CHECK_UNKNOWN and weight > 0)
    )


def parse_servers_state(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """`show servers state`: a version line, a `# header`, then one space-separated row per server."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = next((ln[2:].split() for ln in lines if ln.startswith("# ")), None)
    if header is None:
        return {}
    out: dict[tuple[str, str], dict[str, str]] = {}
    for ln in lines:
        fields = ln.split()
        if ln.startswith("#") or len(fields) < len(header):
            continue
        row = dict(zip(header, fields))
        out[(row["be_name"], row["srv_name"])] = row
    return out


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0
