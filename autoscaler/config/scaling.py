"""`scaling:`: when and how the fleet changes (interval, headroom, forecast, limits, spot, the
disruption budget, the status endpoint). Pure."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from autoscaler.config import limits
from autoscaler.config.fields import Delay, FieldError, Fraction, Frozen, NonNeg, Seconds
from autoscaler.config.listen import parse_listen


def _headroom(value: Any) -> Any:
    """'auto', or a number from 0 to 10: one message for either mistake (a union would give two)."""
    if value == "auto":
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 10:
        return float(value)
    raise ValueError(f"must be 'auto' or a finite number from 0 to 10 (got {value!r})")


def _count_not_bool(value: Any) -> Any:
    """YAML's `true` is not the count 1 (a Literal alone would take it)."""
    if isinstance(value, bool):
        raise ValueError(f"Input should be 1 or 2 (got {value!r})")
    return value


class SpotConfig(Frozen):
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


class FastPathConfig(Frozen):
    """Between ticks, a cheap watcher reads the rate source (the gateway's HAProxy counters) every
    poll_s and ticks at once where a workload outruns what it has; Knative KPA's panic mode is the
    model (a 6 s window at 2 x the target). A fast tick only adds capacity (docs/operations.md)."""

    enabled: bool = True
    poll_s: Annotated[float, Field(gt=0, le=3600)] = Field(default=2.0, description="how often the watcher reads")
    window_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=6.0, description="the panic window: the rate is the request counter's change over this long"
    )
    panic_ratio: Annotated[float, Field(gt=1, le=100)] = Field(
        default=2.0,
        description="a fast tick when a workload's rate reaches this multiple of the rate it was planned for, "
        "or exceeds its ready capacity",
    )
    min_gap_s: Annotated[float, Field(ge=0, le=86400)] = Field(
        default=30.0, description="at most one fast tick per this many seconds (and never during a tick)"
    )


class ReadyWatchConfig(Frozen):
    """Event ticks: between ticks, a watcher looks at what is coming up (an instance the provider
    now lists running, an agent that now answers, a server its agent now reports ready, one the
    gateway now checks healthy or sends requests to) and ticks at once when it sees something the
    last tick did not, as Karpenter acts on a node's registration rather than on a clock. It asks
    only about the instances and servers not up yet, so a settled fleet costs it nothing."""

    enabled: bool = True
    poll_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=1.0, description="how often the watcher looks while something is coming up"
    )
    min_gap_s: Annotated[float, Field(ge=0, le=86400)] = Field(
        default=2.0, description="at most one event tick per this many seconds (and never during a tick)"
    )


def _pool_size(value: Any) -> Any:
    """'auto', or a count of instances per type: one message for either mistake."""
    if value == "auto":
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limits.MAX_INSTANCES_CEILING:
        return value
    raise ValueError(f"must be 'auto' or a count of instances (0, 1, 2, ...), got {value!r}")


class WarmPoolConfig(Frozen):
    """Instances launched, initialised (agent up, models on disk) and then stopped, so that a scale-out
    starts one (StartInstances, ready in warm_boot_s) before it launches a new one (boot_s); EC2 Auto
    Scaling's warm pool of stopped instances is the model. A stopped instance costs only its EBS
    volume: volume_gb x price_per_gb_month (gp3's list price by default) / 730 h. Sized per type;
    `auto`: the most instances of the type launched within one boot_s over the last day, fleet
    bring-up excepted (docs/operations.md "Warm pool"). With `reuse_on_scale_in` (on by default) a
    retiring instance refills the pool instead of a launch that would warm up at the full price."""

    size: Annotated[int | Literal["auto"], BeforeValidator(_pool_size)] = Field(
        default=0, description="stopped instances kept per type: a count, or auto (from the last day's bursts)"
    )
    max: Annotated[int, Field(ge=0, le=limits.MAX_INSTANCES_CEILING, strict=True)] | None = Field(
        default=None, description="the most a pool of one type holds (default: size, or 4 with size auto)"
    )
    types: list[str] = Field(
        default_factory=list, description="instance types with a pool (default: every type of the policy)"
    )
    warm_boot_s: Delay = Field(
        default=45.0, description="from StartInstances of a pooled instance to its agent serving"
    )
    volume_gb: Annotated[float, Field(ge=0, le=65536, strict=True)] = Field(
        default=200.0, description="EBS GB a stopped instance keeps (root volume with the models)"
    )
    price_per_gb_month: Annotated[float, Field(ge=0, le=100, strict=True)] = Field(
        default=0.08, description="$ per GB-month of a stopped instance's volumes (gp3 in us-east-1)"
    )
    reuse_on_scale_in: bool = Field(
        default=True,
        description="stop an on-demand instance the plan retires into its type's pool while the pool is below "
        "its target, instead of terminating it (EC2 Auto Scaling's ReuseOnScaleIn)",
    )
    refill_delay_s: Delay = Field(
        default=1800.0,
        description="with reuse_on_scale_in: a type's pool is refilled by launches only this long after it last "
        "gave a member (until then the scale-in after the burst refills it)",
    )

    @model_validator(mode="after")
    def _size_within_max(self) -> WarmPoolConfig:
        if isinstance(self.size, int) and self.max is not None and self.size > self.max:
            raise FieldError("scaling.warm_pool.size", f"{self.size} is above scaling.warm_pool.max ({self.max})")
        return self

    @property
    def enabled(self) -> bool:
        return self.size == "auto" or self.size > 0

    @property
    def cap(self) -> int:
        """The most one type's pool holds."""
        if self.max is not None:
            return self.max
        return 4 if self.size == "auto" else int(self.size)

    @property
    def stopped_price_per_hour(self) -> float:
        """What one stopped instance costs per hour (its EBS volumes; a month is 730 h)."""
        return self.volume_gb * self.price_per_gb_month / 730.0


