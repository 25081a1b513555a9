"""The ops policy: YAML parsed once into frozen, typed objects. Pure: no I/O beyond reading files.

Unknown keys are rejected everywhere so a typo (`slo:` for `slo_ms:`) fails loudly instead of
silently falling back to a default.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from autoscaler.config import limits
from autoscaler.config.errors import InputError, from_validation
from autoscaler.config.listen import parse_listen
from autoscaler.config.profile import Profile, load_profile
from autoscaler.config.yamlio import load_mapping


def bundled_profiles(source_root: Path = Path(__file__).resolve().parents[2], prefix: Path = Path(sys.prefix)) -> Path:
    """The profiles shipped with igniter: policies/profiles beside the source tree (a checkout or an
    editable install), else where the wheel installs them (<prefix>/share/igniter/profiles)."""
    beside = source_root / "policies" / "profiles"
    return beside if beside.is_dir() else prefix / "share" / "igniter" / "profiles"


BUNDLED_PROFILES = bundled_profiles()

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
# The ceilings of autoscaler/config/limits.py, one type each (docs/operations.md lists them).
Rate = Annotated[float, Field(ge=0, le=limits.MAX_RATE_RPS)]
Slo = Annotated[float, Field(gt=0, le=limits.MAX_SLO_MS)]
Price = Annotated[float, Field(gt=0, le=limits.MAX_PRICE_PER_HOUR)]
Seconds = Annotated[float, Field(gt=0, le=limits.MAX_SECONDS)]
Delay = Annotated[float, Field(ge=0, le=limits.MAX_SECONDS)]
Timeout = Annotated[float, Field(gt=0, le=limits.MAX_TIMEOUT_S)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class _Frozen(BaseModel):
    # allow_inf_nan=False: `.inf` and `.nan` are YAML floats, and no field of a policy means them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class InstanceType(_Frozen):
    """A GPU instance type the fleet may use; `gpu` names a profile file in profiles_dir."""

    name: Name
    gpu: Name
    gpus: Annotated[int, Field(ge=1, le=16)] = 1
    price_per_hour: Price
    max_instances: Annotated[int, Field(ge=0, le=limits.MAX_INSTANCES_CEILING)] | None = Field(
        default=None, description="instances of this type at most, on-demand and spot each (separate EC2 quotas)"
    )
    spot_price_per_hour: Price | None = Field(
        default=None, description="when set (and scaling.spot.enabled), the type may also be bought as spot"
    )


class Workload(_Frozen):
    """One inference workload: a model, its end-to-end latency SLO and its request rate."""

    name: Name
    model: Name
    slo_ms: Slo
    rate_rps: Rate = 0.0
    min_rate_rps: Rate = Field(
        default=0.0,
        description="capacity kept even when the observed rate is lower, e.g. to "
        "absorb traffic returning after a quiet period",
    )
    model_dir: str | None = Field(default=None, description="model directory on the agents (model.pt + model.yaml)")
    min_on_demand_fraction: Fraction | None = Field(
        default=None, description="this workload's on-demand floor (default: scaling.spot.min_on_demand_fraction)"
    )


class ProviderConfig(_Frozen):
    kind: Literal["local", "ec2"] = "local"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    launch_templates: dict[str, str] = Field(default_factory=dict)
    subnets: list[str] = Field(default_factory=list)
    ready_timeout_s: Seconds = 900.0
    unavailable_s: Seconds = Field(default=180.0, description="how long a type stays out after a capacity error")
    base_port: Annotated[int, Field(ge=1024, le=65000)] = 18100
    state_root: str | None = Field(default=None, description="local provider: where agent state dirs live")


class AgentsConfig(_Frozen):
    transport: Literal["ssh", "local", "none"] = "local"
    user: str = Field(default="igniter", description="ssh: the nodes' agent user (Terraform's agent_user)")
    key_file: str | None = None
    known_hosts: str | None = Field(
        default=None,
        description="ssh: with a provider that publishes host keys (ec2), the fleet-managed pin file "
        "(default: next to the state file); otherwise the known_hosts to check (default ~/.ssh/known_hosts)",
    )
    port: Annotated[int, Field(ge=1, le=65535)] = 22
    connect_timeout_s: Timeout = 10.0
    command_timeout_s: Timeout = 30.0
    host_override: str | None = None
    agent_command: str = "igniter-agent"
    state_dir: str = "/var/lib/igniter"
    server_base_port: Annotated[int, Field(ge=1024, le=65000)] = 8100
    model_root: str = Field(
        default="/var/lib/igniter/models", description="a workload without model_dir uses <model_root>/<model>"
    )


class CloudWatchRates(_Frozen):
    namespace: str = "Igniter/Inference"
    metric_name: str = "RequestCount"
    dimension_name: str = "Workload"
    period_s: Annotated[int, Field(ge=1, le=86400)] = 60
    statistic: Literal["Sum", "Average"] = "Sum"
    region: str | None = Field(default=None, description="default: provider.region")
    endpoint_url: str | None = Field(default=None, description="default: provider.endpoint_url")


class PrometheusRates(_Frozen):
    url: str = "http://127.0.0.1:9090"
    query: str = 'sum(rate(igniter_requests_total{{workload="{workload}"}}[1m]))'
    timeout_s: Timeout = 5.0


class RatesConfig(_Frozen):
    source: Literal["static", "agents", "gateway", "cloudwatch", "prometheus"] | None = Field(
        default=None, description="default: gateway when a gateway is configured, else static"
    )
    stale_after_s: Seconds = Field(
        default=300.0, description="how long the last good value is kept when a source fails"
    )
    cloudwatch: CloudWatchRates = Field(default_factory=CloudWatchRates)
    prometheus: PrometheusRates = Field(default_factory=PrometheusRates)


def _headroom(value: Any) -> Any:
    """'auto', or a number from 0 to 10: one message for either mistake (a union would give two)."""
    if value == "auto":
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 10:
        return float(value)
    raise ValueError(f"must be 'auto' or a finite number from 0 to 10 (got {value!r})")


class SpotConfig(_Frozen):
    """Spot capacity: only types with a spot_price_per_hour are ever bought as spot, so the default
    (enabled) changes nothing for a policy without spot prices; `enabled: false` stops buying spot
    without deleting the prices. SkyPilot's base_ondemand_fallback_replicas is the model for the floor."""

    enabled: bool = True
    min_on_demand_fraction: Fraction = Field(
        default=0.3, description="share of each workload's planned rate that stays on on-demand instances"
    )
    interruption_queue: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = Field(
        default=None, description="SQS queue URL that EventBridge feeds with EC2 interruption and health events"
    )
    queue_poll_s: NonNeg = Field(
        default=10.0,
        description="between ticks, the interruption queue is checked this often and a notice ticks at once "
        "(a spot warning gives 2 minutes; 0: the queue is read at ticks only)",
    )


