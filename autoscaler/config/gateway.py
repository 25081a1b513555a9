"""`gateway:`: the data plane's HAProxy, local or on gateway hosts. Pure."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from autoscaler.config.fields import Delay, Frozen, Listen


class GatewayConfig(Frozen):
    """The data plane: one HAProxy (2.6+) per fleet, driven through its runtime API.

    `kind` defaults to haproxy with the local provider and to none with ec2. Without `hosts` the
    gateway is a haproxy process on this machine, under the state directory, that outlives
    `igniter run` like local instances do. With `hosts` (Terraform's modules/gateway) every listed
    gateway host runs HAProxy and the autoscaler drives each one's runtime API over SSH (the
    agents' user, key and host-key pins), never through an open admin port."""

    kind: Literal["haproxy", "none"] | None = Field(default=None, description="default: haproxy with provider local")
    listen: Listen = Field(default="127.0.0.1:8000", description="where clients reach the KServe v2 API")
    drain_timeout_s: Delay = Field(
        default=30.0, description="a server leaving the plan is stopped once it holds no session, or after this"
    )
    check_interval_s: Annotated[float, Field(ge=0.1, le=60)] = Field(
        default=1.0, description="HAProxy's health check of each server (GET /v2/health/ready)"
    )
    check_timeout_s: Annotated[float, Field(gt=0, le=60)] = Field(
        default=5.0, description="a check not answered by then fails (3 failures in a row take a server out)"
    )
    connect_timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = Field(default=60.0, description="longest request")
    max_connections: Annotated[int, Field(ge=16, le=1_000_000)] = 4096
    buffer_kb: Annotated[int, Field(ge=16, le=1024)] = Field(
        default=64, description="HAProxy's tune.bufsize: a request retried on another server must fit in it"
    )
    haproxy_command: str = Field(default="haproxy", description="the haproxy binary (local gateways)")
    state_dir: str | None = Field(default=None, description="local: default <state file dir>/<fleet>-gateway")
    hosts: list[str] = Field(
        default_factory=list, description="remote gateways: the gateway hosts' addresses, reached over SSH (agents.*)"
    )
    discover: bool = Field(
        default=False,
        description="remote gateways (provider ec2): every running instance tagged igniter:gateway=<fleet>",
    )
    host_key: str | None = Field(
        default=None,
        description="remote gateways: the hosts' SSH host public key ('ssh-ed25519 AAAA...', Terraform's "
        "gateway_host_key output), pinned for every gateway host; else gateway.known_hosts is checked",
    )
    known_hosts: str | None = Field(default=None, description="remote gateways without host_key: the known_hosts file")
    remote_dir: str = Field(
        default="/var/lib/igniter-gateway", description="remote gateways: where the config and runtime sockets live"
    )

    @property
    def remote(self) -> bool:
        return bool(self.hosts) or self.discover
