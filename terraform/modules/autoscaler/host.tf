# Optional host: one small instance running `igniter run /etc/igniter/policy.yaml` as a systemd
# service. No inbound SSH (use Session Manager); outbound only to the nodes' SSH and server ports,
# and HTTPS/HTTP for the AWS APIs and package installs.

locals {
  ssh_key_file     = "/etc/igniter/ssh/id_autoscaler"
  known_hosts_file = "/etc/igniter/ssh/known_hosts"
  policy_file      = "/etc/igniter/policy.yaml"

  node_egress = {
    for pair in setproduct(range(length(var.node_security_group_ids)), ["ssh", "servers"]) :
    "sg${pair[0]}-${pair[1]}" => {
      group       = var.node_security_group_ids[pair[0]]
      from        = pair[1] == "ssh" ? var.node_ssh_port : var.server_port_range.from
      to          = pair[1] == "ssh" ? var.node_ssh_port : var.server_port_range.to
      description = pair[1] == "ssh" ? "SSH to the nodes' igniter-agent" : "Inference servers on the nodes (health and status)"
    }
  }

  gateway_egress = {
    for i, sg in(var.create_host ? var.gateway_security_group_ids : []) : "sg${i}" => sg
  }

  internet_egress = {
    for pair in setproduct(var.create_host ? var.egress_cidr_blocks : [], [443, 80]) :
    "${pair[0]}-${pair[1]}" => { cidr = pair[0], port = pair[1] }
  }

  status_ingress = toset(var.create_host ? var.status_cidr_blocks : [])
}

data "aws_ssm_parameter" "host_ami" {
  count = var.create_host && var.host_ami_id == null ? 1 : 0
  name  = var.host_ami_ssm_parameter
}

resource "aws_iam_instance_profile" "host" {
  count = var.create_host ? 1 : 0

  name_prefix = "${var.name}-autoscaler-"
  role        = aws_iam_role.autoscaler.name

  tags = local.tags
}

resource "aws_security_group" "host" {
  count = var.create_host ? 1 : 0

  name_prefix = "${var.name}-autoscaler-"
  description = "igniter ${var.name} autoscaler host: no inbound except the optional status port; outbound to the nodes and AWS APIs"
  vpc_id      = var.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-autoscaler" })

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = var.vpc_id != null
      error_message = "vpc_id is required when create_host is true."
    }
  }
}

resource "aws_vpc_security_group_egress_rule" "to_nodes" {
  for_each = var.create_host ? local.node_egress : {}

  security_group_id            = aws_security_group.host[0].id
  description                  = each.value.description
  ip_protocol                  = "tcp"
  from_port                    = each.value.from
  to_port                      = each.value.to
  referenced_security_group_id = each.value.group

  tags = local.tags
}

resource "aws_vpc_security_group_egress_rule" "to_gateways" {
  for_each = local.gateway_egress

  security_group_id            = aws_security_group.host[0].id
  description                  = "SSH to the gateway hosts: HAProxy's runtime API"
  ip_protocol                  = "tcp"
  from_port                    = var.node_ssh_port
  to_port                      = var.node_ssh_port
  referenced_security_group_id = each.value

  tags = local.tags
}

resource "aws_vpc_security_group_egress_rule" "internet" {
  for_each = local.internet_egress

  security_group_id = aws_security_group.host[0].id
  description       = each.value.port == 443 ? "HTTPS: EC2, CloudWatch, DynamoDB and Secrets Manager APIs, package index" : "HTTP: OS package mirrors"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = strcontains(each.value.cidr, ":") ? null : each.value.cidr
  cidr_ipv6         = strcontains(each.value.cidr, ":") ? each.value.cidr : null

  tags = local.tags
}

# The status endpoint: the autoscaler serves it on scaling.status_listen, which must bind 0.0.0.0 or
# the host's private address for this rule to reach it (the status_listen output says which). Open
# to status_cidr_blocks only: /healthz and /metrics (Prometheus) as they are, /v1/* only with the
# bearer token of scaling.status_token_file when the policy sets one.
resource "aws_vpc_security_group_ingress_rule" "status" {
  for_each = local.status_ingress

  security_group_id = aws_security_group.host[0].id
  description       = "igniter status endpoint (scaling.status_listen): /metrics and /healthz; /v1/* with its bearer token"
  ip_protocol       = "tcp"
  from_port         = var.status_port
  to_port           = var.status_port
  cidr_ipv4         = strcontains(each.value, ":") ? null : each.value
  cidr_ipv6         = strcontains(each.value, ":") ? each.value : null

  tags = local.tags
}

resource "aws_instance" "host" {
  count = var.create_host ? 1 : 0

  ami                         = var.host_ami_id != null ? var.host_ami_id : data.aws_ssm_parameter.host_ami[0].insecure_value
  instance_type               = var.host_instance_type
  subnet_id                   = var.host_subnet_id
  vpc_security_group_ids      = [aws_security_group.host[0].id]
  iam_instance_profile        = aws_iam_instance_profile.host[0].name
  associate_public_ip_address = false
  monitoring                  = true
  ebs_optimized               = true
  user_data_replace_on_change = true

  user_data = templatefile("${path.module}/templates/autoscaler-user-data.yaml.tftpl", {
    fleet              = var.name
    region             = local.region
    igniter_package    = coalesce(var.igniter_package, "unset")
    ssh_key_secret_arn = local.ssh_key_secret_arn
    ssh_key_file       = local.ssh_key_file
    known_hosts_file   = local.known_hosts_file
    policy_file        = local.policy_file
    policy_b64         = var.policy_yaml == null ? "" : base64encode(var.policy_yaml)
    # deploy/systemd/igniter.service, as it is (indented for the YAML block it goes in)
    autoscaler_unit = indent(6, trimspace(file("${path.module}/../../../deploy/systemd/igniter.service")))
  })

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type           = "gp3"
    volume_size           = var.host_root_volume_size_gb
    encrypted             = true
    kms_key_id            = var.ebs_kms_key_arn
    delete_on_termination = true
  }

  tags        = merge(local.tags, { Name = "${var.name}-autoscaler" })
  volume_tags = merge(local.tags, { Name = "${var.name}-autoscaler" })

  lifecycle {
    # A new AMI in the SSM parameter must not silently replace the running autoscaler.
    ignore_changes = [ami]

    precondition {
      condition     = var.host_subnet_id != null
      error_message = "host_subnet_id is required when create_host is true."
    }

    precondition {
      condition     = var.igniter_package != null
      error_message = "igniter_package is required when create_host is true."
    }
  }
}
