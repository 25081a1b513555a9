"""Gateway hosts (Terraform's modules/gateway): HAProxy on each, behind a Network Load Balancer.

Each host runs haproxy in master-worker mode (`igniter-gateway.service`: `haproxy -Ws -f
<remote_dir>/haproxy.cfg -S <remote_dir>/master.sock`) as the SSH user the autoscaler logs in as.
The autoscaler reaches every host over the transport it uses for agents (a `Shell`: the SSH
transport, key authentication, RejectPolicy) and talks to the runtime API by piping a session
through `socat` to the host's admin socket; no admin port is ever open on the network. Host keys
are pinned: hosts discovered by tag (`gateway.discover`, the Auto Scaling group's) are pinned
from their consoles through the EC2 API, exactly as nodes are (a HostKeyGate; a host is driven
only once pinned); listed hosts trust `gateway.host_key` or `gateway.known_hosts`.

- `ensure` renders the configuration once and, on each host whose configuration was rendered
  for another spec, uploads it, checks it (`haproxy -c`), saves the servers' state and reloads
  through the master socket (hitless: the new worker takes the listening sockets over);
- `observe` reads every host and merges: counters and sessions are summed; a server counts as
  checked only if every host's check passes, and one missing on a host has no weight there, so it
  is not "serving" until every host routes to it;
- `route` diffs each host against what that host runs (core.routing.routes.route_ops), so a host that
  missed operations (down for a while, or new in the group) catches up by itself;
- `stop` removes every server from every host (the hosts themselves are Terraform's).

Any host that cannot be reached fails the whole observation (GatewayError): without every host's
sessions no drain can be called done, so drains then wait for their timeout.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

import paramiko
from paramiko.hostkeys import HostKeyEntry

from autoscaler.config.policy import GatewayConfig
from autoscaler.core.routing.routes import DelServer, GatewayView, Op, Route, ServerSeen, describe, route_ops
from autoscaler.fleet.base import Instance
from autoscaler.gateway import runtime
from autoscaler.gateway.base import GatewayError, GatewaySpec, spec_hash
from autoscaler.gateway.config import Paths, error_files, render
from autoscaler.transport.base import HostKeyGate, TransportError

TAG_GATEWAY = "igniter:gateway"
RELOAD_WAIT_S = 10.0  # a reloaded host's new worker answers within this (else the reload fails, retried next tick)
ADMIN_RANK = {"ready": 0, "drain": 1, "maint": 2}


class HostKeyPin:
    """Pins for gateway hosts: each presents the gateway's one host key (a PinnedHostKeys stand-in)."""

    def __init__(self, line: str) -> None:
        entry = HostKeyEntry.from_line(f"gateway {line.strip()}")
        if entry is None or entry.key is None:
            raise GatewayError(
                f"gateway.host_key is not an OpenSSH public key: {line[:40]!r}", False, "gateway.host_key"
            )
        self.key: paramiko.PKey = entry.key

    def keys_for(self, instance_id: str) -> list[paramiko.PKey]:
        return [self.key]


class Shell(Protocol):
    """Runs a command on a host (transport/ssh.py's SshTransport.run)."""

    def run(
        self, instance: Instance, command: str, stdin: str | None, what: str = "command"
    ) -> tuple[int, str, str]: ...

    def close(self) -> None: ...


