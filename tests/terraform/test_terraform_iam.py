"""The autoscaler's IAM policy: least privilege, and every mutating EC2 call tied to the fleet tag."""

from __future__ import annotations

from typing import Any

import pytest

from tests.terraform.tfhelpers import FLEET_TAG, blocks, unwrap

pytestmark = pytest.mark.unit


MUTATING = {"ec2:RunInstances", "ec2:TerminateInstances", "ec2:CreateTags"}
POOL = {"ec2:StartInstances", "ec2:StopInstances"}  # fleet/ec2_pool.py: the warm pool only
LEASE = {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}  # leader/dynamodb.py
QUEUE = {"sqs:ReceiveMessage", "sqs:DeleteMessage"}  # fleet/interruptions.py: the interruption queue only
# Exactly what autoscaler/ calls (fleet/ec2.py, fleet/interruptions.py, rates/cloudwatch.py,
# leader/dynamodb.py) plus what launching needs.
ALLOWED_ACTIONS = (
    MUTATING
    | POOL
    | LEASE
    | QUEUE
    | {
        "ec2:DescribeInstances",
        "ec2:GetConsoleOutput",
        "cloudwatch:GetMetricData",
        "iam:PassRole",
        "secretsmanager:GetSecretValue",
        "secretsmanager:DescribeSecret",
        "kms:Decrypt",
        "kms:CreateGrant",
        "kms:DescribeKey",
        "kms:GenerateDataKeyWithoutPlaintext",
        "kms:ReEncrypt*",
    }
)
UNRESTRICTABLE = {"cloudwatch:GetMetricData"} | {a for a in ALLOWED_ACTIONS if a.startswith("ec2:Describe")}


def _resolve(text: str, locals_: dict[str, Any]) -> str:
    return text.replace("${local.fleet_tag_key}", locals_["fleet_tag_key"])