class DisruptionBudget(Frozen):
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


class RedundancyConfig(Frozen):
    """Fault domains: how many servers each workload keeps and what they must not share. With
    min_servers 2 every workload runs on at least two servers in different domains, sized N+1: the
    servers left after any one domain is lost still carry the workload's whole planned rate within
    its SLO (docs/planner.md, "Fault domains"). Under MPS one client's fatal error takes down every
    client on that GPU (NVIDIA's MPS documentation), so `gpu` is the smallest useful domain."""

    min_servers: Annotated[Literal[1, 2], BeforeValidator(_count_not_bool)] = Field(
        default=1,
        description="1: a workload may run on one server (no redundancy); 2: at least two servers, in "
        "different fault domains, each domain's loss leaving enough capacity for the whole rate",
    )
    spread: Literal["gpu", "instance"] = Field(
        default="gpu",
        description="min_servers 2: the fault domain its servers must not share: a GPU (one MPS daemon) "
        "or a whole instance",
    )


class ScalingConfig(Frozen):
    interval_s: Annotated[float, Field(gt=0, le=limits.MAX_INTERVAL_S)] = 30.0
    settle_s: Delay = Field(
        default=15.0,
        description="after a tick whose make-before-break changes wait on servers "
        "it just started, the next tick comes after settle_s instead of interval_s (0: off)",
    )
    plan_on: Literal["tick", "interval"] = Field(
        default="tick",
        description="tick: every tick forecasts and plans; interval: a tick forecasts and plans only "
        "interval_s after the last one that did (or on the fast path, or after a launch found no "
        "capacity), and the early ticks between (settle_s, boots, drains, spot warnings) carry the "
        "rollout on to the standing layout (docs/operations.md, Fleet size)",
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
    headroom_window_s: Seconds = Field(
        default=21600.0,
        description="headroom auto: how long a forecast error counts (the error histogram's decay time "
        "constant); shorter is cheaper and misses more (docs/simulate.md: the measured trade-off)",
    )
    headroom_feedback_s: Delay = Field(
        default=21600.0,
        description="headroom auto: the time constant with which the quantile the headroom is sized at "
        "follows the attainment measured (adaptive conformal inference; 0: stay at target_attainment)",
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
    forecast: Literal["last", "ewma", "holt", "seasonal", "auto"] = Field(
        default="seasonal",
        description="seasonal: ewma, never below the same stretch of the last seasons once the history covers "
        "one (docs/simulate.md: the measurement that chose it); auto: seasonal, plus the rise the periods "
        "found in the last max(1 day, seasons * season_s) say comes within boot_s + interval_s (opt-in)",
    )
    ramp_reads: Annotated[int, Field(ge=0, le=20, strict=True)] = Field(
        default=3,
        description="headroom auto: where the rate rose between each of the last ramp_reads reads, plan at "
        "least for that rise going on at its least slope for boot_s + interval_s (the ramp floor; 0: off)",
    )
    onset_spread_s: Annotated[float, Field(ge=0, le=3600, strict=True)] = Field(
        default=0.0,
        description="forecast auto: the most a recurring burst's onset may wander from its period; a burst's "
        "capacity is planned that much before its predicted onset and held that much after, by the spread "
        "the last cycles show (all of it while only two are known), and a period whose held-out bursts come "
        "within it of the fold passes the out-of-sample test (docs/simulate.md); 0: off",
    )
    season_s: Seconds = Field(default=86400.0, description="seasonal forecast: the period (a day)")
    seasons: Annotated[int, Field(ge=1, le=28)] = Field(
        default=1, description="seasonal forecast: periods to look back over"
    )
    planner: Literal["igniter", "ffd", "gslice", "gpulets", "exact"] = "igniter"
    mig_latency_margin: Annotated[float, Field(ge=0.0, lt=1.0, allow_inf_nan=False)] = Field(
        default=0.1,
        description="MIG GPUs (measured profiles): a measured row serves a workload only when its latency is "
        "at most (1 - margin) x SLO / 2 (ParvaGPU's rule; docs/planner.md)",
    )
    burst: bool = Field(
        default=True,
        description="while a short workload's new capacity boots, stand-ins carry what they can in the MPS "
        "share that ready GPUs leave free, where the model says every neighbour still meets its SLO",
    )
    redundancy: RedundancyConfig = Field(default_factory=RedundancyConfig)
    spot: SpotConfig = Field(default_factory=SpotConfig)
    warm_pool: WarmPoolConfig = Field(default_factory=WarmPoolConfig)
    fast_path: FastPathConfig = Field(default_factory=FastPathConfig)
    ready_watch: ReadyWatchConfig = Field(default_factory=ReadyWatchConfig)
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
        raise FieldError(
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
    def _redundant_planner(self) -> ScalingConfig:
        """Only the igniter planner knows fault domains; the baselines and the MILP would ignore them."""
        why = self.redundancy_refuses(self.planner)
        if why is not None:
            raise FieldError("scaling.redundancy.min_servers", why)
        return self

    def redundancy_refuses(self, planner: str) -> str | None:
        """Why `planner` cannot plan this redundancy (None: it can): fault domains are planned by
        the igniter planners only (igniter, igniter-lean, igniter-plain)."""
        if self.redundancy.min_servers > 1 and not planner.startswith("igniter"):
            return f"2 needs the igniter planner (planner {planner!r} does not plan fault domains)"
        return None

    @model_validator(mode="after")
    def _one_status_address(self) -> ScalingConfig:
        if self.status_listen is not None and self.status_port is not None:
            raise FieldError(
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