class RemoteGateway:
    """The Gateway contract (gateway/base.py) for the hosts `hosts()` lists."""

    def __init__(
        self,
        cfg: GatewayConfig,
        shell: Shell,
        hosts: Callable[[], list[Instance]] | None = None,
        gate: HostKeyGate | None = None,
    ) -> None:
        self.cfg = cfg
        self.ssh = shell
        self.hosts = hosts or static_hosts(cfg.hosts)
        self.gate = gate
        base = cfg.remote_dir.rstrip("/")
        self.paths = Paths(socket=f"{base}/admin.sock", state_file=f"{base}/servers.state", errors=f"{base}/errors")
        self.master = f"{base}/master.sock"
        self.views: dict[str, GatewayView] = {}
        self._spec: GatewaySpec | None = None

    # -- the contract -----------------------------------------------------------------------------
    def ensure(self, spec: GatewaySpec) -> bool:
        changed = False
        for host in self._hosts():
            if self._rendered_for(host) != spec_hash(spec):
                self._reload(host, spec)
                changed = True
        self._spec = spec
        return changed

    def observe(self) -> GatewayView:
        self.views = {host.address or "": runtime.observe(self.channel(host)) for host in self._hosts()}
        return merge(list(self.views.values()))

    def clear_maxima(self) -> None:
        for host in self._hosts():
            runtime.clear_maxima(self.channel(host))

    def apply(self, ops: Sequence[Op]) -> list[str]:
        spec = self._spec_or_fail()
        return [f"{h.address}: {e}" for h in self._hosts() for e in runtime.apply_ops(self.channel(h), ops, spec)]

    def route(self, desired: Mapping[str, Sequence[Route]], seen: GatewayView) -> tuple[list[Op], list[str]]:
        spec = self._spec_or_fail()
        done: dict[str, Op] = {}
        errors: list[str] = []
        hosts = {h.address: h for h in self._hosts()}
        for address, view in self.views.items():
            if address not in hosts:
                continue  # gone since it was observed
            ops = route_ops(desired, view)
            done.update({describe(op): op for op in ops})
            errors += (
                [f"{address}: {e}" for e in runtime.apply_ops(self.channel(hosts[address]), ops, spec)] if ops else []
            )
        return list(done.values()), errors

    def stop(self, timeout_s: float = 15.0) -> None:
        """Take every server out of every host; the hosts keep running (they are Terraform's). A
        server is deleted once its idle connections are closed (HAProxy refuses before), so this
        retries until none is left or `timeout_s`."""
        spec = self._spec or GatewaySpec(listen=self.cfg.listen, workloads=())
        deadline = time.monotonic() + timeout_s
        for host in self._hosts():
            while servers := list(runtime.observe(self.channel(host)).servers.values()):
                runtime.apply_ops(self.channel(host), [DelServer(s.workload, s.name) for s in servers], spec)
                if time.monotonic() > deadline:
                    raise GatewayError(f"gateway host {host.address}: {len(servers)} server(s) still hold connections")
                time.sleep(0.5)

    def close(self) -> None:
        self.ssh.close()

    # -- hosts ------------------------------------------------------------------------------------
    def _hosts(self) -> list[Instance]:
        """The hosts to drive: listed ones, or discovered ones once their host keys are pinned."""
        hosts = [h for h in self.hosts() if h.address]
        if self.gate is not None:
            self.gate.refresh(hosts)
            hosts = [h for h in hosts if self.gate.reachable(h)]
        if not hosts:
            raise GatewayError("no gateway host to drive yet (none listed, or none tagged, running and pinned)")
        return hosts

    def channel(self, host: Instance) -> runtime.Channel:
        command = f"socat -t 10 - UNIX-CONNECT:{shlex.quote(self.paths.socket)}"
        return lambda data: self._run(host, command, data.decode()).encode()

    def _run(self, host: Instance, command: str, stdin: str | None = None) -> str:
        try:
            rc, out, err = self.ssh.run(host, command, stdin, "gateway")
        except TransportError as exc:
            raise GatewayError(f"gateway host {host.address}: {exc}", exc.retryable) from None
        if rc != 0:
            what = command.split()[0]
            raise GatewayError(f"gateway host {host.address}: `{what}` exited {rc}: {(err or out).strip()[-300:]}")
        return out

    def _rendered_for(self, host: Instance) -> str | None:
        first = self._run(host, f"head -n 1 {shlex.quote(self.cfg.remote_dir)}/haproxy.cfg 2>/dev/null || true")
        return first.removeprefix("# igniter-spec ").strip() if first.startswith("# igniter-spec ") else None

    def _reload(self, host: Instance, spec: GatewaySpec) -> None:
        """Upload, check, keep the servers' state, reload through the master socket, and wait
        (RELOAD_WAIT_S at most) until a new worker answers on the runtime socket: HAProxy 2.6's
        master answers `reload` before the new worker is up, and what is sent to the old one
        in between (the routes of the same tick) would be lost with it."""
        try:
            servers = list(runtime.observe(self.channel(host)).servers.values())
        except GatewayError:
            servers = []
        text = f"# igniter-spec {spec_hash(spec)}\n" + render(spec, self.paths, servers)
        d, sock, master = (shlex.quote(x) for x in (self.cfg.remote_dir, self.paths.socket, self.master))
        pid = f"echo 'show info' | socat -t 5 - UNIX-CONNECT:{sock} 2>/dev/null | sed -n 's/^Pid: //p'"
        tries = int(RELOAD_WAIT_S / 0.1)
        script = (
            f"set -e; cd {d}; {_errors_script()}cat > haproxy.cfg.new; haproxy -c -q -f haproxy.cfg.new; "
            f"(echo 'show servers state' | socat -t 5 - UNIX-CONNECT:{sock} > servers.state) || true; "
            f"old=$({pid} || true); "
            f"mv haproxy.cfg.new haproxy.cfg; echo reload | socat -t 10 - UNIX-CONNECT:{master} >/dev/null; "
            f"i=0; while [ $i -lt {tries} ]; do new=$({pid} || true); "
            '[ -n "$new" ] && [ "$new" != "$old" ] && exit 0; sleep 0.1; i=$((i+1)); done; '
            "echo 'no new worker answered after the reload' >&2; exit 1"
        )
        self._run(host, f"sh -c {shlex.quote(script)}", text)

    def _spec_or_fail(self) -> GatewaySpec:
        if self._spec is None:
            raise GatewayError("the gateway's configuration is not known yet (ensure comes first)")
        return self._spec


