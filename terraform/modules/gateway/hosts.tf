# The gateway hosts: one launch template, one Auto Scaling group registered with the load
# balancer's target group. A host the load balancer finds unhealthy for long is replaced; a new
# one serves only once the autoscaler has configured it (its bootstrap configuration fails the
# health check on purpose).

data "aws_ssm_parameter" "ami" {
  count = var.ami_id == null ? 1 : 0
  name  = var.ami_ssm_parameter
}

locals {
  user_data = templatefile("${path.module}/templates/gateway-user-data.yaml.tftpl", {
    fleet          = var.name
    gateway_user   = var.gateway_user
    ssh_public_key = trimspace(var.autoscaler_ssh_public_key)
    gateway_dir    = var.gateway_dir
    gateway_port   = var.gateway_port
  })
}

resource "aws_launch_template" "host" {
  name_prefix            = "${var.name}-gateway-"
  description            = "igniter ${var.name}: gateway host running HAProxy, driven by the autoscaler"
  image_id               = var.ami_id != null ? var.ami_id : data.aws_ssm_parameter.ami[0].insecure_value
  instance_type          = var.instance_type
  ebs_optimized          = true
  update_default_version = true
  user_data              = base64encode(local.user_data)
  vpc_security_group_ids = [aws_security_group.host.id]

  iam_instance_profile {
    arn = aws_iam_instance_profile.host.arn
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "disabled"
  }

  monitoring {
    enabled = true
  }

  block_device_mappings {
    device_name = "/dev/sda1"

    ebs {
      volume_size           = var.root_volume_size_gb
      volume_type           = "gp3"
      encrypted             = true
      kms_key_id            = var.ebs_kms_key_arn
      delete_on_termination = true
    }
  }

  dynamic "tag_specifications" {
    for_each = ["instance", "volume", "network-interface"]

    content {
      resource_type = tag_specifications.value
      tags          = merge(local.tags, { Name = "${var.name}-gateway" })
    }
  }

  tags = local.tags
}

resource "aws_autoscaling_group" "hosts" {
  name_prefix               = "${var.name}-gateway-"
  min_size                  = var.min_size
  max_size                  = var.max_size
  desired_capacity          = local.desired
  vpc_zone_identifier       = var.subnet_ids
  target_group_arns         = [aws_lb_target_group.hosts.arn]
  health_check_type         = "ELB"
  health_check_grace_period = 600
  default_instance_warmup   = 120

  launch_template {
    id      = aws_launch_template.host.id
    version = aws_launch_template.host.latest_version
  }

  # A new launch template (AMI, user data) rolls through the hosts one at a time, each new host
  # serving (configured by the autoscaler, healthy) before the next old one goes.
  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 100
      max_healthy_percentage = 200
    }
  }

  dynamic "tag" {
    for_each = merge(local.tags, { Name = "${var.name}-gateway" })

    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    create_before_destroy = true

    precondition {
      condition     = var.min_size <= local.desired && local.desired <= var.max_size
      error_message = "desired_capacity must lie between min_size and max_size."
    }
  }
}