class DisruptionBudget(_Frozen):
    """Karpenter's node budget: voluntary disruptions (scale-in, consolidation) in flight at once."""

    max_unavailable: int | str = Field(default="10%", description="a count, or a percentage of the fleet (rounded up)")

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _count_or_percent(cls, value: Any) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and re.fullmatch(r"(\d+(\.\d+)?)%", value.strip()):
            if float(value.strip().rstrip("%")) <= 100:
                return value.strip()
        raise ValueError(f'expected a count (0 or more) or a percentage such as "10%", got {value!r}')

    def limit(self, fleet_size: int) -> int:
        """The budget as a count for a fleet of `fleet_size` instances (a percentage rounds up)."""
        value = self.max_unavailable
        if isinstance(value, int):
            return value
        return math.ceil(float(value.rstrip("%")) * fleet_size / 100.0 - 1e-9)


Listen = Annotated[str, Field(pattern=r"^[^\s:]+:[0-9]{1,5}$", description="HOST:PORT")]


class GatewayConfig(_Frozen):
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


class ScalingConfig(_Frozen):
    interval_s: Annotated[float, Field(gt=0, le=limits.MAX_INTERVAL_S)] = 30.0
    settle_s: Delay = Field(
        default=15.0,
        description="after a tick whose make-before-break changes wait on servers "
        "it just started, the next tick comes after settle_s instead of interval_s (0: off)",
    )
    target_attainment: Annotated[float, Field(ge=0.5, lt=1)] = Field(
        default=0.999,
        description="headroom auto: the fraction of time each workload's ready capacity should cover its rate",
    )
    headroom: Annotated[Literal["auto"] | Annotated[float, Field(ge=0, le=10)], BeforeValidator(_headroom)] = Field(
        default="auto",
        description="auto: sized per workload from its own recent forecast errors for target_attainment "
        "(docs/operations.md); a number: plan for forecast * (1 + headroom)",
    )
    scale_down_delay_s: Delay = 600.0
    boot_s: Delay = 180.0
    max_cost_per_hour: Annotated[float, Field(gt=0, le=limits.MAX_FLEET_COST_PER_HOUR)] | None = None
    max_instances: Annotated[int, Field(ge=1, le=limits.MAX_INSTANCES_CEILING)] | None = Field(
        default=None,
        description=f"refuse a plan of more instances (default {limits.MAX_INSTANCES:,}, or no limit when "
        "max_cost_per_hour caps the fleet instead)",
    )
    max_surge: int | str | None = Field(
        default=None,
        description="extra (surge) instances a move may use at once while an old server waits for its "
        "replacement: a count or a percentage of the planned fleet (default: 1, or 10 % of the fleet "
        "if larger); 0 allows break-before-make where a GPU cannot hold old and new side by side",
    )
    forecast: Literal["last", "ewma", "holt", "seasonal"] = Field(
        default="seasonal",
        description="seasonal: ewma, never below the same stretch of the last seasons once the history covers "
        "one (docs/simulate.md: the measurement that chose it)",
    )
    season_s: Seconds = Field(default=86400.0, description="seasonal forecast: the period (a day)")
    seasons: Annotated[int, Field(ge=1, le=28)] = Field(
        default=1, description="seasonal forecast: periods to look back over"
    )
    planner: Literal["igniter", "ffd", "gslice", "gpulets", "exact"] = "igniter"
    spot: SpotConfig = Field(default_factory=SpotConfig)
    disruption_budget: DisruptionBudget = Field(default_factory=DisruptionBudget)
    status_listen: str | None = Field(
        default=None,
        description="HOST:PORT of the status endpoint (default 127.0.0.1:9464); HOST is an IP address, "
        "loopback or private (e.g. the host's VPC address, for Prometheus on another host); port 0 picks one",
    )
    status_port: Annotated[int, Field(ge=0, le=65535)] | None = Field(
        default=None, description="the older form of status_listen: 127.0.0.1:PORT"
    )
    status_token_file: str | None = Field(
        default=None,
        description="a file holding a bearer token that /v1/* then requires (Authorization: Bearer TOKEN); "
        "/healthz and /metrics stay open",
    )

    @field_validator("max_surge", mode="before")
    @classmethod
    def _surge(cls, value: Any) -> int | str | None:
        """A count of instances (0, 1, 2, ...) or a percentage of the planned fleet ("10%")."""
        if value is None or (
            isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limits.MAX_INSTANCES_CEILING
        ):
            return value
        if isinstance(value, str) and re.fullmatch(r"\d+(\.\d+)?%", value.strip()):
            return value.strip()
        raise _FieldError(
            "scaling.max_surge",
            f"{value!r}: expected a count of instances (0, 1, 2, ...) or a percentage such as '10%'",
        )

    @field_validator("status_listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            parse_listen(value)
        return value

    @model_validator(mode="after")
    def _one_status_address(self) -> ScalingConfig:
        if self.status_listen is not None and self.status_port is not None:
            raise _FieldError(
                "scaling.status_port",
                "give scaling.status_listen only (status_port is its older form, 127.0.0.1:PORT)",
            )
        return self

    @property
    def status_address(self) -> tuple[str, int]:
        """Where the status endpoint listens: status_listen, else 127.0.0.1:status_port, else the default."""
        if self.status_listen is not None:
            return parse_listen(self.status_listen)
        return ("127.0.0.1", 9464 if self.status_port is None else self.status_port)

    @property
    def instance_limit(self) -> int | None:
        """The most instances a plan may have; None when max_cost_per_hour caps the fleet instead."""
        if self.max_instances is not None:
            return self.max_instances
        return None if self.max_cost_per_hour is not None else limits.MAX_INSTANCES


class LeaderConfig(_Frozen):
    """One leader per fleet: every other `igniter run` for it is a standby (docs/operations.md)."""

    kind: Literal["local", "dynamodb"] = Field(
        default="local",
        description="local: an OS lock (fcntl) on this host, keyed by the fleet; "
        "dynamodb: a lease record with conditional writes, for autoscalers on several hosts",
    )
    table: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]{3,255}$",
        description="dynamodb: the lease table (Terraform's leader_table_name); partition key `fleet` (S)",
    )
    lease_s: Annotated[float, Field(ge=2, le=3600)] = Field(
        default=30.0, description="dynamodb: a leader that stops renewing is replaced after this long"
    )
    region: str | None = Field(default=None, description="dynamodb: default provider.region")
    endpoint_url: str | None = Field(default=None, description="dynamodb: default provider.endpoint_url")
    lock_dir: str | None = Field(
        default=None,
        description="local: where the lock files live (default $IGNITER_LOCK_DIR, else ~/.local/state/igniter); "
        "every autoscaler of the host must use the same one",
    )

    @model_validator(mode="after")
    def _table_for_dynamodb(self) -> LeaderConfig:
        if self.kind == "dynamodb" and not self.table:
            raise _FieldError("leader.table", "required with kind: dynamodb (the lease table's name)")
        return self


