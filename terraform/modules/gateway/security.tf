# Three rules sets. The load balancer admits clients on its listener; the hosts admit the load
# balancer on the gateway port and the autoscaler on SSH, nothing else; the node security group
# admits the hosts on the inference server ports. Hosts reach out only to the nodes' server
# ports, and to HTTPS/HTTP for packages at boot.

resource "aws_security_group" "lb" {
  name_prefix = "${var.name}-gateway-lb-"
  description = "igniter ${var.name} gateway load balancer: clients on the listener port only"
  vpc_id      = var.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-gateway-lb" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "lb_clients" {
  for_each = toset(var.client_cidr_blocks)

  security_group_id = aws_security_group.lb.id
  description       = "Inference clients (KServe v2 REST)"
  ip_protocol       = "tcp"
  from_port         = var.listener_port
  to_port           = var.listener_port
  cidr_ipv4         = strcontains(each.value, ":") ? null : each.value
  cidr_ipv6         = strcontains(each.value, ":") ? each.value : null

  tags = local.tags
}

resource "aws_vpc_security_group_egress_rule" "lb_to_hosts" {
  security_group_id            = aws_security_group.lb.id
  description                  = "Requests and health checks to the gateway hosts"
  ip_protocol                  = "tcp"
  from_port                    = var.gateway_port
  to_port                      = var.gateway_port
  referenced_security_group_id = aws_security_group.host.id

  tags = local.tags
}

resource "aws_security_group" "host" {
  name_prefix = "${var.name}-gateway-"
  description = "igniter ${var.name} gateway hosts: HAProxy from the load balancer, SSH from the autoscaler only"
  vpc_id      = var.vpc_id

  tags = merge(local.tags, { Name = "${var.name}-gateway" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "host_from_lb" {
  security_group_id            = aws_security_group.host.id
  description                  = "Client requests and health checks from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = var.gateway_port
  to_port                      = var.gateway_port
  referenced_security_group_id = aws_security_group.lb.id

  tags = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "host_ssh_from_autoscaler" {
  for_each = { for i, sg in var.autoscaler_security_group_ids : "sg${i}" => sg }

  security_group_id            = aws_security_group.host.id
  description                  = "SSH: the autoscaler drives HAProxy's runtime API (a unix socket on the host)"
  ip_protocol                  = "tcp"
  from_port                    = var.ssh_port
  to_port                      = var.ssh_port
  referenced_security_group_id = each.value

  tags = local.tags
}

resource "aws_vpc_security_group_egress_rule" "host_to_nodes" {
  security_group_id            = aws_security_group.host.id
  description                  = "Requests and health checks to the nodes' inference servers"
  ip_protocol                  = "tcp"
  from_port                    = var.server_port_range.from
  to_port                      = var.server_port_range.to
  referenced_security_group_id = var.node_security_group_id

  tags = local.tags
}

resource "aws_vpc_security_group_egress_rule" "host_internet" {
  for_each = { for pair in setproduct(var.egress_cidr_blocks, [443, 80]) : "${pair[0]}-${pair[1]}" => { cidr = pair[0], port = pair[1] } }

  security_group_id = aws_security_group.host.id
  description       = each.value.port == 443 ? "HTTPS: package index" : "HTTP: OS package mirrors"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = strcontains(each.value.cidr, ":") ? null : each.value.cidr
  cidr_ipv6         = strcontains(each.value.cidr, ":") ? each.value.cidr : null

  tags = local.tags
}

# The node security group admits the gateway hosts on the inference server ports, and nothing else.
resource "aws_vpc_security_group_ingress_rule" "nodes_from_gateway" {
  security_group_id            = var.node_security_group_id
  description                  = "igniter ${var.name} gateway hosts: inference requests and health checks"
  ip_protocol                  = "tcp"
  from_port                    = var.server_port_range.from
  to_port                      = var.server_port_range.to
  referenced_security_group_id = aws_security_group.host.id

  tags = local.tags
}
