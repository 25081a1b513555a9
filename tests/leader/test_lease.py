"""The lease backends and the Fence, in-process: an OS lock (fcntl) and DynamoDB (moto's server).

Time is passed to `attempt` explicitly, so every expiry here is exact, not slept for.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from autoscaler.leader.base import Fence, LeaseError, NotLeader, Term
from autoscaler.leader.dynamodb import DynamoLease, LeaseConfigError, make_client
from autoscaler.leader.local import LocalLease
from tests.kit.backends import Moto

TABLE = "igniter-leases"


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def create_table(moto: Moto, name: str = TABLE) -> None:
    """The table as terraform/modules/autoscaler creates it: partition key `fleet`, on demand."""
    boto3.client("dynamodb", endpoint_url=moto.url, region_name="us-east-1").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "fleet", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "fleet", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def dynamo(moto: Moto, owner: str, lease_s: float = 10.0, fleet: str = "prod") -> DynamoLease:
    return DynamoLease(make_client("us-east-1", moto.url, lease_s), TABLE, fleet, owner, lease_s)


def item(moto: Moto, fleet: str = "prod") -> dict[str, Any]:
    client = boto3.client("dynamodb", endpoint_url=moto.url, region_name="us-east-1")
    raw = client.get_item(TableName=TABLE, Key={"fleet": {"S": fleet}}, ConsistentRead=True)["Item"]
    return {k: next(iter(v.values())) for k, v in raw.items()}


# -- the Fence ------------------------------------------------------------------------------------
@pytest.mark.unit
def test_the_fence_holds_only_inside_the_term() -> None:
    clock = Clock()
    fence = Fence(clock)
    with pytest.raises(NotLeader, match="launch a refused: not the leader"):
        fence.check("launch a")
    fence.grant(Term(leader=True, token=7, holder="me", valid_until=110.0))
    assert fence.check("launch a") == 7 and fence.held
    clock.t = 110.0
    with pytest.raises(NotLeader, match=r"term of token 7 ran out 0\.0 s ago"):
        fence.check("terminate i-1")
    fence.grant(Term(leader=True, token=8, holder="me", valid_until=200.0))
    fence.revoke("stopping")
    with pytest.raises(NotLeader, match="stopping"):
        fence.check("apply")
    fence.grant(Term(leader=False, token=9, holder="other", note="other holds it"))
    assert not fence.held and fence.token is None
    assert Fence.always().check("anything") == 0


@pytest.mark.unit
def test_guard_fences_the_named_methods_and_passes_the_rest() -> None:
    class Gateway:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def set_weight(self, server: str, weight: int) -> None:
            self.calls.append(f"{server}={weight}")

        def stats(self) -> str:
            return "read"

    clock, inner = Clock(), Gateway()
    fence = Fence(clock)
    gw = fence.guard(inner, ["set_weight"])
    assert gw.stats() == "read"
    with pytest.raises(NotLeader):
        gw.set_weight("a", 1)
    fence.grant(Term(leader=True, token=1, holder="me", valid_until=math.inf))
    gw.set_weight("a", 2)
    assert inner.calls == ["a=2"]


# -- leader: local (fcntl) ----------------------------------------------------------------------
@pytest.mark.unit
def test_local_lock_one_holder_at_a_time_and_a_new_token_each_tenure(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "prod.lock"
    a, b = LocalLease(path, "host:1:a"), LocalLease(path, "host:2:b")
    first = a.attempt(0.0)
    assert first.leader and first.token == 1 and first.valid_until == math.inf
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    seen = b.attempt(0.0)
    assert not seen.leader and seen.holder == "host:1:a" and seen.holder_alive and seen.token == 1
    assert a.attempt(1e9).leader  # no expiry: the lock is the process's for its life
    a.release()
    taken = b.attempt(0.0)
    assert taken.leader and taken.token == 2
    assert not a.attempt(0.0).leader


@pytest.mark.e2e
def test_local_lock_is_released_when_its_process_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "prod.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from autoscaler.leader.local import LocalLease; "
            f"assert LocalLease(Path({str(path)!r}), 'child').attempt(0).leader; print('held', flush=True); "
            "time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lease = LocalLease(path, "parent")
        assert lease.attempt(0.0).holder == "child"
        holder.kill()
        holder.wait()
        assert lease.attempt(0.0).leader and lease.attempt(0.0).token == 2
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.unit
def test_local_lock_in_an_unusable_place_is_a_permanent_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(LeaseError) as err:
        LocalLease(tmp_path / "file" / "prod.lock", "me").attempt(0.0)
    assert err.value.permanent


# -- leader: dynamodb ---------------------------------------------------------------------------
@pytest.mark.e2e
def test_dynamodb_takeover_only_after_a_whole_lease_without_renewal(moto: Moto) -> None:
    create_table(moto)
    a, b = dynamo(moto, "a"), dynamo(moto, "b")
    term = a.attempt(0.0)
    assert term.leader and term.token == 1 and term.valid_until == 10.0 - a.margin_s
    assert item(moto)["owner"] == "a" and item(moto)["token"] == "1"
    seen = b.attempt(0.0)
    assert not seen.leader and seen.holder == "a" and not seen.holder_alive
    assert a.attempt(3.0).leader  # a renews: the record version changes
    renewed = b.attempt(9.0)
    assert not renewed.leader and renewed.holder_alive  # b saw it change: its wait starts again
    assert not b.attempt(18.9).leader  # 9.9 s since b first saw this version: not yet
    taken = b.attempt(19.0)
    assert taken.leader and taken.token == 2 and item(moto)["owner"] == "b"
    lost = a.attempt(19.5)  # a's renewal names token 1: refused
    assert not lost.leader and lost.holder == "b" and "lost the lease to b" in lost.note
    assert a.attempt(19.6).holder == "b"


@pytest.mark.e2e
def test_dynamodb_terms_never_overlap(moto: Moto) -> None:
    """A leader that stops renewing at t has a term until t + lease - margin; a standby can take
    over no sooner than t + lease, by any clock: a gap of a margin."""
    create_table(moto)
    a, b = dynamo(moto, "a", lease_s=8.0), dynamo(moto, "b", lease_s=8.0)
    last = a.attempt(50.0)
    t = 50.0
    while not (term := b.attempt(t)).leader:
        t += 0.5
    assert t >= 50.0 + 8.0 and last.valid_until <= t - a.margin_s
    assert term.token == last.token + 1


@pytest.mark.e2e
def test_dynamodb_release_hands_over_at_once_and_a_lost_reply_is_adopted(moto: Moto) -> None:
    create_table(moto)
    a, b = dynamo(moto, "a"), dynamo(moto, "b")
    assert a.attempt(0.0).leader and not b.attempt(0.0).leader
    a.release()
    assert item(moto)["owner"] == "" and b.attempt(0.1).leader and b.attempt(0.1).token == 2
    b._token = None  # as if the reply to b's write had been lost: b finds its own name there
    again = b.attempt(1.0)
    assert again.leader and again.token == 2


@pytest.mark.e2e
def test_dynamodb_two_candidates_one_winner(moto: Moto) -> None:
    create_table(moto)
    terms = [dynamo(moto, name).attempt(0.0) for name in "abc"]
    assert [t.leader for t in terms] == [True, False, False]
    assert {t.holder for t in terms} == {"a"}


@pytest.mark.e2e
def test_dynamodb_without_its_table_is_a_configuration_error(moto: Moto) -> None:
    with pytest.raises(LeaseConfigError, match="ResourceNotFoundException") as err:
        dynamo(moto, "a").attempt(0.0)
    assert err.value.permanent


@pytest.mark.unit
def test_dynamodb_unreachable_is_a_passing_error(tmp_path: Path) -> None:
    lease = DynamoLease(make_client("us-east-1", "http://127.0.0.1:9", 4.0), TABLE, "prod", "a", 4.0)
    with pytest.raises(LeaseError) as err:
        lease.attempt(0.0)
    assert not err.value.permanent
