"""terraform/modules/gateway: HAProxy hosts in an Auto Scaling group behind a Network Load Balancer.

Read statically (python-hcl2), like the other modules: IMDSv2 and encrypted volumes, tags that keep
the hosts out of the autoscaler's fleet, the load balancer's health check, security groups that
admit only what each side needs (the node group admits the hosts on the server ports), a role with
no permissions, and the user data: rendered, parsed, its bootstrap configuration checked by
haproxy itself and its paths the ones the autoscaler's remote gateway drives.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.config.policy import GatewayConfig
from autoscaler.gateway.remote import RemoteGateway
from tests.kit import web
from tests.kit.agent import free_port
from tests.terraform.tfhelpers import (
    GATEWAY_DIR,
    blocks,
    render_template,
    template_placeholders,
    templatefile_call_keys,
    unwrap,
)

TEMPLATE = GATEWAY_DIR / "templates" / "gateway-user-data.yaml.tftpl"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7d9Kq3Xexample igniter-autoscaler"


def resource(config: dict[str, Any], rtype: str, name: str) -> dict[str, Any]:
    return config["resource"][rtype][name]


@pytest.mark.unit
def test_hosts_use_imdsv2_and_encrypted_volumes(gateway: dict[str, Any]) -> None:
    lt = resource(gateway, "aws_launch_template", "host")
    (meta,) = blocks(lt["metadata_options"])
    assert meta["http_tokens"] == "required" and meta["http_put_response_hop_limit"] == 1
    (device,) = blocks(lt["block_device_mappings"])
    (ebs,) = blocks(device["ebs"])
    assert ebs["encrypted"] is True and ebs["volume_type"] == "gp3"
    assert unwrap(lt["vpc_security_group_ids"]) == "[aws_security_group.host.id]" or lt["vpc_security_group_ids"] == [
        "${aws_security_group.host.id}"
    ]


@pytest.mark.unit
def test_hosts_carry_the_gateway_tag_never_the_fleet_tag(gateway: dict[str, Any]) -> None:
    assert gateway["locals"]["gateway_tag_key"] == "igniter:gateway"
    assert "igniter:fleet" not in str(gateway["locals"]["tags"])
    assert "!contains" in str(gateway["variable"]["tags"]["validation"])  # a caller cannot add it either
    asg = resource(gateway, "aws_autoscaling_group", "hosts")
    (dynamic,) = blocks(asg["dynamic"])
    tag = dynamic["tag"]
    (content,) = blocks(tag["content"])
    assert "local.tags" in str(tag["for_each"]) and content["propagate_at_launch"] is True


@pytest.mark.unit
def test_the_group_serves_through_the_load_balancer_and_is_judged_by_it(gateway: dict[str, Any]) -> None:
    asg = resource(gateway, "aws_autoscaling_group", "hosts")
    assert asg["health_check_type"] == "ELB" and asg["target_group_arns"] == ["${aws_lb_target_group.hosts.arn}"]
    lb = resource(gateway, "aws_lb", "gateway")
    assert lb["load_balancer_type"] == "network" and lb["security_groups"] == ["${aws_security_group.lb.id}"]
    tg = resource(gateway, "aws_lb_target_group", "hosts")
    (check,) = blocks(tg["health_check"])
    # ready, not live: a host serves only once the autoscaler has configured it
    assert (check["protocol"], check["path"], check["matcher"]) == ("HTTP", "/v2/health/ready", "200")
    listener = resource(gateway, "aws_lb_listener", "gateway")
    (action,) = blocks(listener["default_action"])
    assert action["type"] == "forward" and action["target_group_arn"] == "${aws_lb_target_group.hosts.arn}"


@pytest.mark.unit
def test_security_groups_admit_only_what_each_side_needs(gateway: dict[str, Any]) -> None:
    ingress = gateway["resource"]["aws_vpc_security_group_ingress_rule"]
    host_rules = {n: r for n, r in ingress.items() if r["security_group_id"] == "${aws_security_group.host.id}"}
    assert set(host_rules) == {"host_from_lb", "host_ssh_from_autoscaler"}
    assert all("cidr_ipv4" not in r and "cidr_ipv6" not in r for r in host_rules.values())  # groups only
    assert host_rules["host_from_lb"]["referenced_security_group_id"] == "${aws_security_group.lb.id}"
    assert host_rules["host_ssh_from_autoscaler"]["from_port"] == "${var.ssh_port}"
    nodes = ingress["nodes_from_gateway"]
    assert nodes["security_group_id"] == "${var.node_security_group_id}"
    assert nodes["referenced_security_group_id"] == "${aws_security_group.host.id}"
    assert (nodes["from_port"], nodes["to_port"]) == ("${var.server_port_range.from}", "${var.server_port_range.to}")
    clients = ingress["lb_clients"]
    assert (
        clients["security_group_id"] == "${aws_security_group.lb.id}" and clients["from_port"] == "${var.listener_port}"
    )
    validation = str(gateway["variable"]["client_cidr_blocks"]["validation"])
    assert "/0" in validation  # no open-to-the-world listener
    egress = gateway["resource"]["aws_vpc_security_group_egress_rule"]
    assert egress["host_to_nodes"]["referenced_security_group_id"] == "${var.node_security_group_id}"


@pytest.mark.unit
def test_the_role_has_no_permissions(gateway: dict[str, Any]) -> None:
    assert "aws_iam_role_policy" not in gateway["resource"]
    (attachment,) = gateway["resource"]["aws_iam_role_policy_attachment"].values()
    assert attachment["count"] == "${var.enable_ssm_session_manager ? 1 : 0}"
    assert "AmazonSSMManagedInstanceCore" in attachment["policy_arn"]


@pytest.mark.unit
def test_variables_and_outputs_are_described(gateway: dict[str, Any]) -> None:
    for name, body in gateway["variable"].items():
        assert body.get("type") and len(str(body.get("description", ""))) >= 20, name
    for name, body in gateway["output"].items():
        assert body.get("description"), name


def rendered(gateway: dict[str, Any]) -> dict[str, Any]:
    variables = gateway["variable"]
    text = render_template(
        TEMPLATE.read_text(),
        {
            "fleet": "igniter",
            "gateway_user": variables["gateway_user"]["default"],
            "ssh_public_key": KEY,
            "gateway_dir": variables["gateway_dir"]["default"],
            "gateway_port": variables["gateway_port"]["default"],
        },
    )
    assert text.startswith("#cloud-config\n")
    return yaml.safe_load(text)


@pytest.mark.unit
def test_user_data_placeholders_are_exactly_what_the_module_passes(gateway: dict[str, Any]) -> None:
    hosts_tf = (GATEWAY_DIR / "hosts.tf").read_text()
    assert template_placeholders(TEMPLATE.read_text()) == templatefile_call_keys(
        hosts_tf, "gateway-user-data.yaml.tftpl"
    )


def files(data: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["content"] for f in data["write_files"]}


@pytest.mark.unit
def test_user_data_runs_haproxy_as_the_gateway_user_with_the_paths_the_autoscaler_drives(
    gateway: dict[str, Any],
) -> None:
    data = rendered(gateway)
    assert {"haproxy", "socat"} <= set(data["packages"])
    (user,) = [u for u in data["users"] if isinstance(u, dict)]
    assert user["name"] == "igniter" and user["ssh_authorized_keys"] == [f"restrict {KEY}"]
    assert data["ssh"]["emit_keys_to_console"] is True  # host keys pinned from the console, like nodes
    unit = files(data)["/etc/systemd/system/igniter-gateway.service"]
    remote = RemoteGateway(GatewayConfig(kind="haproxy", hosts=["10.0.0.1"]), shell=None)  # type: ignore[arg-type]
    assert gateway["variable"]["gateway_dir"]["default"] == GatewayConfig().remote_dir
    assert "User=igniter" in unit and "AmbientCapabilities=CAP_NET_BIND_SERVICE" in unit
    assert f"-S {remote.master}" in unit and f"-f {GatewayConfig().remote_dir}/haproxy.cfg" in unit
    bootstrap = files(data)["/etc/igniter-gateway/bootstrap.cfg"]
    assert f"stats socket {remote.paths.socket} mode 600 level admin expose-fd listeners" in bootstrap
    assert bootstrap.startswith("# igniter-spec bootstrap")  # never the hash of a real spec: the first ensure reloads


@pytest.mark.e2e
def test_the_bootstrap_configuration_is_valid_and_keeps_the_host_out_of_service(
    gateway: dict[str, Any], tmp_path: Path
) -> None:
    text = files(rendered(gateway))["/etc/igniter-gateway/bootstrap.cfg"]
    port = free_port()
    text = text.replace(GatewayConfig().remote_dir, str(tmp_path)).replace("0.0.0.0:8000", f"127.0.0.1:{port}")
    (tmp_path / "haproxy.cfg").write_text(text)
    check = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    started = subprocess.run(
        ["haproxy", "-D", "-f", str(tmp_path / "haproxy.cfg"), "-p", str(tmp_path / "pid")],
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0, started.stderr
    try:
        assert web.get(f"http://127.0.0.1:{port}/v2/health/live").status_code == 200
        ready = web.get(f"http://127.0.0.1:{port}/v2/health/ready")
        assert ready.status_code == 503 and "not configured" in ready.json()["error"]
    finally:
        subprocess.run(["kill", (tmp_path / "pid").read_text().split()[0]], check=False)


@pytest.mark.e2e
def test_setup_script_is_strict_and_disables_the_distribution_haproxy(gateway: dict[str, Any]) -> None:
    script = files(rendered(gateway))["/usr/local/sbin/igniter-gateway-setup"]
    assert script.startswith("#!/bin/bash") and "set -euo pipefail" in script
    assert "systemctl disable --now haproxy.service" in script
    assert re.search(r"systemctl enable --now igniter-gateway\.service", script)
    bash = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert bash.returncode == 0, bash.stderr
