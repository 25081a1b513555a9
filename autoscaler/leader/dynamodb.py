"""`leader: {kind: dynamodb, table: T, lease_s: 30}`: the standard AWS lease, one item per fleet.

The item: `fleet` (partition key), `owner` (host:pid:random of the holder; empty once released),
`token` (the fencing counter: one more per new tenure), `rvn` (a new random version at every
write), `lease_s`, and `renewed_at` (wall clock, for people only: no decision reads it).

- Renew: UpdateItem, conditional on `owner = me AND token = mine`. A holder that was replaced
  fails the condition and knows at once.
- Take over: only after the same `rvn` stayed unchanged for a whole `lease_s` on the candidate's
  own monotonic clock (as amazon-dynamodb-lock-client does), then UpdateItem conditional on that
  `rvn` and with `token + 1`; a released item (empty owner) or no item at all is taken at once.
  No two hosts' clocks are ever compared.
- The holder's term ends `margin_s` before the lease would (base.py), so a paused leader's fence
  closes before any standby can have taken over.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.leader.base import LeaseError, Term

CONFLICT = "ConditionalCheckFailedException"
PERMANENT = frozenset({"ResourceNotFoundException", "AccessDeniedException", "ValidationException"})


class LeaseConfigError(LeaseError):
    """The table is missing or may not be used: a configuration problem, not a passing fault."""

    permanent = True


def make_client(region: str, endpoint_url: str | None, lease_s: float) -> Any:
    """A DynamoDB client whose calls give up well within a lease (a renewal that hangs is no renewal)."""
    import boto3
    from botocore.config import Config

    timeout = max(1.0, min(5.0, lease_s / 4))
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 2},
        connect_timeout=timeout,
        read_timeout=timeout,
        user_agent_extra="igniter-autoscaler",
    )
    return boto3.client("dynamodb", region_name=region, endpoint_url=endpoint_url, config=config)


class DynamoLease:
    kind = "dynamodb"

    def __init__(
        self, client: Any, table: str, fleet: str, owner: str, lease_s: float, wall: Callable[[], float] = time.time
    ) -> None:
        self.client, self.table, self.fleet, self.owner = client, table, fleet, owner
        self.lease_s = lease_s
        self.margin_s = max(0.5, lease_s / 4)
        self._wall = wall
        self._token: int | None = None
        self._seen: tuple[str, float] | None = None  # another holder's rvn, and when we first saw it

    def attempt(self, now: float) -> Term:
        return self._renew(now) if self._token is not None else self._try_take(now)

    def release(self) -> None:
        if self._token is None:
            return
        token, self._token = self._token, None
        try:
            self._update(token, owner="", condition="#owner = :me AND #token = :token", token_now=token)
        except LeaseError:
            pass  # replaced already, or unreachable: the lease runs out by itself

    # -- the two round trips ------------------------------------------------------------------
    def _renew(self, now: float) -> Term:
        token = self._token
        assert token is not None
        if not self._update(token, owner=self.owner, condition="#owner = :me AND #token = :token", token_now=token):
            self._token = None
            item = self._get() or {}
            holder = item.get("owner", "")
            return Term(leader=False, token=item.get("token", 0), holder=holder, note=f"lost the lease to {holder}")
        return self._term(token, now)

    def _try_take(self, now: float) -> Term:
        item = self._get()
        if item is None:
            return self._take(now, 1, "attribute_not_exists(#fleet)", {})
        if item["owner"] == self.owner:  # our own write whose reply was lost
            self._token = item["token"]
            return self._renew(now)
        renewed = self._seen is not None and self._seen[0] != item["rvn"]
        if item["owner"] and not self._expired(item, now):
            left = self._seen[1] + item["lease_s"] - now if self._seen else item["lease_s"]
            note = f"{item['owner']} holds the lease (token {item['token']}); taken over if not renewed in {left:.0f} s"
            return Term(leader=False, token=item["token"], holder=item["owner"], note=note, holder_alive=renewed)
        return self._take(now, item["token"] + 1, "#rvn = :seen", {":seen": {"S": item["rvn"]}})

    def _expired(self, item: dict[str, Any], now: float) -> bool:
        """True once the holder's record version has not changed for a whole lease, by our clock."""
        if self._seen is None or self._seen[0] != item["rvn"]:
            self._seen = (item["rvn"], now)
            return False
        return now - self._seen[1] >= item["lease_s"]

    def _take(self, now: float, token: int, condition: str, values: dict[str, Any]) -> Term:
        if not self._put(token, condition, values):
            item = self._get() or {}
            holder = item.get("owner", "")
            return Term(leader=False, token=item.get("token", 0), holder=holder, note=f"{holder} took the lease first")
        self._token, self._seen = token, None
        return self._term(token, now)

    def _term(self, token: int, now: float) -> Term:
        return Term(leader=True, token=token, holder=self.owner, valid_until=now + self.lease_s - self.margin_s)

    # -- DynamoDB -------------------------------------------------------------------------------
    def _item(self, token: int, owner: str) -> dict[str, Any]:
        return {
            "fleet": {"S": self.fleet},
            "owner": {"S": owner},
            "token": {"N": str(token)},
            "rvn": {"S": secrets.token_hex(8)},
            "lease_s": {"N": repr(float(self.lease_s))},
            "renewed_at": {"N": repr(round(self._wall(), 3))},
        }

    def _put(self, token: int, condition: str, values: dict[str, Any]) -> bool:
        """PutItem of a new tenure under `condition`; False when another candidate won."""
        names = {"#fleet": "fleet"} if "#fleet" in condition else {"#rvn": "rvn"}
        kwargs: dict[str, Any] = {"ExpressionAttributeValues": values} if values else {}
        return self._call(
            "put_item",
            TableName=self.table,
            Item=self._item(token, self.owner),
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            **kwargs,
        )

    def _update(self, token: int, *, owner: str, condition: str, token_now: int) -> bool:
        """Rewrite our own item (renew or release) under `condition`; False once we were replaced."""
        item = self._item(token, owner)
        return self._call(
            "update_item",
            TableName=self.table,
            Key={"fleet": item["fleet"]},
            UpdateExpression="SET #owner = :owner, #rvn = :rvn, #lease = :lease, #renewed = :renewed",
            ConditionExpression=condition,
            ExpressionAttributeNames={
                "#owner": "owner",
                "#token": "token",
                "#rvn": "rvn",
                "#lease": "lease_s",
                "#renewed": "renewed_at",
            },
            ExpressionAttributeValues={
                ":owner": item["owner"],
                ":rvn": item["rvn"],
                ":lease": item["lease_s"],
                ":renewed": item["renewed_at"],
                ":me": {"S": self.owner},
                ":token": {"N": str(token_now)},
            },
        )

    def _get(self) -> dict[str, Any] | None:
        try:
            reply = self.client.get_item(TableName=self.table, Key={"fleet": {"S": self.fleet}}, ConsistentRead=True)
        except (ClientError, BotoCoreError) as exc:
            raise _classify(exc, self.table) from None
        raw = reply.get("Item")
        if raw is None:
            return None
        return {
            "owner": raw.get("owner", {}).get("S", ""),
            "token": int(raw.get("token", {}).get("N", "0")),
            "rvn": raw.get("rvn", {}).get("S", ""),
            "lease_s": float(raw.get("lease_s", {}).get("N", str(self.lease_s))),
        }

    def _call(self, method: str, **kwargs: Any) -> bool:
        try:
            getattr(self.client, method)(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == CONFLICT:
                return False
            raise _classify(exc, self.table) from None
        except BotoCoreError as exc:
            raise _classify(exc, self.table) from None
        return True


def _classify(exc: Exception, table: str) -> LeaseError:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        message = str(exc.response.get("Error", {}).get("Message", code))
        if code in PERMANENT:
            return LeaseConfigError(f"DynamoDB table {table!r}: {code}: {message}")
        return LeaseError(f"DynamoDB: {code}: {message}")
    return LeaseError(f"DynamoDB unreachable: {exc}")
