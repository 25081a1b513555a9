"""`leader:`: one leader per fleet, by an OS lock or a DynamoDB lease. Pure."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from autoscaler.config.fields import FieldError, Frozen


class LeaderConfig(Frozen):
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
        description="local: where the lock files live (default $IGNITER_LOCK_DIR, else /tmp/igniter-locks, "
        "shared by the host's users); every autoscaler of the host must use the same one",
    )

    @model_validator(mode="after")
    def _table_for_dynamodb(self) -> LeaderConfig:
        if self.kind == "dynamodb" and not self.table:
            raise FieldError("leader.table", "required with kind: dynamodb (the lease table's name)")
        return self
