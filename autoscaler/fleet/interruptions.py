"""Interruption notices from an SQS queue that EventBridge feeds (the InterruptionSource for EC2).

The Terraform fleet module creates the queue and the EventBridge rules that send it four kinds of
events, the ones Karpenter's interruption controller reads:

| event (detail-type)                          | notice           | what the tick does                      |
| -------------------------------------------- | ---------------- | --------------------------------------- |
| EC2 Spot Instance Interruption Warning       | interruption     | going away (EC2 takes it in 2 minutes)  |
| EC2 Instance Rebalance Recommendation        | rebalance        | going away (replaced before it is lost) |
| EC2 Instance State-change Notification       | state_change     | going away when stopping/shutting down  |
| AWS Health Event, EC2, scheduledChange       | scheduled_change | going away (retirement, maintenance)    |

Anything else (another event, a state change to running) is `ignored`; a body that is not such
an event is `malformed` (logged). Each message is parsed on its own: one that cannot be read at
all (nested thousands deep, which json turns into a RecursionError; anything else that raises)
is `malformed` too, and the rest of its batch is handled in the same tick. Every message is
deleted once its tick has handled it, poison ones included (SQS would otherwise show it again
every visibility timeout, forever). Messages
sent through SNS (an envelope with `"Type": "Notification"`) are unwrapped. A queue that cannot be
read is logged and reads as empty: a tick never fails because of it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.fleet.base import Notice

log = logging.getLogger(__name__)

WARNING_S = 120.0  # EC2 gives a spot instance two minutes after the interruption warning
GOING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH = "AWS Health Event"
DETAIL_TYPES = (SPOT_WARNING, REBALANCE, STATE_CHANGE, HEALTH)  # what terraform's rules send (a test checks)
BATCHES = 10  # receive calls per tick at most (10 messages each)


def make_sqs_client(region: str, endpoint_url: str | None) -> Any:
    config = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=5, read_timeout=10)
    return boto3.client("sqs", region_name=region, endpoint_url=endpoint_url, config=config)


class SqsInterruptions:
    """InterruptionSource over one SQS queue (fleet/base.py states the contract)."""

    def __init__(self, queue_url: str, client: Any) -> None:
        self.queue_url = queue_url
        self.client = client
        self.errors = 0  # receive or delete calls that failed
        self._seen: list[Notice] = []  # received by `poll`, not yet handed to a tick
        self._lock = threading.Lock()  # poll runs in the scheduler's thread, receive in the tick's

    def receive(self) -> list[Notice]:
        fresh = self._fetch(BATCHES)
        with self._lock:
            out, self._seen = [*self._seen, *fresh], []
        return out

    def poll(self) -> bool:
        fresh = self._fetch(1)
        with self._lock:
            self._seen.extend(fresh)
            return any(n.instance_ids for n in self._seen)

    def _fetch(self, batches: int) -> list[Notice]:
        out: list[Notice] = []
        for _ in range(batches):
            try:
                reply = self.client.receive_message(
                    QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=60
                )
            except (ClientError, BotoCoreError) as exc:
                self.errors += 1
                log.warning("interruption queue %s: receive failed: %s", self.queue_url, exc)
                break
            messages = reply.get("Messages", [])
            out.extend(_isolated(m) for m in messages)
            if len(messages) < 10:
                break
        return out

    def done(self, notices: Sequence[Notice]) -> None:
        handles = [n.token for n in notices if n.token]
        for i in range(0, len(handles), 10):
            batch = [{"Id": str(k), "ReceiptHandle": h} for k, h in enumerate(handles[i : i + 10])]
            try:
                reply = self.client.delete_message_batch(QueueUrl=self.queue_url, Entries=batch)
            except (ClientError, BotoCoreError) as exc:
                self.errors += 1
                log.warning("interruption queue %s: delete failed (seen again later): %s", self.queue_url, exc)
                continue
            for failed in reply.get("Failed", []):
                log.warning("interruption queue %s: message not deleted: %s", self.queue_url, failed)


def _isolated(message: dict[str, Any]) -> Notice:
    """One message of a batch, whatever it holds: a parse that raises what parse_message does not
    expect makes that message malformed (deleted and logged), never the batch undeleted."""
    token = str(message.get("ReceiptHandle", ""))
    try:
        return parse_message(str(message.get("Body", "")), token)
    except Exception as exc:  # a poison message must not block its neighbours
        log.warning("interruption queue: unreadable message deleted (%s)", type(exc).__name__)
        return Notice(kind="malformed", detail=f"unreadable: {type(exc).__name__}", token=token)


def parse_message(body: str, token: str = "") -> Notice:
    """One SQS message body (an EventBridge event, possibly in an SNS envelope) as a Notice."""
    try:
        event = json.loads(body)
        if isinstance(event, dict) and event.get("Type") == "Notification" and isinstance(event.get("Message"), str):
            event = json.loads(event["Message"])
        notice = _notice(event)
    except RecursionError:
        log.warning("interruption queue: malformed message deleted (nested too deep): %.200r", body)
        return Notice(kind="malformed", detail="nested too deep", token=token)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("interruption queue: malformed message deleted (%s): %.200r", exc, body)
        return Notice(kind="malformed", detail=str(exc), token=token)
    return Notice(
        kind=notice.kind,
        instance_ids=notice.instance_ids,
        at=notice.at,
        deadline=notice.deadline,
        detail=notice.detail,
        token=token,
    )


def _notice(event: Any) -> Notice:
    if not isinstance(event, dict) or not isinstance(event.get("detail-type"), str):
        raise ValueError("not an EventBridge event (no detail-type)")
    kind, detail = event["detail-type"], event.get("detail")
    if not isinstance(detail, dict):
        raise ValueError(f"{kind}: no detail object")
    at = _time(event.get("time"))
    if kind == SPOT_WARNING:
        action = str(detail.get("instance-action", "terminate"))
        return Notice(
            kind="interruption",
            instance_ids=(_instance_id(detail),),
            at=at,
            deadline=at + WARNING_S if at else None,
            detail=f"spot {action}",
        )
    if kind == REBALANCE:
        return Notice(
            kind="rebalance",
            instance_ids=(_instance_id(detail),),
            at=at,
            deadline=None,
            detail="rebalance recommendation",
        )
    if kind == STATE_CHANGE:
        state = str(detail.get("state", ""))
        if state not in GOING_STATES:
            return Notice(kind="ignored", instance_ids=(), at=at, deadline=None, detail=f"state {state}")
        return Notice(
            kind="state_change", instance_ids=(_instance_id(detail),), at=at, deadline=None, detail=f"state {state}"
        )
    if kind == HEALTH:
        return _health(event, detail, at)
    return Notice(kind="ignored", instance_ids=(), at=at, deadline=None, detail=kind)


def _health(event: dict[str, Any], detail: dict[str, Any], at: float) -> Notice:
    """An AWS Health event: only EC2 scheduled changes (retirement, maintenance) concern instances."""
    what = f"{detail.get('eventTypeCode', '')}".strip()
    if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
        return Notice(kind="ignored", instance_ids=(), at=at, deadline=None, detail=f"health {what}")
    entities = detail.get("affectedEntities") or []
    ids = [str(e["entityValue"]) for e in entities if isinstance(e, dict) and "entityValue" in e]
    ids += [str(r).rsplit("/", 1)[-1] for r in event.get("resources") or [] if isinstance(r, str)]
    ids = sorted({i for i in ids if i.startswith("i-")})
    if not ids:
        raise ValueError(f"health {what}: no instance named")
    start = _time(detail.get("startTime"))
    return Notice(
        kind="scheduled_change",
        instance_ids=tuple(ids),
        at=at,
        deadline=start or None,
        detail=f"scheduled change {what}",
    )


def _instance_id(detail: dict[str, Any]) -> str:
    iid = detail["instance-id"]
    if not isinstance(iid, str) or not iid.startswith("i-"):
        raise ValueError(f"not an instance id: {iid!r}")
    return iid


def _time(value: Any) -> float:
    """EventBridge's ISO 8601 `time`, or AWS Health's RFC 2822 `startTime`; 0 when absent."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return parsedate_to_datetime(value).timestamp()
