"""Build a Controller's real dependencies from a policy: provider, transport, rate source, planner,
and the leader lease whose Fence every mutating call goes through."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from autoscaler.config.errors import InputError
from autoscaler.config.policy import Policy
from autoscaler.fleet.base import HostKeySource, InterruptionSource, Provider
from autoscaler.fleet.samples import ensure_local_samples, model_root
from autoscaler.gateway.base import Gateway, GatewayError, spec_from
from autoscaler.leader.base import Fence, Lease
from autoscaler.loop.service.fence import FencedProvider, FencedTransport, bind_aws
from autoscaler.loop.service.leadership import Leadership
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps import faults
from autoscaler.loop.tick.controller import Controller, Deps
from autoscaler.planner.memo import RecentPlans
from autoscaler.planner.types import Plan
from autoscaler.rates.base import RateSource
from autoscaler.rates.reader import RateReader
from autoscaler.transport.base import HostKeyGate, Transport

if TYPE_CHECKING:
    from autoscaler.transport.pins import PinnedHostKeys

T = TypeVar("T")
R = TypeVar("R")


def default_state_path(policy: Policy) -> Path:
    return Path.home() / ".local" / "state" / "igniter" / f"{policy.fleet}.sqlite"


def _relative(policy: Policy, value: str) -> Path:
    path = Path(value).expanduser()
    base = policy.source.parent if policy.source else Path.cwd()
    return path if path.is_absolute() else (base / path).resolve()


def make_provider(policy: Policy, state_path: Path, clock: Callable[[], float] = time.time) -> Provider:
    cfg = policy.provider
    if cfg.kind == "ec2":
        from autoscaler.fleet.ec2 import Ec2Provider

        _check_templates(policy)
        ec2 = Ec2Provider(policy.fleet, cfg)
        ec2.after_claim = lambda _id: faults.point("after_claim")
        ec2.after_return = lambda _id: faults.point("after_return")
        return ec2
    from autoscaler.fleet.local import LocalProvider, fake_mig_flags

    root = _relative(policy, cfg.state_root) if cfg.state_root else state_path.parent / f"{policy.fleet}-instances"
    flags = fake_mig_flags(policy)
    return LocalProvider(policy.fleet, root, cfg.base_port, policy.agents.agent_command, clock, agent_flags=flags)


def check_pool(policy: Policy) -> None:
    """A warm pool needs a provider with a stopped state (EC2): the local provider's instances are
    processes on this machine, with none to keep them in."""
    if policy.scaling.warm_pool.enabled and policy.provider.kind != "ec2":
        raise InputError(
            policy.source or "<policy>",
            "scaling.warm_pool",
            "the local provider has no stopped state to keep instances in; use provider ec2 (or size: 0)",
        )


def _check_templates(policy: Policy) -> None:
    templates = policy.provider.launch_templates
    for i, itype in enumerate(policy.instance_types):
        if itype.name not in templates and "*" not in templates:
            raise InputError(
                policy.source or "<policy>",
                "provider.launch_templates",
                f"no launch template for instance_types[{i}] {itype.name!r} (add it, or a '*' default)",
            )


def known_hosts_path(policy: Policy, state_path: Path) -> Path:
    """The fleet-managed pin file: agents.known_hosts if set (Terraform points it at the host's
    /etc/igniter/ssh/known_hosts), else next to the state file, which it belongs with: both
    describe this fleet's instances (<state>.known_hosts)."""
    if policy.agents.known_hosts:
        return Path(policy.agents.known_hosts).expanduser()
    return state_path.with_suffix(".known_hosts")


def make_pins(policy: Policy, state_path: Path, provider: Provider) -> PinnedHostKeys | None:
    """Host key pins, when agents are reached over SSH and the provider publishes host keys."""
    if policy.agents.transport != "ssh" or not isinstance(provider, HostKeySource):
        return None
    from autoscaler.transport.pins import PinnedHostKeys

    return PinnedHostKeys(known_hosts_path(policy, state_path))


def make_gate(policy: Policy, provider: Provider, pins: PinnedHostKeys | None) -> HostKeyGate | None:
    if pins is None or not isinstance(provider, HostKeySource):
        return None
    from autoscaler.transport.trust import HostKeyTrust

    return HostKeyTrust(provider, pins, policy.agents.port)


