"""The ops policy: YAML parsed once into frozen, typed objects. Pure: no I/O beyond reading files.

The sections with a subsystem of their own live beside it (scaling.py, gateway.py, leader.py, on
the shared field types of fields.py); this module holds the fleet's own sections, the whole
Policy and its loading, and re-exports the rest so `autoscaler.config.policy` stays the one import.

Unknown keys are rejected everywhere so a typo (`slo:` for `slo_ms:`) fails loudly instead of
silently falling back to a default.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from autoscaler.config import limits
from autoscaler.config.errors import InputError, from_validation
from autoscaler.config.fields import FieldError, Fraction, Frozen, Name, Price, Rate, Seconds, Slo, Timeout
from autoscaler.config.gateway import GatewayConfig
from autoscaler.config.leader import LeaderConfig
from autoscaler.config.profile import AnyProfile, MeasuredProfile, load_any_profile
from autoscaler.config.scaling import DisruptionBudget, ScalingConfig, SpotConfig
from autoscaler.config.yamlio import load_mapping

__all__ = [
    "BUNDLED_PROFILES",
    "CLOUD_MODEL_ROOT",
    "AgentsConfig",
    "CloudWatchRates",
    "DisruptionBudget",
    "GatewayConfig",
    "InstanceType",
    "LeaderConfig",
    "Policy",
    "PrometheusRates",
    "ProviderConfig",
    "RatesConfig",
    "ScalingConfig",
    "SpotConfig",
    "StateConfig",
    "Workload",
    "bundled_profiles",
    "load_policy",
    "load_profiles",
    "parse_policy",
    "policy_json_schema",
]


def bundled_profiles(source_root: Path = Path(__file__).resolve().parents[2], prefix: Path = Path(sys.prefix)) -> Path:
    """The profiles shipped with igniter: policies/profiles beside the source tree (a checkout or an
    editable install), else where the wheel installs them (<prefix>/share/igniter/profiles)."""
    beside = source_root / "policies" / "profiles"
    return beside if beside.is_dir() else prefix / "share" / "igniter" / "profiles"


BUNDLED_PROFILES = bundled_profiles()


class InstanceType(Frozen):
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


class Workload(Frozen):
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


class ProviderConfig(Frozen):
    kind: Literal["local", "ec2"] = "local"
    region: str = "us-east-1"
    endpoint_url: str | None = None
    launch_templates: dict[str, str] = Field(default_factory=dict)
    subnets: list[str] = Field(default_factory=list)
    ready_timeout_s: Seconds = 900.0
    unavailable_s: Seconds = Field(default=180.0, description="how long a type stays out after a capacity error")
    base_port: Annotated[int, Field(ge=1024, le=65000)] = 18100
    state_root: str | None = Field(default=None, description="local provider: where agent state dirs live")


CLOUD_MODEL_ROOT = "/var/lib/igniter/models"  # where a VM keeps <model>/model.pt unless agents.model_root says


def _command_words(value: str) -> str:
    """A command line split as a shell would (shlex): an unclosed quote is an error of the
    policy, not of the first launch."""
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"not a command line: {exc} in {value!r}") from None
    if not words:
        raise ValueError("is empty: name the agent's command (default igniter-agent)")
    return value


class AgentsConfig(Frozen):
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
    max_concurrency: Annotated[int, Field(ge=1, le=1024, strict=True)] = Field(
        default=32,
        description="agent status reads and applies started at once; a call past 0.5 s gives its slot to the "
        "next (at most twice as many in flight), each is bounded by connect_timeout_s + command_timeout_s, "
        "so a dead agent costs its own deadline, not the tick's",
    )
    host_override: str | None = None
    agent_command: Annotated[str, AfterValidator(_command_words)] = "igniter-agent"
    state_dir: str = "/var/lib/igniter"
    server_base_port: Annotated[int, Field(ge=1024, le=65000)] = 8100
    model_root: str | None = Field(
        default=None,
        description="a workload without model_dir uses <model_root>/<model>; default /var/lib/igniter/models, "
        "and with provider local `models` beside the state file, where igniter run writes sample models",
    )


class CloudWatchRates(Frozen):
    namespace: str = "Igniter/Inference"
    metric_name: str = "RequestCount"
    dimension_name: str = "Workload"
    period_s: Annotated[int, Field(ge=1, le=86400)] = 60
    statistic: Literal["Sum", "Average"] = "Sum"
    region: str | None = Field(default=None, description="default: provider.region")
    endpoint_url: str | None = Field(default=None, description="default: provider.endpoint_url")


class PrometheusRates(Frozen):
    url: str = "http://127.0.0.1:9090"
    query: str = 'sum(rate(igniter_requests_total{{workload="{workload}"}}[1m]))'
    timeout_s: Timeout = 5.0


class RatesConfig(Frozen):
    source: Literal["static", "agents", "gateway", "cloudwatch", "prometheus"] | None = Field(
        default=None, description="default: gateway when a gateway is configured, else static"
    )
    stale_after_s: Seconds = Field(
        default=300.0, description="how long the last good value is kept when a source fails"
    )
    cloudwatch: CloudWatchRates = Field(default_factory=CloudWatchRates)
    prometheus: PrometheusRates = Field(default_factory=PrometheusRates)


class StateConfig(Frozen):
    """What the state file keeps of the past (loop/state/store.py): enough to explain the last
    days, and no more, so its size and a tick's work in it do not grow with the fleet's age."""

    history_s: Seconds = Field(
        default=7 * 86400.0,
        description="ticks, actions, lifecycle history and closed instance records older than this are "
        "dropped (rates are kept as long as the forecast's seasons need, layouts the newest 500)",
    )


class Policy(Frozen):
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
    state: StateConfig = Field(default_factory=StateConfig)
    source: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _defaults(self) -> Policy:
        """Defaults that depend on other sections: the gateway's kind on the provider, the rate
        source on the gateway. Resolved once here, so every reader sees a concrete value."""
        kind = self.gateway.kind or ("haproxy" if self.provider.kind == "local" else "none")
        source = self.rates.source or ("gateway" if kind != "none" else "static")
        if source == "gateway" and kind == "none":
            raise FieldError("rates.source", "gateway needs a gateway (gateway.kind: haproxy)")
        if self.gateway.discover and self.provider.kind != "ec2":
            raise FieldError("gateway.discover", "discovering gateway hosts needs provider ec2 (or list gateway.hosts)")
        gateway = self.gateway.model_copy(update={"kind": kind})
        rates = self.rates.model_copy(update={"source": source})
        object.__setattr__(self, "gateway", gateway)
        object.__setattr__(self, "rates", rates)
        return self

    @model_validator(mode="after")
    def _warm_pool(self) -> Policy:
        """A pool names types of the policy (the provider's part is checked where it is built)."""
        pool = self.scaling.warm_pool
        names = {t.name for t in self.instance_types}
        for i, name in enumerate(pool.types):
            if name not in names:
                raise FieldError(f"scaling.warm_pool.types[{i}]", f"{name!r} is not one of instance_types")
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
                    raise FieldError(f"{section}[{i}].name", f"duplicate name {item.name!r}")
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


def _field_error(exc: ValidationError) -> FieldError | None:
    for err in exc.errors(include_url=False):
        found = (err.get("ctx") or {}).get("error")
        if isinstance(found, FieldError):
            return found
    return None


def load_policy(path: str | Path) -> Policy:
    """Read, validate and resolve a policy file. Raises InputError naming file and field."""
    source = Path(path)
    return parse_policy(load_mapping(source), source)


def load_profiles(policy: Policy) -> dict[str, AnyProfile]:
    """Profiles (either kind) by GPU name for every instance type; checks each workload's model is known."""
    src = policy.source or Path("<policy>")
    profiles: dict[str, AnyProfile] = {}
    for i, itype in enumerate(policy.instance_types):
        path = policy.profiles_dir / f"{itype.gpu}.yaml"
        if not path.is_file():
            raise InputError(
                src,
                f"instance_types[{i}].gpu",
                f"no profile {itype.gpu!r}: {path} does not exist (measure one with `igniter-agent profile`, "
                "or convert measured MIG tables with `igniter profile import`)",
            )
        profiles[itype.gpu] = load_any_profile(path)
    _check_redundancy(policy, profiles, src)
    known = {m for p in profiles.values() for m in p.models}
    for i, wl in enumerate(policy.workloads):
        if wl.model not in known:
            raise InputError(
                src,
                f"workloads[{i}].model",
                f"model {wl.model!r} is in no profile of the instance types (known: {', '.join(sorted(known))})",
            )
    return profiles


def _check_redundancy(policy: Policy, profiles: dict[str, AnyProfile], src: Path) -> None:
    """On MIG GPU types min_servers 2 is planned with the GPU as the fault domain (each slice of a
    workload on a GPU of its own, planner/mig/spread.py); spread instance is not planned there."""
    mig = sorted(g for g, p in profiles.items() if isinstance(p, MeasuredProfile))
    red = policy.scaling.redundancy
    if red.min_servers > 1 and red.spread != "gpu" and mig:
        raise InputError(
            src,
            "scaling.redundancy.spread",
            f"instance is not supported with MIG GPU types ({', '.join(mig)}): the MIG planner spreads a "
            "workload's slices over GPUs; use spread gpu",
        )


def policy_json_schema() -> dict[str, Any]:
    """The JSON schema editors use to validate policies (policies/policy.schema.json)."""
    schema = Policy.model_json_schema(mode="validation")
    schema["properties"]["profiles_dir"] = {"type": "string", "description": "relative to the policy file"}
    schema["properties"].pop("source", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "igniter policy"
    return schema
