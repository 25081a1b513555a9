"""The leader lease table and the status rule in terraform/modules/autoscaler, read statically."""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.config.policy import LeaderConfig
from autoscaler.leader.dynamodb import DynamoLease
from tests.terraform.tfhelpers import blocks, unwrap

pytestmark = pytest.mark.unit


def test_the_lease_table_is_keyed_as_the_autoscaler_reads_it(autoscaler: dict[str, Any]) -> None:
    table = autoscaler["resource"]["aws_dynamodb_table"]["leader"]
    assert table["hash_key"] == "fleet" and "range_key" not in table
    assert [(a["name"], a["type"]) for a in blocks(table["attribute"])] == [("fleet", "S")]
    assert table["billing_mode"] == "PAY_PER_REQUEST"  # an idle lease: a few requests a minute
    assert blocks(table["server_side_encryption"])[0]["enabled"] is True
    assert blocks(table["point_in_time_recovery"])[0]["enabled"] is True
    assert unwrap(table["count"]) == "var.create_leader_table ? 1 : 0"
    assert "local.tags" in table["tags"]
    item = DynamoLease(None, "t", "prod", "me", 30.0)._item(1, "me")
    assert "fleet" in item  # the partition key the code writes is the table's


def test_the_default_table_name_is_a_valid_policy_leader_table(autoscaler: dict[str, Any]) -> None:
    assert autoscaler["locals"]["leader_table_name"] == '${coalesce(var.leader_table_name, "${var.name}-leader")}'
    LeaderConfig(kind="dynamodb", table="igniter-leader")  # the example's name passes the policy's check
    pattern = autoscaler["variable"]["leader_table_name"]["validation"]
    assert "{3,255}" in str(pattern) and LeaderConfig.model_fields["table"].metadata


def test_outputs_name_the_policy_fields(autoscaler: dict[str, Any], example: dict[str, Any]) -> None:
    out = autoscaler["output"]
    assert "leader.table" in out["leader_table_name"]["description"]
    assert "scaling.status_listen" in out["status_listen"]["description"]
    snippet = example["locals"]["policy_snippet"]
    assert unwrap(snippet["leader"]["table"]) == "module.autoscaler.leader_table_name"
    assert unwrap(snippet["scaling"]["status_listen"]) == "module.autoscaler.status_listen"


def test_the_status_rule_says_what_listens_behind_it(autoscaler: dict[str, Any]) -> None:
    """The rule opens the port that scaling.status_listen binds: the description, the variable and
    the output all say so, and with no CIDR blocks the endpoint stays on loopback."""
    rule = autoscaler["resource"]["aws_vpc_security_group_ingress_rule"]["status"]
    assert "scaling.status_listen" in rule["description"] and "bearer token" in rule["description"]
    assert unwrap(rule["from_port"]) == unwrap(rule["to_port"]) == "var.status_port"
    described = autoscaler["variable"]["status_cidr_blocks"]["description"]
    assert "scaling.status_listen" in described and "/v1/*" in described and "127.0.0.1" in described
    listen = unwrap(autoscaler["output"]["status_listen"]["value"])
    assert "0.0.0.0:${var.status_port}" in listen and "127.0.0.1:${var.status_port}" in listen