def _errors_script() -> str:
    """Shell that writes the JSON errorfiles the configuration names (gateway/config.py) into
    errors/ under the remote directory, before `haproxy -c` reads them."""
    writes = "".join(f"printf '%s' {shlex.quote(text)} > errors/{name}; " for name, text in error_files().items())
    return f"mkdir -p errors; {writes}"


def merge(views: Sequence[GatewayView]) -> GatewayView:
    """One view of several hosts (see the module docstring)."""
    if len(views) == 1:
        return views[0]
    backends = {}
    for w in {w for v in views for w in v.backends}:
        parts = [v.backends[w] for v in views if w in v.backends]
        backends[w] = replace(
            parts[0],
            requests_total=sum(b.requests_total for b in parts),
            errors_5xx=sum(b.errors_5xx for b in parts),
            sessions=sum(b.sessions for b in parts),
            rate_max=sum(b.rate_max for b in parts),  # each host's busiest second: at most their sum
            servers_up=min(b.servers_up for b in parts) if len(parts) == len(views) else 0,
        )
    keys = {k for v in views for k in v.servers}
    return GatewayView(
        backends, {k: _merge_server([v.servers[k] for v in views if k in v.servers], len(views)) for k in keys}
    )


def _merge_server(parts: list[ServerSeen], hosts: int) -> ServerSeen:
    everywhere = len(parts) == hosts
    return replace(
        parts[0],
        admin=max((p.admin for p in parts), key=lambda a: ADMIN_RANK[a]),
        check_ok=everywhere and all(p.check_ok for p in parts),
        weight=min(p.weight for p in parts) if everywhere else 0,
        sessions=sum(p.sessions for p in parts),
        requests_total=sum(p.requests_total for p in parts),
        errors_5xx=sum(p.errors_5xx for p in parts),
        status=parts[0].status if all(p.status == parts[0].status for p in parts) else "mixed",
    )


def static_hosts(addresses: Sequence[str]) -> Callable[[], list[Instance]]:
    """Listed gateway hosts, as the SSH transport addresses them (its pool is keyed by id)."""
    hosts = [
        Instance(
            id=f"gateway-{a}", instance_type="gateway", slot="gateway", state="running", launched_at=0.0, address=a
        )
        for a in addresses
    ]
    return lambda: list(hosts)


def discover_hosts(fleet: str, region: str, endpoint_url: str | None) -> Callable[[], list[Instance]]:
    """The running instances tagged igniter:gateway=<fleet> (the Auto Scaling group's hosts; listed
    afresh on every call, so replaced hosts come and go by themselves)."""
    import boto3

    client = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url)
    filters = [
        {"Name": f"tag:{TAG_GATEWAY}", "Values": [fleet]},
        {"Name": "instance-state-name", "Values": ["running"]},
    ]

    def hosts() -> list[Instance]:
        pages = client.get_paginator("describe_instances").paginate(Filters=filters)
        found = [i for page in pages for r in page["Reservations"] for i in r["Instances"] if i.get("PrivateIpAddress")]
        return sorted((_gateway_instance(i) for i in found), key=lambda h: h.address or "")

    return hosts


def _gateway_instance(raw: dict[str, object]) -> Instance:
    launched = raw.get("LaunchTime")
    return Instance(
        id=str(raw["InstanceId"]),
        instance_type=str(raw.get("InstanceType", "gateway")),
        slot="gateway",
        state="running",
        launched_at=launched.timestamp() if hasattr(launched, "timestamp") else 0.0,
        address=str(raw["PrivateIpAddress"]),
    )
