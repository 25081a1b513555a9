"""EC2 provider (boto3): instances launched from the policy's launch templates, owned by tags.

- Launch: look for the slot's instance (fleet + slot + attempt tags) first; only if none is pending
  or running call RunInstances with the type's launch template, the instance type, tags applied at
  launch (TagSpecifications) and a ClientToken derived from fleet, slot and attempt only, so neither a
  retried request, nor a launch repeated after a crash, nor the same launch made by two leaders
  (one stopped past its lease right as its request left, after the lease check loop/service/fence.py's
  bind_aws makes as it is sent; the other rebuilt from the tags, hence the same slot and attempt)
  starts a second instance: EC2 answers the later request with the first one's instance. A token that names an instance already gone (a slot and attempt
  reused after the state file was lost, longer ago than EC2 lists terminated instances) is a
  NotFoundError: the record closes and the next attempt carries a new token. A spot launch is
  the same RunInstances with InstanceMarketOptions (spot, one-time, terminate on interruption):
  no spot request outlives its instance, and an interrupted instance is replaced by the loop, not
  restarted by EC2. Every launch carries `igniter:capacity-type`.
- Discovery is by the `igniter:fleet` tag only; termination refuses any instance without it.
- Throttling is retried by botocore's standard retry mode; what is left is classified into the
  rows of fleet/base.py's error table: CapacityError (try another offering: the type's spot or
  on-demand twin, or another type), ThrottledError (also: EC2 unreachable), NotFoundError,
  AuthError (credentials or IAM refused), PermanentError. On a spot launch,
  MaxSpotInstanceCountExceeded and SpotMaxPriceTooLow are capacity errors of the spot offering too.
- Host keys (the HostKeySource capability): read from the instance's console output
  (GetConsoleOutput), where cloud-init prints them; see fleet/console.py for why that is trusted.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from autoscaler.config.offerings import ON_DEMAND, SPOT
from autoscaler.config.policy import ProviderConfig
from autoscaler.fleet.base import (
    POOL_CLAIMED,
    POOL_MEMBER,
    TAG_ATTEMPT,
    TAG_CAPACITY,
    TAG_FLEET,
    TAG_PLAN_GENERATION,
    TAG_POOL,
    TAG_SLOT,
    AuthError,
    CapacityError,
    Instance,
    InstanceState,
    NotFoundError,
    PermanentError,
    ProviderError,
    ThrottledError,
    fleet_tags,
    launch_token,
    tag_int,
)
from autoscaler.fleet.console import console_text, parse_console
from autoscaler.fleet.ec2_batch import each_id
from autoscaler.fleet.ec2_pool import Ec2WarmPool, _but_gone

CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InstanceLimitExceeded",
        "Unsupported",
        "InsufficientHostCapacity",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
    }
)
# On a spot launch: no spot capacity at any price we pay, the account's spot limit, or a spot
# price above the launch template's MaxPrice. Each marks only the type's spot offering unavailable.
SPOT_CAPACITY_CODES = frozenset({"MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow", "InsufficientCapacity"})
SPOT_MARKET = {
    "MarketType": "spot",
    "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
}
THROTTLE_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "ServiceUnavailable", "InternalError", "Unavailable"}
)
AUTH_CODES = frozenset(
    {
        "AuthFailure",
        "UnauthorizedOperation",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "RequestExpired",
        "AccessDenied",
        "AccessDeniedException",
    }
)
LISTED_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
STATE_MAP: dict[str, InstanceState] = {"pending": "pending", "running": "running"}
# What EC2 answers when GetConsoleOutput's Latest=True is not available for an instance type
# (Latest needs the Nitro System; p3 is Xen): ask again for the buffered output instead.
LATEST_UNSUPPORTED = frozenset(
    {"UnsupportedOperation", "InvalidParameterCombination", "InvalidParameterValue", "InvalidParameter"}
)

log = logging.getLogger(__name__)


def make_client(cfg: ProviderConfig, max_attempts: int = 5) -> Any:
    """An EC2 client with botocore's standard retry mode (throttling backs off and retries)."""
    config = Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=30,
        user_agent_extra="igniter-autoscaler",
    )
    return boto3.client("ec2", region_name=cfg.region, endpoint_url=cfg.endpoint_url, config=config)