class Policy(_Frozen):
    """A whole policy. `source` is the file it came from (for error messages and relative paths)."""

    profiles_dir: Path = BUNDLED_PROFILES
    fleet: Name = "igniter"
    instance_types: Annotated[list[InstanceType], Field(min_length=1)]
    workloads: Annotated[list[Workload], Field(min_length=1)]
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    rates: RatesConfig = Field(default_factory=RatesConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    scaling: ScalingConfig = Field(default_factory=ScalingConfig)
    leader: LeaderConfig = Field(default_factory=LeaderConfig)
    source: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _defaults(self) -> Policy:
        """Defaults that depend on other sections: the gateway's kind on the provider, the rate
        source on the gateway. Resolved once here, so every reader sees a concrete value."""
        kind = self.gateway.kind or ("haproxy" if self.provider.kind == "local" else "none")
        source = self.rates.source or ("gateway" if kind != "none" else "static")
        if source == "gateway" and kind == "none":
            raise _FieldError("rates.source", "gateway needs a gateway (gateway.kind: haproxy)")
        if self.gateway.discover and self.provider.kind != "ec2":
            raise _FieldError(
                "gateway.discover", "discovering gateway hosts needs provider ec2 (or list gateway.hosts)"
            )
        gateway = self.gateway.model_copy(update={"kind": kind})
        rates = self.rates.model_copy(update={"source": source})
        object.__setattr__(self, "gateway", gateway)
        object.__setattr__(self, "rates", rates)
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        named: tuple[tuple[str, Sequence[InstanceType | Workload]], ...] = (
            ("instance_types", self.instance_types),
            ("workloads", self.workloads),
        )
        for section, items in named:
            seen: set[str] = set()
            for i, item in enumerate(items):
                if item.name in seen:
                    raise _FieldError(f"{section}[{i}].name", f"duplicate name {item.name!r}")
                seen.add(item.name)
        return self

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads if w.name == name)

    def instance_type(self, name: str) -> InstanceType:
        return next(t for t in self.instance_types if t.name == name)

    def on_demand_floor(self, workload: str) -> float:
        """The share of a workload's rate that must stay on on-demand capacity (1 without spot)."""
        if not self.buys_spot():
            return 1.0
        own = self.workload(workload).min_on_demand_fraction
        return self.scaling.spot.min_on_demand_fraction if own is None else own

    def buys_spot(self) -> bool:
        """Whether any type may be bought as spot: spot enabled and at least one spot price."""
        return self.scaling.spot.enabled and any(t.spot_price_per_hour is not None for t in self.instance_types)


