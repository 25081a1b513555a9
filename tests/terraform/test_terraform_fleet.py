"""The fleet module: a launch template per GPU type, IMDSv2, encrypted EBS, no world-open ingress."""

from __future__ import annotations

from typing import Any

import pytest

from tests.terraform.tfhelpers import DEFAULT_INSTANCE_TYPES, FLEET_TAG, TF_DIR, blocks, load_config, unwrap

pytestmark = [pytest.mark.unit, pytest.mark.slow]


def _all_resources(kind: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(module dir, name, body) of every resource of one type anywhere under terraform/."""
    found = []
    for module_dir in sorted({p.parent for p in TF_DIR.rglob("*.tf")}):
        config = load_config(module_dir)
        for name, body in config["resource"].get(kind, {}).items():
            found.append((str(module_dir.relative_to(TF_DIR)), name, body))
    return found


def test_a_launch_template_for_every_default_instance_type(fleet: dict[str, Any]) -> None:
    variable = fleet["variable"]["instance_types"]
    assert variable["default"] == DEFAULT_INSTANCE_TYPES
    template = fleet["resource"]["aws_launch_template"]["node"]
    assert unwrap(template["for_each"]) == "toset(var.instance_types)"
    assert unwrap(template["instance_type"]) == "each.key"
    assert template["name"] == "${var.name}-${each.key}"


def test_imdsv2_required_on_every_launch_template_and_instance() -> None:
    launch_templates = _all_resources("aws_launch_template")
    instances = _all_resources("aws_instance")
    assert launch_templates and instances
    for where, name, body in launch_templates + instances:
        options = blocks(body.get("metadata_options"))
        assert len(options) == 1, f"{where}/{name}: no metadata_options"
        assert options[0].get("http_tokens") == "required", f"{where}/{name}: IMDSv1 allowed"
        assert options[0].get("http_endpoint") == "enabled"
        assert int(options[0].get("http_put_response_hop_limit")) == 1


def test_launch_template_disks_monitoring_and_profile(fleet: dict[str, Any]) -> None:
    template = fleet["resource"]["aws_launch_template"]["node"]
    (mapping,) = blocks(template["block_device_mappings"])
    (ebs,) = blocks(mapping["ebs"])
    assert ebs["encrypted"] is True
    assert ebs["volume_type"] == "gp3"
    assert ebs["delete_on_termination"] is True
    assert blocks(template["monitoring"])[0]["enabled"] is True
    assert template["ebs_optimized"] is True
    assert unwrap(blocks(template["iam_instance_profile"])[0]["arn"]) == "aws_iam_instance_profile.node.arn"
    assert template["vpc_security_group_ids"] == ["${aws_security_group.node.id}"]
    assert template["instance_initiated_shutdown_behavior"] == "terminate"


def test_launch_templates_tag_instances_volumes_and_interfaces_with_the_fleet(fleet: dict[str, Any]) -> None:
    assert fleet["locals"]["fleet_tag_key"] == FLEET_TAG
    assert "(local.fleet_tag_key) = var.name" in fleet["locals"]["tags"]
    template = fleet["resource"]["aws_launch_template"]["node"]
    (dynamic,) = blocks(template["dynamic"])
    spec = dynamic["tag_specifications"]
    assert spec["for_each"] == ["instance", "volume", "network-interface"]
    assert "local.tags" in blocks(spec["content"])[0]["tags"]
    assert "local.tags" in template["tags"]


def test_gpu_ami_comes_from_the_dlami_ssm_parameter_and_is_overridable(fleet: dict[str, Any]) -> None:
    default = fleet["variable"]["ami_ssm_parameter"]["default"]
    assert default.startswith("/aws/service/deeplearning/ami/x86_64/") and default.endswith("/latest/ami-id")
    lookup = fleet["data"]["aws_ssm_parameter"]["gpu_ami"]
    assert unwrap(lookup["name"]) == "var.ami_ssm_parameter"
    assert "var.ami_id == null" in lookup["count"]
    image = unwrap(fleet["resource"]["aws_launch_template"]["node"]["image_id"])
    assert image == "lookup(var.ami_ids_by_instance_type, each.key, local.default_ami_id)"
    assert "var.ami_id" in fleet["locals"]["default_ami_id"]


def test_user_data_is_the_rendered_template(fleet: dict[str, Any]) -> None:
    template = fleet["resource"]["aws_launch_template"]["node"]
    assert unwrap(template["user_data"]) == "base64encode(local.node_user_data[each.key])"
    assert "templates/node-user-data.yaml.tftpl" in fleet["locals"]["node_user_data"]


# --- ingress ---------------------------------------------------------------------------------------

WORLD = {"0.0.0.0/0", "::/0"}


def test_no_world_open_ingress_anywhere() -> None:
    for kind in ("aws_vpc_security_group_ingress_rule", "aws_security_group_rule", "aws_security_group"):
        for where, name, body in _all_resources(kind):
            if kind == "aws_security_group_rule":
                assert body.get("type") != "ingress" or not WORLD & set(body.get("cidr_blocks", [])), f"{where}/{name}"
            for rule in blocks(body.get("ingress")) if kind == "aws_security_group" else [body]:
                for field in ("cidr_ipv4", "cidr_ipv6", "cidr_blocks", "ipv6_cidr_blocks"):
                    value = str(rule.get(field, ""))
                    assert not any(w in value for w in WORLD), f"{where}/{name}: {field} = {value}"


def test_node_ingress_comes_only_from_the_autoscaler_groups_and_the_cidr_variable(fleet: dict[str, Any]) -> None:
    rules = fleet["resource"]["aws_vpc_security_group_ingress_rule"]
    assert set(rules) == {"from_autoscaler", "from_cidr"}
    assert unwrap(rules["from_autoscaler"]["for_each"]) == "local.ingress_from_groups"
    assert unwrap(rules["from_autoscaler"]["referenced_security_group_id"]) == "each.value.group"
    assert "var.autoscaler_security_group_ids" in fleet["locals"]["ingress_from_groups"]
    assert unwrap(rules["from_cidr"]["for_each"]) == "local.ingress_from_cidrs"
    assert "setproduct(var.allowed_cidr_blocks," in fleet["locals"]["ingress_from_cidrs"]
    for rule in rules.values():
        assert rule["ip_protocol"] == "tcp"
        assert rule["description"]


def test_allowed_cidrs_refuse_slash_zero(fleet: dict[str, Any]) -> None:
    conditions = [v["condition"] for v in blocks(fleet["variable"]["allowed_cidr_blocks"]["validation"])]
    assert any('!endswith(c, "/0")' in c for c in conditions)
    assert fleet["variable"]["allowed_cidr_blocks"]["default"] == []


def test_node_ports_are_ssh_and_the_server_range(fleet: dict[str, Any]) -> None:
    ports = fleet["locals"]["node_ports"]
    assert set(ports) == {"ssh", "servers"}
    assert unwrap(ports["ssh"]["from"]) == unwrap(ports["ssh"]["to"]) == "var.ssh_port"
    assert unwrap(ports["servers"]["from"]) == "var.server_port_range.from"
    assert unwrap(ports["servers"]["to"]) == "var.server_port_range.to"
    assert fleet["variable"]["server_port_range"]["default"] == {"from": 8100, "to": 8199}
    assert fleet["variable"]["ssh_port"]["default"] == 22


def test_egress_is_web_ports_only(fleet: dict[str, Any]) -> None:
    assert "[443, 80]" in fleet["locals"]["egress"]
    (rule,) = fleet["resource"]["aws_vpc_security_group_egress_rule"].values()
    assert rule["ip_protocol"] == "tcp"


def test_created_vpc_is_private_with_flow_logs_and_a_closed_default_group(fleet: dict[str, Any]) -> None:
    resources = fleet["resource"]
    for subnet in resources["aws_subnet"].values():
        assert subnet["map_public_ip_on_launch"] is False
    assert "aws_default_security_group" in resources
    assert not blocks(resources["aws_default_security_group"]["this"].get("ingress"))
    assert unwrap(resources["aws_flow_log"]["this"]["traffic_type"]) == "ALL"
    assert resources["aws_kms_key"]["logs"]["enable_key_rotation"] is True


# --- node IAM --------------------------------------------------------------------------------------


def test_node_role_reads_only_the_model_prefix(fleet: dict[str, Any]) -> None:
    document = fleet["data"]["aws_iam_policy_document"]["node_models"]
    statements = {s["sid"]: s for s in blocks(document["statement"])}
    assert statements["ListModelPrefix"]["actions"] == ["s3:ListBucket"]
    (condition,) = blocks(statements["ListModelPrefix"]["condition"])
    assert condition["variable"] == "s3:prefix"
    assert statements["ReadModels"]["actions"] == ["s3:GetObject"]
    assert statements["ReadModels"]["resources"] == ["${local.model_bucket_arn}/${var.model_prefix}*"]
    (dynamic,) = blocks(document["dynamic"])
    assert blocks(dynamic["statement"]["content"])[0]["actions"] == ["kms:Decrypt"]


def test_node_role_has_the_cloudwatch_agent_policy_and_ssm_only_on_request(fleet: dict[str, Any]) -> None:
    attachments = fleet["resource"]["aws_iam_role_policy_attachment"]
    assert attachments["node_cloudwatch_agent"]["policy_arn"].endswith("iam::aws:policy/CloudWatchAgentServerPolicy")
    assert "var.enable_ssm_session_manager" in attachments["node_ssm"]["count"]
    assert fleet["variable"]["enable_ssm_session_manager"]["default"] is False
    profile = fleet["resource"]["aws_iam_instance_profile"]["node"]
    assert unwrap(profile["role"]) == "aws_iam_role.node.name"