def make_transport(policy: Policy, pins: PinnedHostKeys | None = None) -> tuple[Transport, bool]:
    """The transport, and whether agents are contacted at all."""
    cfg = policy.agents
    if cfg.transport == "none":
        from autoscaler.transport.fake import NoneTransport

        return NoneTransport(), False
    if cfg.transport == "ssh":
        from autoscaler.transport.ssh import SshTransport

        return SshTransport(cfg, pins), True
    if policy.provider.kind == "ec2":
        raise InputError(
            policy.source or "<policy>",
            "agents.transport",
            "'local' reaches agents on this machine only; use ssh (or none) with provider ec2",
        )
    from autoscaler.transport.local import LocalTransport

    return LocalTransport(cfg.agent_command, cfg.state_dir, cfg.command_timeout_s), True


def make_interruptions(policy: Policy) -> InterruptionSource | None:
    """The SQS queue of scaling.spot.interruption_queue (EventBridge feeds it), or None."""
    url = policy.scaling.spot.interruption_queue
    if url is None:
        return None
    from autoscaler.fleet.interruptions import SqsInterruptions, make_sqs_client

    return SqsInterruptions(url, make_sqs_client(policy.provider.region, policy.provider.endpoint_url))


def _fenced_interruptions(source: InterruptionSource | None, fence: Fence | None) -> InterruptionSource | None:
    """Only the leader reads the queue: a receive hides a message from everyone else for its
    visibility timeout, and a delete removes it for good."""
    return None if source is None else fenced(source, fence, ("receive", "done", "poll"))


def gateway_dir(policy: Policy, state_path: Path) -> Path:
    """A local gateway's directory: gateway.state_dir, else beside the state file (like instances)."""
    cfg = policy.gateway
    return _relative(policy, cfg.state_dir) if cfg.state_dir else state_path.parent / f"{policy.fleet}-gateway"


def make_gateway(policy: Policy, state_path: Path, provider: Provider | None = None) -> Gateway | None:
    """The fleet's gateway (nothing is started here: the first tick ensures it); None for kind none."""
    cfg = policy.gateway
    if cfg.kind == "none":
        return None
    if cfg.remote:
        return _remote_gateway(policy, state_path, provider)
    from autoscaler.gateway.local import LocalHaproxy

    return LocalHaproxy(gateway_dir(policy, state_path), cfg.haproxy_command)


def _remote_gateway(policy: Policy, state_path: Path, provider: Provider | None) -> Gateway:
    """Gateway hosts over SSH: discovered ones pinned from their consoles (their own pin file,
    <state>.gateway.known_hosts), listed ones against gateway.host_key or gateway.known_hosts."""
    from autoscaler.gateway.remote import HostKeyPin, RemoteGateway, discover_hosts
    from autoscaler.transport.pins import PinnedHostKeys
    from autoscaler.transport.ssh import SshTransport
    from autoscaler.transport.trust import HostKeyTrust

    cfg = policy.gateway
    agents = policy.agents.model_copy(update={"host_override": None, "known_hosts": cfg.known_hosts})
    if cfg.discover:
        pins = PinnedHostKeys(state_path.with_suffix(".gateway.known_hosts"))
        gate = HostKeyTrust(provider, pins, agents.port) if isinstance(provider, HostKeySource) else None
        hosts = discover_hosts(policy.fleet, policy.provider.region, policy.provider.endpoint_url)
        return RemoteGateway(cfg, SshTransport(agents, pins), hosts, gate)
    pin = HostKeyPin(cfg.host_key) if cfg.host_key else None
    return RemoteGateway(cfg, SshTransport(agents, pin))  # type: ignore[arg-type]


GATEWAY_MUTATING = (
    "ensure",
    "revive",
    "apply",
    "route",
    "clear_maxima",
    "stop",
)  # what a standby must not do to the gateway


def check_gateway(policy: Policy, state_path: Path) -> None:
    """A local gateway that cannot start is bad input (exit 2): haproxy missing, or its listen
    address held by another process (this fleet's own running gateway is fine). Only looks: the
    leader starts it in its first tick (an `igniter run` standby must not touch it)."""
    cfg = policy.gateway
    if cfg.kind == "none" or cfg.remote:
        return
    from autoscaler.gateway.local import LocalHaproxy

    try:
        LocalHaproxy(gateway_dir(policy, state_path), cfg.haproxy_command).preflight(
            spec_from(cfg, [w.name for w in policy.workloads])
        )
    except GatewayError as exc:
        raise InputError(policy.source or "<policy>", exc.field, str(exc)) from None


def make_rates(policy: Policy, gateway: Gateway | None = None) -> RateReader:
    return RateReader(_source(policy, gateway), policy.rates.stale_after_s)