def classify(exc: Exception, instance_type: str = "", capacity_type: str = ON_DEMAND) -> ProviderError:
    """Map a boto error to the provider error that tells the controller whether to retry."""
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        message = str(exc.response.get("Error", {}).get("Message", code))
        if code in CAPACITY_CODES or (capacity_type == SPOT and code in SPOT_CAPACITY_CODES):
            return CapacityError(instance_type, f"{code}: {message}", capacity_type)
        if code in THROTTLE_CODES:
            return ThrottledError(f"{code}: {message}")
        if code in AUTH_CODES:
            return AuthError(f"{code}: {message}")
        if code.endswith("NotFound") or code.endswith("NotFoundException"):
            return NotFoundError(f"{code}: {message}")
        return PermanentError(f"{code}: {message}")
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return AuthError(f"no AWS credentials: {exc}")
    return ThrottledError(f"EC2 unreachable: {exc}")


class Ec2Provider(Ec2WarmPool):
    """Provider over one EC2 region; see the module docstring for the guarantees, and
    fleet/ec2_pool.py for its warm pool."""

    # RunInstances in flight at once for a run of launches (loop/steps/actuator.py): each call
    # keeps its own ClientToken and passes the send-time fence; boto3 clients are thread-safe.
    launch_concurrency = 8

    def __init__(self, fleet: str, cfg: ProviderConfig, client: Any | None = None) -> None:
        self.fleet = fleet
        self.cfg = cfg
        self.client = client if client is not None else make_client(cfg)
        self._no_latest: set[str] = set()  # instance types that refused Latest=True
        self._watch_changes()

    def list_instances(self) -> list[Instance]:
        """The fleet's instances, one DescribeInstances (paginated). The same listing holds the
        warm pool's members and says who owns what: it is kept for pool_members and the ownership
        checks of a batch until a request of this provider may have changed it (fleet/ec2_pool.py)."""
        filters = [
            {"Name": f"tag:{TAG_FLEET}", "Values": [self.fleet]},
            {"Name": "instance-state-name", "Values": LISTED_STATES},
        ]
        before, self._listing = self._changes, None  # a listing that fails holds nothing
        raw = self._raw(filters)
        self._hold(before, raw)
        fleet = (self._to_instance(r) for r in raw if _tags(r).get(TAG_POOL) != POOL_MEMBER)  # members: pool_members
        return sorted(fleet, key=lambda i: i.id)

    def launch(
        self,
        slot: str,
        instance_type: str,
        plan_generation: int,
        *,
        attempt: int = 0,
        salt: str = "",
        capacity_type: str = ON_DEMAND,
    ) -> Instance:
        existing = self._find(slot, attempt)
        if existing is not None:
            return existing
        request = self._run_request(slot, instance_type, plan_generation, attempt, capacity_type)
        try:
            reply = self.client.run_instances(**request)
        except (ClientError, BotoCoreError) as exc:
            raise classify(exc, instance_type, capacity_type) from exc
        raw = reply["Instances"][0]
        if raw.get("State", {}).get("Name") in ("shutting-down", "terminated"):
            raise NotFoundError(f"{slot}#{attempt}: its launch token names {raw.get('InstanceId')}, already gone")
        return self._to_instance(raw)

    def terminate(self, instance_id: str) -> None:
        found = list(self._describe_ids([instance_id]))
        if not found or found[0].get("State", {}).get("Name") == "terminated":
            return
        tags = _tags(found[0])
        if tags.get(TAG_FLEET) != self.fleet:
            raise PermanentError(f"refusing to terminate {instance_id}: it does not carry {TAG_FLEET}={self.fleet}")
        try:
            self.client.terminate_instances(InstanceIds=[instance_id])
        except ClientError as exc:
            err = classify(exc)
            if not isinstance(err, NotFoundError):
                raise err from exc

    def terminate_many(self, instance_ids: Sequence[str]) -> dict[str, ProviderError]:
        """fleet/base.py BatchTerminate: one DescribeInstances per DESCRIBE_IDS ids (ownership, as
        `terminate` checks it), then TerminateInstances with up to BATCH_IDS ids a request; an id
        that vanished in between is left out and the rest sent again (fleet/ec2_batch.py)."""
        found, failed = self._owned_many(instance_ids)
        call = self._ids_call("terminate_instances")
        failed.update(_but_gone(each_id(call, list(found), self._classify)))
        return failed

    def _classify(self, exc: Exception, instance_type: str = "") -> ProviderError:
        return classify(exc, instance_type)

    def close(self) -> None:
        """Nothing to release: the boto3 client's connections close with the process."""
        return None

    def host_keys(self, instance: Instance) -> list[str] | None:
        """The host keys cloud-init printed to the instance's console; None until the whole block
        is there. Lines of the block that are not valid keys are ignored, each with a log line."""
        parsed = parse_console(console_text(self._console_output(instance)))
        if parsed is None:
            return None
        for line in parsed.rejected:
            log.warning(
                "%s: ignoring a line of the console's host key block that is not a valid key: %.100r", instance.id, line
            )
        return list(parsed.keys)

    def _console_output(self, instance: Instance) -> str | bytes | None:
        """GetConsoleOutput, Latest=True where the type allows it (the buffered output is posted
        around state changes, so it can lag first boot by minutes); once a type refuses Latest, its
        instances are asked for the buffered output. A NotFound instance has no console: None."""
        if instance.instance_type not in self._no_latest:
            try:
                return self._get_console(instance.id, latest=True)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code not in LATEST_UNSUPPORTED:
                    return self._console_failed(exc)
                self._no_latest.add(instance.instance_type)
                log.info("%s: GetConsoleOutput refused Latest=True (%s); using the buffered output", instance.id, code)
        try:
            return self._get_console(instance.id, latest=False)
        except ClientError as exc:
            return self._console_failed(exc)

    def _get_console(self, instance_id: str, latest: bool) -> str | bytes | None:
        try:
            reply = self.client.get_console_output(InstanceId=instance_id, **({"Latest": True} if latest else {}))
        except BotoCoreError as exc:
            raise classify(exc) from exc
        return reply.get("Output")

    def _console_failed(self, exc: ClientError) -> None:
        err = classify(exc)
        if isinstance(err, NotFoundError):
            return None
        raise err from exc

    # -- helpers ----------------------------------------------------------------------------------
    def _run_request(
        self, slot: str, instance_type: str, plan_generation: int, attempt: int, capacity_type: str
    ) -> dict[str, Any]:
        tags = [
            {"Key": k, "Value": v}
            for k, v in fleet_tags(self.fleet, slot, plan_generation, attempt, capacity_type).items()
        ]
        tags.append({"Key": "Name", "Value": slot})
        request: dict[str, Any] = {
            "MinCount": 1,
            "MaxCount": 1,
            "InstanceType": instance_type,
            "LaunchTemplate": self._template(instance_type),
            "ClientToken": launch_token(self.fleet, slot, attempt),  # no state-file salt: the same across leaders
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
        }
        if capacity_type == SPOT:
            request["InstanceMarketOptions"] = SPOT_MARKET
        if self.cfg.subnets:
            request["SubnetId"] = self.cfg.subnets[zlib.crc32(slot.encode()) % len(self.cfg.subnets)]
        return request

    def _template(self, instance_type: str) -> dict[str, str]:
        ref = self.cfg.launch_templates.get(instance_type) or self.cfg.launch_templates.get("*")
        if not ref:
            raise PermanentError(f"no launch template for {instance_type} in provider.launch_templates")
        return {"LaunchTemplateId": ref} if ref.startswith("lt-") else {"LaunchTemplateName": ref}

    def _find(self, slot: str, attempt: int) -> Instance | None:
        """The slot's instance of this attempt: pending or running, or a warm-pool member a crash
        left claimed for it but stopped (started now; fleet/ec2_pool.py). One DescribeInstances."""
        filters = [
            {"Name": f"tag:{TAG_FLEET}", "Values": [self.fleet]},
            {"Name": f"tag:{TAG_SLOT}", "Values": [slot]},
            {"Name": f"tag:{TAG_ATTEMPT}", "Values": [str(attempt)]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]},
        ]
        for raw in self._raw(filters):
            if raw.get("State", {}).get("Name") != "stopped":
                return self._to_instance(raw)
            if _tags(raw).get(TAG_POOL) == POOL_CLAIMED:
                return self._started(raw)
        return None

    def _describe_ids(self, ids: list[str]) -> Iterable[dict[str, Any]]:
        try:
            reply = self.client.describe_instances(InstanceIds=ids)
        except ClientError as exc:
            err = classify(exc)
            if isinstance(err, NotFoundError):
                return []
            raise err from exc
        return [i for r in reply.get("Reservations", []) for i in r.get("Instances", [])]

    def _to_instance(self, raw: dict[str, Any]) -> Instance:
        tags = _tags(raw)
        launched = raw.get("LaunchTime")
        return Instance(
            id=raw["InstanceId"],
            instance_type=raw.get("InstanceType", ""),
            slot=tags.get(TAG_SLOT, ""),
            state=STATE_MAP.get(raw.get("State", {}).get("Name", ""), "stopping"),
            launched_at=launched.timestamp() if launched is not None else 0.0,
            address=raw.get("PrivateIpAddress"),
            plan_generation=tag_int(tags, TAG_PLAN_GENERATION),
            attempt=tag_int(tags, TAG_ATTEMPT),
            tags=tags,
            capacity_type=SPOT if raw.get("InstanceLifecycle") == "spot" else tags.get(TAG_CAPACITY, ON_DEMAND),
        )


def _tags(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", []) or []}
