# The Network Load Balancer: one listener (TCP, or TLS with certificate_arn) forwarding to HAProxy
# on every healthy host. A host is healthy when HAProxy answers /v2/health/ready with 200, i.e. once
# the autoscaler has configured it and every workload has a server taking requests.

resource "aws_lb" "gateway" {
  #checkov:skip=CKV2_AWS_20:This is a Network Load Balancer (layer 4): it cannot redirect HTTP to HTTPS, an Application Load Balancer feature. It forwards TCP, or terminates TLS itself when certificate_arn is set.
  name                             = "${var.name}-gw"
  load_balancer_type               = "network"
  internal                         = var.internal
  subnets                          = local.lb_subnet_ids
  security_groups                  = [aws_security_group.lb.id]
  enable_cross_zone_load_balancing = true
  enable_deletion_protection       = var.deletion_protection

  dynamic "access_logs" {
    for_each = var.access_logs_bucket == null ? [] : [var.access_logs_bucket]

    content {
      bucket  = access_logs.value
      prefix  = "igniter-${var.name}-gateway"
      enabled = true
    }
  }

  tags = merge(local.tags, { Name = "${var.name}-gateway" })
}

resource "aws_lb_target_group" "hosts" {
  name_prefix          = "igw-"
  port                 = var.gateway_port
  protocol             = "TCP"
  target_type          = "instance"
  vpc_id               = var.vpc_id
  deregistration_delay = 60
  preserve_client_ip   = true

  health_check {
    protocol            = "HTTP"
    path                = "/v2/health/ready"
    port                = "traffic-port"
    matcher             = "200"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }

  tags = local.tags

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_lb_listener" "gateway" {
  load_balancer_arn = aws_lb.gateway.arn
  port              = var.listener_port
  protocol          = local.tls ? "TLS" : "TCP"
  certificate_arn   = var.certificate_arn
  ssl_policy        = local.tls ? "ELBSecurityPolicy-TLS13-1-2-2021-06" : null

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.hosts.arn
  }

  tags = local.tags
}