def _source(policy: Policy, gateway: Gateway | None = None) -> RateSource:
    kind = policy.rates.source
    if kind == "gateway":
        from autoscaler.rates.gateway import GatewayRates

        if gateway is None:
            raise InputError(policy.source or "<policy>", "rates.source", "gateway needs gateway.kind haproxy")
        return GatewayRates(gateway.observe, gateway.clear_maxima)
    if kind == "agents":
        from autoscaler.rates.agents import AgentsRates

        return AgentsRates()
    if kind == "cloudwatch":
        from autoscaler.rates.cloudwatch import CloudWatchRates

        cw = policy.rates.cloudwatch
        return CloudWatchRates(cw, cw.region or policy.provider.region, cw.endpoint_url or policy.provider.endpoint_url)
    if kind == "prometheus":
        from autoscaler.rates.prometheus import PrometheusRates

        return PrometheusRates(policy.rates.prometheus)
    from autoscaler.rates.static import StaticRates

    return StaticRates({w.name: w.rate_rps for w in policy.workloads})


def default_planner(
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> Plan:
    """The policy's planner on the policy's offerings (`plan_now`); a question asked again (a
    steady tick asks what the tick before asked) is answered from the last few kept (planner/memo.py)."""
    return _RECENT(policy, rates, corrections, caps, current)


def plan_now(
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> Plan:
    """The policy's planner on the policy's offerings; offerings in `caps` (keyed by
    planner.types.offering_key: the type on-demand, `<type>@spot` for spot) may have at most that
    many instances (an offering that just reported no capacity keeps what runs, and gets no more)."""
    from autoscaler.planner import make_plan

    return _asked(make_plan, policy, rates, corrections, caps, current)


def default_bound(
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> float | None:
    """A cost `default_planner`'s plan for the same question surely does not exceed, told without
    planning afresh (planner.api.cost_ceiling), or None: what lets a tick whose cheaper plan is
    still waiting out scale_down_delay_s skip making that plan (Deps.bound)."""
    from autoscaler.planner.api import cost_ceiling

    return _asked(cost_ceiling, policy, rates, corrections, caps, current)


def _asked(
    fn: Callable[..., R],
    policy: Policy,
    rates: Mapping[str, float],
    corrections: Mapping[str, float],
    caps: Mapping[str, int],
    current: Plan | None,
) -> R:
    """`fn` (make_plan or cost_ceiling) on a question's planner inputs: offerings at a cap of 0
    left out, the others capped."""
    from autoscaler.planner import planning_inputs

    gone = frozenset(t for t, n in caps.items() if n <= 0)
    demands, options, models = planning_inputs(policy, rates=rates, corrections=corrections, unavailable=gone)
    return fn(
        demands,
        [_capped(o, caps.get(o.key)) for o in options],
        models,
        planner=policy.scaling.planner,
        current=current,
        max_instances=policy.scaling.instance_limit,
    )


_RECENT = RecentPlans(plan_now)  # default_planner's kept answers (pure: docs/planner.md)


def _capped(option, cap: int | None):  # type: ignore[no-untyped-def]
    if cap is None:
        return option
    limit = cap if option.max_instances is None else min(cap, option.max_instances)
    return replace(option, max_instances=limit)


def build_controller(
    policy: Policy,
    state_path: Path,
    clock: Callable[[], float] = time.time,
    store: Store | None = None,
    fence: Fence | None = None,
) -> Controller:
    """A controller with real dependencies; raises InputError for a policy that cannot run. The
    gateway is checked first (its binary and listen address: a gateway that cannot start is exit 2
    before anything is touched, not even the state file), then the state file is opened: a bad one
    is refused before any provider exists. With `fence` (`igniter run`), launches, terminations,
    agent applies and the gateway's changes (start, reload, routing) go out only while it holds,
    and each AWS request that is not a read is checked against it again as it is sent (bind_aws)."""
    check_gateway(policy, state_path)
    check_pool(policy)
    store = store or Store(state_path)
    try:
        provider = make_provider(policy, state_path, clock)
        pins = make_pins(policy, state_path, provider)
        transport, contact = make_transport(policy, pins)
        gateway = make_gateway(policy, state_path, provider)
        ensure_local_samples(policy, state_path)
    except BaseException:
        store.close()
        raise
    gateway = None if gateway is None else fenced(gateway, fence, GATEWAY_MUTATING)
    rates, interruptions = make_rates(policy, gateway), make_interruptions(policy)
    if fence is not None:  # every AWS request that is not a read is checked again as it is sent
        bind_aws(fence, (provider, interruptions, rates.source))
    deps = Deps(
        provider if fence is None else FencedProvider(provider, fence),
        transport if fence is None else FencedTransport(transport, fence),
        rates,
        store,
        default_planner,
        clock,
        contact,
        make_gate(policy, provider, pins),
        interruptions=_fenced_interruptions(interruptions, fence),
        gateway=gateway,
        model_root=model_root(policy, state_path),
        bound=default_bound,
    )
    return Controller(policy, deps)


def fenced(target: T, fence: Fence | None, mutating: Sequence[str]) -> T:
    """The hook for anything else that changes the fleet (the gateway's weights, drains, server
    sets): built here next to the provider and the transport, it gets the same fence, and each
    method named in `mutating` runs only while this process leads. Without a fence (a controller
    used as a library, a test), `target` itself."""
    return target if fence is None else fence.guard(target, mutating)


def lock_dir(policy: Policy) -> Path:
    """Where `leader: local` keeps its lock files: the same for every state file and every user
    of the host, so two users' autoscalers of one fleet never both lead it."""
    configured = policy.leader.lock_dir or os.environ.get("IGNITER_LOCK_DIR")
    from autoscaler.leader.local import HOST_LOCK_DIR

    return _relative(policy, configured) if configured else HOST_LOCK_DIR


def make_lease(policy: Policy) -> Lease:
    cfg = policy.leader
    owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
    if cfg.kind == "dynamodb":
        from autoscaler.leader.dynamodb import DynamoLease, make_client

        region = cfg.region or policy.provider.region
        client = make_client(region, cfg.endpoint_url or policy.provider.endpoint_url, cfg.lease_s)
        return DynamoLease(client, str(cfg.table), policy.fleet, owner, cfg.lease_s)
    from autoscaler.leader.local import LocalLease

    return LocalLease(lock_dir(policy) / f"{policy.fleet}.lock", owner)


def make_leadership(
    policy: Policy, fence: Fence, on_change: Callable[[bool], None] | None = None, lease: Lease | None = None
) -> Leadership:
    """The lease thread: a leader renews every third of the lease; a standby tries at least three
    times a tick (a local lock, at least every second), so it takes over within lease_s + a tick."""
    lease = lease or make_lease(policy)
    interval = policy.scaling.interval_s
    if lease.kind == "local":
        poll = max(0.2, min(1.0, interval / 3))
        return Leadership(lease, fence, fleet=policy.fleet, poll_s=poll, renew_s=poll, on_change=on_change)
    lease_s = policy.leader.lease_s
    poll = max(0.2, min(lease_s / 4, interval / 3))
    return Leadership(lease, fence, fleet=policy.fleet, poll_s=poll, renew_s=lease_s / 3, on_change=on_change)


def build_advisory_controller(policy: Policy, state_path: Path, clock: Callable[[], float] = time.time) -> Controller:
    """`igniter run --advisory` (loop/tick/advisory.py): the real provider, transport, gateway and rate
    source behind read-only adapters; no lease, no interruption queue, no sample models, its own
    host-key pins; no gateway check either (the gateway it reads is another process's, on the
    port that check would find taken)."""
    from autoscaler.loop.tick.advisory import (
        Advice,
        AdvisoryController,
        ReadOnlyGateway,
        ReadOnlyProvider,
        ReadOnlyTransport,
    )

    store = Store(state_path)
    try:
        provider = make_provider(policy, state_path, clock)
        own_pins = policy.model_copy(update={"agents": policy.agents.model_copy(update={"known_hosts": None})})
        pins = make_pins(own_pins, state_path, provider)
        transport, contact = make_transport(policy, pins)
        real_gateway = make_gateway(policy, state_path, provider)
    except BaseException:
        store.close()
        raise
    advice = Advice()
    gateway = None if real_gateway is None else ReadOnlyGateway(real_gateway, advice)
    deps = Deps(
        ReadOnlyProvider(provider, advice),
        ReadOnlyTransport(transport, advice),
        make_rates(policy, gateway),  # type: ignore[arg-type]
        store,
        default_planner,
        clock,
        contact,
        make_gate(policy, provider, pins),
        interruptions=None,
        gateway=gateway,  # type: ignore[arg-type]
        model_root=model_root(policy, state_path),
        bound=default_bound,
    )
    return AdvisoryController(policy, deps, advice)