@pytest.fixture(scope="module")
def statements(autoscaler: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement of the autoscaler policy, dynamic ones included, with tag keys resolved."""
    document = autoscaler["data"]["aws_iam_policy_document"]["autoscaler"]
    found = list(blocks(document["statement"]))
    for dynamic in blocks(document.get("dynamic")):
        found += blocks(dynamic["statement"]["content"])
    for statement in found:
        for condition in blocks(statement.get("condition")):
            condition["variable"] = _resolve(condition["variable"], autoscaler["locals"])
    return found


def _conditions(statement: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    return {c["variable"]: (c["test"], c["values"]) for c in blocks(statement.get("condition"))}


def _with_action(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in s["actions"]]


def test_fleet_tag_key_is_the_one_the_autoscaler_uses(autoscaler: dict[str, Any], fleet: dict[str, Any]) -> None:
    assert autoscaler["locals"]["fleet_tag_key"] == fleet["locals"]["fleet_tag_key"] == FLEET_TAG


def test_only_the_listed_actions_no_wildcards(statements: list[dict[str, Any]]) -> None:
    actions = {a for s in statements for a in s["actions"]}
    assert actions <= ALLOWED_ACTIONS, actions - ALLOWED_ACTIONS
    assert not any(a in ("*", "ec2:*", "ec2:Describe*", "iam:*") for a in actions)
    assert MUTATING <= actions
    for statement in statements:
        assert statement.get("effect", "Allow") == "Allow"


def test_resource_star_only_for_calls_that_take_no_resource(statements: list[dict[str, Any]]) -> None:
    for statement in statements:
        resources = statement["resources"]
        if resources == ["*"] or '"*"' in str(resources):
            assert set(statement["actions"]) <= UNRESTRICTABLE, statement["sid"]


def test_terminate_only_instances_tagged_with_the_fleet(statements: list[dict[str, Any]]) -> None:
    (statement,) = _with_action(statements, "ec2:TerminateInstances")
    assert statement["actions"] == ["ec2:TerminateInstances"]
    assert statement["resources"] == ["${local.ec2_arn}:instance/*"]
    assert _conditions(statement)[f"ec2:ResourceTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])


def test_console_output_only_of_instances_tagged_with_the_fleet(statements: list[dict[str, Any]]) -> None:
    """New nodes' and gateway hosts' host keys are read from their consoles: only the fleet's own
    instances (igniter:fleet) and the fleet's own gateway hosts (igniter:gateway)."""
    found = _with_action(statements, "ec2:GetConsoleOutput")
    assert len(found) == 2
    tags = set()
    for statement in found:
        assert statement["actions"] == ["ec2:GetConsoleOutput"]
        assert statement["resources"] == ["${local.ec2_arn}:instance/*"]
        ((key, condition),) = _conditions(statement).items()
        assert condition == ("StringEquals", ["${var.name}"])
        tags.add(key)
    assert tags == {f"ec2:ResourceTag/{FLEET_TAG}", "ec2:ResourceTag/igniter:gateway"}


def test_run_instances_only_tagged_for_the_fleet_and_from_its_templates(statements: list[dict[str, Any]]) -> None:
    runs = _with_action(statements, "ec2:RunInstances")
    assert len(runs) == 4
    for statement in runs:
        conditions = _conditions(statement)
        template_only = unwrap(statement["resources"]) == "var.launch_template_arns"
        assert template_only or "ec2:LaunchTemplate" in conditions, statement["sid"]
        if "ec2:LaunchTemplate" in conditions:
            assert conditions["ec2:LaunchTemplate"] == ("ArnEquals", "${var.launch_template_arns}")
    (instances,) = [s for s in runs if s["resources"] == ["${local.ec2_arn}:instance/*"]]
    assert _conditions(instances)[f"aws:RequestTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])
    assert _conditions(instances)["ec2:InstanceType"] == ("StringEquals", "${var.instance_types}")
    assert _conditions(instances)["ec2:MetadataHttpTokens"] == ("StringEquals", ["required"])
    images = [s for s in runs if any("::image/" in r for r in s["resources"])]
    assert len(images) == 1 and images[0]["resources"] == ["arn:${local.partition}:ec2:${local.region}::image/*"]
    assert _conditions(images[0])["ec2:IsLaunchTemplateResource"] == ("Bool", ["true"])


def test_stop_and_start_only_the_fleets_pool_instances(statements: list[dict[str, Any]]) -> None:
    (statement,) = [s for s in statements if POOL & set(s["actions"])]
    assert sorted(statement["actions"]) == sorted(POOL)
    assert statement["resources"] == ["${local.ec2_arn}:instance/*"]
    conditions = _conditions(statement)
    assert conditions[f"ec2:ResourceTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])
    assert conditions["ec2:ResourceTag/igniter:pool"] == ("StringEquals", ["member", "claimed"])


def test_a_claim_retags_only_the_fleets_pool_members_with_igniters_keys(statements: list[dict[str, Any]]) -> None:
    (claim,) = [s for s in statements if s["sid"] == "TagOwnFleetPoolMembersForTheirSlot"]
    assert claim["actions"] == ["ec2:CreateTags"] and claim["resources"] == ["${local.ec2_arn}:instance/*"]
    conditions = _conditions(claim)
    assert conditions[f"ec2:ResourceTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])
    assert conditions["ec2:ResourceTag/igniter:pool"] == ("StringEquals", ["member"])
    assert conditions[f"aws:RequestTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])
    test, keys = conditions["aws:TagKeys"]
    assert test == "ForAllValues:StringEquals" and all(k.startswith("igniter:") or k == "Name" for k in keys)


def test_reuse_on_scale_in_retags_only_the_fleets_instances_and_only_into_its_pool(
    statements: list[dict[str, Any]],
) -> None:
    """A retiring instance has no igniter:pool tag (or `claimed`): the claim's statement does not
    cover it, this one does, and only for a request that makes it this fleet's pool member."""
    (back,) = [s for s in statements if s["sid"] == "ReturnOwnFleetInstancesToThePool"]
    assert back["actions"] == ["ec2:CreateTags"] and back["resources"] == ["${local.ec2_arn}:instance/*"]
    conditions = _conditions(back)
    assert conditions[f"ec2:ResourceTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])
    assert conditions[f"aws:RequestTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"])
    assert conditions["aws:RequestTag/igniter:pool"] == ("StringEquals", ["member"])
    test, keys = conditions["aws:TagKeys"]
    assert test == "ForAllValues:StringEquals" and all(k.startswith("igniter:") or k == "Name" for k in keys)


def test_create_tags_only_while_launching_and_instances_only_with_the_fleet_tag(
    statements: list[dict[str, Any]],
) -> None:
    pool = {"TagOwnFleetPoolMembersForTheirSlot", "ReturnOwnFleetInstancesToThePool"}
    tags = [s for s in _with_action(statements, "ec2:CreateTags") if s["sid"] not in pool]
    assert len(tags) == 2
    for statement in tags:
        conditions = _conditions(statement)
        assert conditions["ec2:CreateAction"] == ("StringEquals", ["RunInstances"]), statement["sid"]
        if any("instance/*" in r for r in statement["resources"]):
            assert conditions[f"aws:RequestTag/{FLEET_TAG}"] == ("StringEquals", ["${var.name}"]), statement["sid"]


def test_describe_is_not_a_wildcard(statements: list[dict[str, Any]]) -> None:
    describes = {a for s in statements for a in s["actions"] if a.startswith("ec2:Describe")}
    assert describes == {"ec2:DescribeInstances"}, "ec2:Describe* would include DescribeInstanceAttribute (user data)"


def test_pass_role_only_for_the_node_role_to_ec2(statements: list[dict[str, Any]]) -> None:
    (statement,) = _with_action(statements, "iam:PassRole")
    assert statement["resources"] == ["${var.node_role_arn}"]
    assert _conditions(statement)["iam:PassedToService"] == ("StringEquals", ["ec2.amazonaws.com"])


def test_secret_and_key_access_is_scoped(statements: list[dict[str, Any]]) -> None:
    (secret,) = _with_action(statements, "secretsmanager:GetSecretValue")
    assert secret["resources"] == ["${local.ssh_key_secret_arn}"]
    for statement in _with_action(statements, "kms:Decrypt"):
        assert "kms:ViaService" in _conditions(statement)


def test_the_policy_is_attached_to_the_role(autoscaler: dict[str, Any]) -> None:
    policy = autoscaler["resource"]["aws_iam_policy"]["autoscaler"]
    assert unwrap(policy["policy"]) == "data.aws_iam_policy_document.autoscaler.json"
    attachment = autoscaler["resource"]["aws_iam_role_policy_attachment"]["autoscaler"]
    assert unwrap(attachment["role"]) == "aws_iam_role.autoscaler.name"


def test_the_autoscaler_host_never_carries_the_fleet_tag(autoscaler: dict[str, Any]) -> None:
    """The autoscaler may terminate anything tagged igniter:fleet=<name>: its own host must not be."""
    assert "fleet_tag_key" not in autoscaler["locals"]["tags"]
    assert "igniter:autoscaler" in autoscaler["locals"]["tags"]
    host = autoscaler["resource"]["aws_instance"]["host"]
    for field in ("tags", "volume_tags"):
        assert "local.tags" in host[field] and FLEET_TAG not in host[field]
    conditions = [v["condition"] for v in blocks(autoscaler["variable"]["tags"]["validation"])]
    assert any('"igniter:fleet"' in c for c in conditions)


def test_host_runs_without_public_address_or_inbound_ssh(autoscaler: dict[str, Any]) -> None:
    host = autoscaler["resource"]["aws_instance"]["host"]
    assert host["associate_public_ip_address"] is False
    assert host["monitoring"] is True
    assert blocks(host["root_block_device"])[0]["encrypted"] is True
    ingress = autoscaler["resource"]["aws_vpc_security_group_ingress_rule"]
    assert set(ingress) == {"status"}
    assert "var.status_cidr_blocks" in autoscaler["locals"]["status_ingress"]
    assert autoscaler["variable"]["status_cidr_blocks"]["default"] == []


def test_the_lease_is_its_own_fleets_item_of_the_lease_table_only(statements: list[dict[str, Any]]) -> None:
    """Least privilege on the leader lease: the three calls, one table, the item keyed by the fleet."""
    (statement,) = [s for s in statements if set(s["actions"]) & LEASE]
    assert set(statement["actions"]) == LEASE
    assert statement["resources"] == ["${local.leader_table_arn}"]
    assert _conditions(statement)["dynamodb:LeadingKeys"] == ("ForAllValues:StringEquals", ["${var.name}"])
    assert not any(a.startswith("dynamodb:") for s in statements if s is not statement for a in s["actions"])
