# One launch template per GPU instance type. The autoscaler calls ec2:RunInstances with the
# template named in the policy's provider.launch_templates, a subnet from provider.subnets, and
# its own igniter:* tags; everything else about a node is fixed here.

data "aws_ssm_parameter" "gpu_ami" {
  count = var.ami_id == null ? 1 : 0
  name  = var.ami_ssm_parameter
}

locals {
  default_ami_id = var.ami_id != null ? var.ami_id : data.aws_ssm_parameter.gpu_ami[0].insecure_value

  node_user_data = templatefile("${path.module}/templates/node-user-data.yaml.tftpl", {
    fleet                    = var.name
    region                   = data.aws_region.current.name
    agent_user               = var.agent_user
    ssh_public_key           = trimspace(var.autoscaler_ssh_public_key)
    igniter_package          = var.igniter_package
    state_dir                = local.state_dir
    model_source             = "s3://${var.model_bucket}/${var.model_prefix}"
    model_dir                = var.model_dir
    model_sync_interval      = var.model_sync_interval
    install_cloudwatch_agent = var.install_cloudwatch_agent ? "true" : "false"
    # deploy/systemd's units, as they are (indented for the YAML block they go in)
    agent_unit     = indent(6, trimspace(file("${path.module}/../../../deploy/systemd/igniter-agent.service")))
    gpu_setup_unit = indent(6, trimspace(file("${path.module}/../../../deploy/systemd/igniter-gpu-setup.service")))
  })
}

resource "aws_launch_template" "node" {
  for_each = toset(var.instance_types)

  name                   = "${var.name}-${each.key}"
  description            = "igniter ${var.name}: ${each.key} GPU node running igniter-agent"
  image_id               = lookup(var.ami_ids_by_instance_type, each.key, local.default_ami_id)
  instance_type          = each.key
  ebs_optimized          = true
  update_default_version = true
  user_data              = base64encode(local.node_user_data)
  vpc_security_group_ids = [aws_security_group.node.id]

  # A node that shuts itself down is gone for good; the autoscaler replaces it.
  instance_initiated_shutdown_behavior = "terminate"

  iam_instance_profile {
    arn = aws_iam_instance_profile.node.arn
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
    device_name = var.root_device_name

    ebs {
      volume_size           = var.root_volume_size_gb
      volume_type           = "gp3"
      encrypted             = true
      kms_key_id            = var.ebs_kms_key_arn
      delete_on_termination = true
    }
  }

  # Defaults for what a launch creates. The autoscaler's own TagSpecifications (igniter:fleet,
  # igniter:slot, igniter:generation) replace the instance tags below; volumes and network
  # interfaces keep these, so every resource of a node carries the fleet tag.
  dynamic "tag_specifications" {
    for_each = ["instance", "volume", "network-interface"]

    content {
      resource_type = tag_specifications.value
      tags          = merge(local.tags, { Name = "${var.name}-${each.key}", "igniter:instance-type" = each.key })
    }
  }

  tags = merge(local.tags, { "igniter:instance-type" = each.key })
}
