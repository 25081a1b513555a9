# The node security group. Ingress: the SSH port and the inference server port range, only from
# the autoscaler's security groups and the explicit CIDR list (variables.tf refuses /0 blocks).
# Egress: HTTPS and HTTP for package installs, S3 and CloudWatch; nothing else.

locals {
  node_ports = {
    ssh = {
      from        = var.ssh_port
      to          = var.ssh_port
      description = "SSH: the autoscaler drives igniter-agent"
    }
    servers = {
      from        = var.server_port_range.from
      to          = var.server_port_range.to
      description = "igniter inference servers (KServe v2 REST)"
    }
  }

  # Keys are built from list positions and port names so for_each works even when the group IDs
  # are only known after apply (e.g. the autoscaler module's group, created in the same run).
  ingress_from_groups = {
    for pair in setproduct(range(length(var.autoscaler_security_group_ids)), keys(local.node_ports)) :
    "sg${pair[0]}-${pair[1]}" => merge(local.node_ports[pair[1]], { group = var.autoscaler_security_group_ids[pair[0]] })
  }

  ingress_from_cidrs = {
    for pair in setproduct(var.allowed_cidr_blocks, keys(local.node_ports)) :
    "${pair[0]}-${pair[1]}" => merge(local.node_ports[pair[1]], { cidr = pair[0] })
  }

  egress = {
    for pair in setproduct(var.egress_cidr_blocks, [443, 80]) :
    "${pair[0]}-${pair[1]}" => { cidr = pair[0], port = pair[1] }
  }
}

resource "aws_security_group" "node" {
  name_prefix = "${var.name}-node-"
  description = "igniter ${var.name} GPU nodes: SSH and inference ports from the autoscaler and allowed CIDRs only"
  vpc_id      = local.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-node" })

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = local.create_vpc || (var.vpc_id != null && length(var.subnet_ids) > 0)
      error_message = "With create_vpc = false, vpc_id and at least one subnet in subnet_ids are required."
    }
  }
}

resource "aws_vpc_security_group_ingress_rule" "from_autoscaler" {
  for_each = local.ingress_from_groups

  security_group_id            = aws_security_group.node.id
  description                  = each.value.description
  ip_protocol                  = "tcp"
  from_port                    = each.value.from
  to_port                      = each.value.to
  referenced_security_group_id = each.value.group

  tags = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "from_cidr" {
  for_each = local.ingress_from_cidrs

  security_group_id = aws_security_group.node.id
  description       = each.value.description
  ip_protocol       = "tcp"
  from_port         = each.value.from
  to_port           = each.value.to
  cidr_ipv4         = strcontains(each.value.cidr, ":") ? null : each.value.cidr
  cidr_ipv6         = strcontains(each.value.cidr, ":") ? each.value.cidr : null

  tags = local.tags
}

resource "aws_vpc_security_group_egress_rule" "node" {
  for_each = local.egress

  security_group_id = aws_security_group.node.id
  description       = each.value.port == 443 ? "HTTPS: package index, S3 model sync, CloudWatch" : "HTTP: OS package mirrors"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = strcontains(each.value.cidr, ":") ? null : each.value.cidr
  cidr_ipv6         = strcontains(each.value.cidr, ":") ? each.value.cidr : null

  tags = local.tags
}