class _FieldError(ValueError):
    """Raised inside validators to report an exact field path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def parse_policy(data: dict[str, Any], source: Path) -> Policy:
    """Validate a policy mapping read from `source`; resolve profiles and check models exist."""
    data = dict(data)
    data.pop("source", None)
    if "profiles_dir" in data and isinstance(data["profiles_dir"], str):
        data["profiles_dir"] = (source.parent / data["profiles_dir"]).resolve()
    try:
        policy = Policy.model_validate({**data, "source": source})
    except ValidationError as exc:
        inner = _field_error(exc)
        if inner is not None:
            raise InputError(source, inner.field, inner.message) from None
        raise from_validation(source, exc) from None
    load_profiles(policy)
    return policy


def _field_error(exc: ValidationError) -> _FieldError | None:
    for err in exc.errors(include_url=False):
        found = (err.get("ctx") or {}).get("error")
        if isinstance(found, _FieldError):
            return found
    return None


def load_policy(path: str | Path) -> Policy:
    """Read, validate and resolve a policy file. Raises InputError naming file and field."""
    source = Path(path)
    return parse_policy(load_mapping(source), source)


def load_profiles(policy: Policy) -> dict[str, Profile]:
    """Profiles by GPU name for every instance type; checks each workload's model is known."""
    src = policy.source or Path("<policy>")
    profiles: dict[str, Profile] = {}
    for i, itype in enumerate(policy.instance_types):
        path = policy.profiles_dir / f"{itype.gpu}.yaml"
        if not path.is_file():
            raise InputError(src, f"instance_types[{i}].gpu", f"no profile {itype.gpu!r}: {path} does not exist")
        profiles[itype.gpu] = load_profile(path)
    known = {m for p in profiles.values() for m in p.models}
    for i, wl in enumerate(policy.workloads):
        if wl.model not in known:
            raise InputError(
                src,
                f"workloads[{i}].model",
                f"model {wl.model!r} is in no profile of the instance types (known: {', '.join(sorted(known))})",
            )
    return profiles


def policy_json_schema() -> dict[str, Any]:
    """The JSON schema editors use to validate policies (policies/policy.schema.json)."""
    schema = Policy.model_json_schema(mode="validation")
    schema["properties"]["profiles_dir"] = {"type": "string", "description": "relative to the policy file"}
    schema["properties"].pop("source", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "igniter policy"
    return schema
