# The autoscaler's role, least privilege: exactly the calls autoscaler/ uses, each as narrow as IAM
# allows. What it can do, and why (docs/deploy.md has the table):
#   - launch instances only from the fleet's launch templates, into the fleet's subnets and
#     security groups, and only when the new instance is tagged igniter:fleet=<name>, is of one
#     of the fleet's instance types, requires IMDSv2, and boots the template's own image (a
#     caller cannot override the AMI: ec2:IsLaunchTemplateResource); spot
#     launches too (RunInstances with InstanceMarketOptions: its spot request, from the fleet's
#     templates, and its instance, tagged for the fleet like any other);
#   - tag resources only while launching them (TagSpecifications), the instance only with the
#     fleet tag;
#   - terminate only instances tagged igniter:fleet=<name>;
#   - with var.warm_pool: stop and start only the fleet's warm-pool instances (tagged
#     igniter:fleet=<name> and igniter:pool), re-tag a stopped pool member for the slot that
#     claims it, and re-tag a retiring fleet instance as a pool member (reuse on scale-in; the
#     fleet tag kept, only igniter's own keys);
#   - read the console output of those instances only (new nodes' SSH host keys, printed there by
#     cloud-init: the autoscaler pins them before it first connects), and of the fleet's gateway
#     hosts (tagged igniter:gateway=<name>), for the same reason;
#   - describe instances (the call takes no resources);
#   - read CloudWatch metrics (request rates) and its SSH key from Secrets Manager;
#   - read and conditionally write its own fleet's item of the leader lease table, nothing else;
#   - receive and delete the messages of the fleet's interruption queue, that queue only;
#   - pass the node role, and only the node role, to EC2.

data "aws_partition" "current" {}
data "aws_region" "current" {}
data "aws_caller_identity" "current" {}

locals {
  fleet_tag_key = "igniter:fleet"

  # Deliberately NOT the fleet tag: the autoscaler lists, and may terminate, every instance that
  # carries igniter:fleet=<name>, and its own host must never be one of them.
  tags = merge(var.tags, { "igniter:autoscaler" = var.name })

  partition = data.aws_partition.current.partition
  region    = data.aws_region.current.name
  account   = data.aws_caller_identity.current.account_id
  ec2_arn   = "arn:${local.partition}:ec2:${local.region}:${local.account}"

  subnet_arns         = [for s in var.subnet_ids : "${local.ec2_arn}:subnet/${s}"]
  security_group_arns = [for s in var.node_security_group_ids : "${local.ec2_arn}:security-group/${s}"]
}

data "aws_iam_policy_document" "assume" {
  statement {
    sid     = "Ec2HostAssumes"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }

  dynamic "statement" {
    for_each = length(var.trusted_role_arns) > 0 ? [var.trusted_role_arns] : []

    content {
      sid     = "TrustedRolesAssume"
      actions = ["sts:AssumeRole"]

      principals {
        type        = "AWS"
        identifiers = statement.value
      }
    }
  }
}

resource "aws_iam_role" "autoscaler" {
  name_prefix          = "${var.name}-autoscaler-"
  description          = "igniter ${var.name} autoscaler: launches and terminates the fleet's GPU nodes"
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  permissions_boundary = var.permissions_boundary_arn

  tags = local.tags
}

data "aws_iam_policy_document" "autoscaler" {
  statement {
    sid       = "LaunchFromFleetTemplatesOnly"
    actions   = ["ec2:RunInstances"]
    resources = var.launch_template_arns
  }

  statement {
    sid       = "LaunchOnlyInstancesTaggedForTheFleet"
    actions   = ["ec2:RunInstances"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/${local.fleet_tag_key}"
      values   = [var.name]
    }

    condition {
      test     = "ArnEquals"
      variable = "ec2:LaunchTemplate"
      values   = var.launch_template_arns
    }

    condition {
      test     = "StringEquals"
      variable = "ec2:InstanceType"
      values   = var.instance_types
    }

    condition {
      test     = "StringEquals"
      variable = "ec2:MetadataHttpTokens"
      values   = ["required"]
    }
  }

  statement {
    sid       = "LaunchOnlyTheTemplatesImage"
    actions   = ["ec2:RunInstances"]
    resources = ["arn:${local.partition}:ec2:${local.region}::image/*"]

    condition {
      test     = "ArnEquals"
      variable = "ec2:LaunchTemplate"
      values   = var.launch_template_arns
    }

    condition {
      test     = "Bool"
      variable = "ec2:IsLaunchTemplateResource"
      values   = ["true"]
    }
  }

  statement {
    sid     = "LaunchSupportingResourcesFromFleetTemplates"
    actions = ["ec2:RunInstances"]
    resources = concat(
      [
        "${local.ec2_arn}:volume/*",
        "${local.ec2_arn}:network-interface/*",
        "${local.ec2_arn}:spot-instances-request/*",
      ],
      local.subnet_arns,
      local.security_group_arns,
    )

    condition {
      test     = "ArnEquals"
      variable = "ec2:LaunchTemplate"
      values   = var.launch_template_arns
    }
  }

  statement {
    sid       = "TagInstancesAtLaunchWithTheFleetTag"
    actions   = ["ec2:CreateTags"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["RunInstances"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/${local.fleet_tag_key}"
      values   = [var.name]
    }
  }

  # Volumes and network interfaces get their tags (igniter:fleet included) from the launch
  # template in the same RunInstances call, which the statements above already confine.
  statement {
    sid       = "TagVolumesAndInterfacesAtLaunch"
    actions   = ["ec2:CreateTags"]
    resources = ["${local.ec2_arn}:volume/*", "${local.ec2_arn}:network-interface/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["RunInstances"]
    }
  }

  statement {
    sid       = "TerminateOwnFleetInstancesOnly"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/${local.fleet_tag_key}"
      values   = [var.name]
    }
  }

  # The warm pool (autoscaler/fleet/ec2_pool.py): members are launched like any instance (above),
  # stopped once initialised and started for a scale-out. Only instances of this fleet's pool:
  # igniter:fleet=<name> and igniter:pool (member, or claimed by a slot) on the instance itself.
  dynamic "statement" {
    for_each = var.warm_pool ? ["pool"] : []

    content {
      sid       = "StopAndStartOwnFleetPoolInstancesOnly"
      actions   = ["ec2:StartInstances", "ec2:StopInstances"]
      resources = ["${local.ec2_arn}:instance/*"]

      condition {
        test     = "StringEquals"
        variable = "ec2:ResourceTag/${local.fleet_tag_key}"
        values   = [var.name]
      }

      condition {
        test     = "StringEquals"
        variable = "ec2:ResourceTag/igniter:pool"
        values   = ["member", "claimed"]
      }
    }
  }

  # A claim re-tags a stopped member for its slot before starting it: only a member of this fleet's
  # pool, only igniter's own tag keys (and Name), and the fleet tag stays this fleet's.
  dynamic "statement" {
    for_each = var.warm_pool ? ["claim"] : []

    content {
      sid       = "TagOwnFleetPoolMembersForTheirSlot"
      actions   = ["ec2:CreateTags"]
      resources = ["${local.ec2_arn}:instance/*"]

      condition {
        test     = "StringEquals"
        variable = "ec2:ResourceTag/${local.fleet_tag_key}"
        values   = [var.name]
      }

      condition {
        test     = "StringEquals"
        variable = "ec2:ResourceTag/igniter:pool"
        values   = ["member"]
      }

      condition {
        test     = "StringEquals"
        variable = "aws:RequestTag/${local.fleet_tag_key}"
        values   = [var.name]
      }

      condition {
        test     = "ForAllValues:StringEquals"
        variable = "aws:TagKeys"
        values   = ["igniter:fleet", "igniter:slot", "igniter:generation", "igniter:attempt", "igniter:capacity-type", "igniter:pool", "Name"]
      }
    }
  }

  # Reuse on scale-in (warm_pool.reuse_on_scale_in): an instance of this fleet the plan retires is
  # re-tagged as a pool member (then stopped, above) instead of terminated. Only this fleet's
  # instances, only into this fleet's pool (the request sets igniter:pool=member and keeps the
  # fleet tag), only igniter's own tag keys (and Name).
  dynamic "statement" {
    for_each = var.warm_pool ? ["return"] : []

    content {
      sid       = "ReturnOwnFleetInstancesToThePool"
      actions   = ["ec2:CreateTags"]
      resources = ["${local.ec2_arn}:instance/*"]

      condition {
        test     = "StringEquals"
        variable = "ec2:ResourceTag/${local.fleet_tag_key}"
        values   = [var.name]
      }

      condition {
        test     = "StringEquals"
        variable = "aws:RequestTag/${local.fleet_tag_key}"
        values   = [var.name]
      }

      condition {
        test     = "StringEquals"
        variable = "aws:RequestTag/igniter:pool"
        values   = ["member"]
      }

      condition {
        test     = "ForAllValues:StringEquals"
        variable = "aws:TagKeys"
        values   = ["igniter:fleet", "igniter:slot", "igniter:generation", "igniter:attempt", "igniter:capacity-type", "igniter:pool", "Name"]
      }
    }
  }

  # New nodes' SSH host keys: cloud-init prints them to the console, and the autoscaler pins them
  # before its first SSH connection (autoscaler/fleet/ec2.py host_keys). Only the fleet's instances.
  statement {
    sid       = "ReadOwnFleetInstancesConsoleForHostKeys"
    actions   = ["ec2:GetConsoleOutput"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/${local.fleet_tag_key}"
      values   = [var.name]
    }
  }

  # Gateway hosts (modules/gateway) publish their SSH host keys on the console too; the autoscaler
  # pins them before it drives their HAProxy over SSH. Only the fleet's gateway hosts.
  statement {
    sid       = "ReadOwnGatewayHostsConsoleForHostKeys"
    actions   = ["ec2:GetConsoleOutput"]
    resources = ["${local.ec2_arn}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/igniter:gateway"
      values   = [var.name]
    }
  }

  # The one Describe call the autoscaler makes (autoscaler/fleet/ec2.py: list the fleet, find a
  # slot's instance before launching, check the tag before terminating). Describe calls take no
  # resource-level permissions. Deliberately not ec2:Describe*, which includes
  # DescribeInstanceAttribute: the user data of every instance in the account.
  statement {
    sid       = "DescribeInstances"
    actions   = ["ec2:DescribeInstances"]
    resources = ["*"]
  }

  # GetMetricData supports no resource-level permissions either.
  statement {
    sid       = "ReadRequestRateMetrics"
    actions   = ["cloudwatch:GetMetricData"]
    resources = ["*"]
  }

  # Spot interruption and maintenance notices (autoscaler/fleet/interruptions.py): read and delete,
  # on the fleet's queue only. DeleteMessageBatch is authorised as sqs:DeleteMessage.
  dynamic "statement" {
    for_each = var.interruption_queue_arn == null ? [] : [var.interruption_queue_arn]

    content {
      sid       = "ReadAndDeleteInterruptionNotices"
      actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage"]
      resources = [statement.value]
    }
  }

  dynamic "statement" {
    for_each = var.interruption_queue_kms_key_arn == null ? [] : [var.interruption_queue_kms_key_arn]

    content {
      sid       = "DecryptInterruptionNoticesThroughSqs"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["sqs.${local.region}.amazonaws.com"]
      }
    }
  }

  statement {
    sid       = "PassOnlyTheNodeRoleToEc2"
    actions   = ["iam:PassRole"]
    resources = [var.node_role_arn]

    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }

  statement {
    sid       = "ReadItsSshKey"
    actions   = ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"]
    resources = [local.ssh_key_secret_arn]
  }

  # Decided from booleans, not from the (maybe not yet known) key ARN, so plans never stall.
  dynamic "statement" {
    for_each = local.create_secret || var.ssh_key_secret_kms_key_arn != null ? ["decrypt"] : []

    content {
      sid       = "DecryptItsSshKeyThroughSecretsManager"
      actions   = ["kms:Decrypt"]
      resources = [local.ssh_key_kms_key_arn]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["secretsmanager.${local.region}.amazonaws.com"]
      }
    }
  }

  dynamic "statement" {
    for_each = var.ebs_kms_key_arn == null ? [] : [var.ebs_kms_key_arn]

    content {
      sid       = "UseNodeVolumeKeyThroughEc2"
      actions   = ["kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncrypt*"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["ec2.${local.region}.amazonaws.com"]
      }
    }
  }

  # The leader lease (leader.tf): the three calls autoscaler/leader/dynamodb.py makes, on that table
  # only, and only on the item whose key is this fleet's name. Decided from the boolean and the
  # variable, not from the table's ARN, so plans never stall on it.
  dynamic "statement" {
    for_each = var.create_leader_table || var.leader_table_arn != null ? ["lease"] : []

    content {
      sid       = "LeaderLeaseOnItsOwnFleetItemOnly"
      actions   = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
      resources = [local.leader_table_arn]

      condition {
        test     = "ForAllValues:StringEquals"
        variable = "dynamodb:LeadingKeys"
        values   = [var.name]
      }
    }
  }
}

resource "aws_iam_policy" "autoscaler" {
  name_prefix = "${var.name}-autoscaler-"
  description = "igniter ${var.name} autoscaler: launch, tag and terminate only this fleet's instances"
  policy      = data.aws_iam_policy_document.autoscaler.json

  tags = local.tags

  lifecycle {
    precondition {
      condition     = local.create_secret || var.ssh_key_secret_arn != null
      error_message = "ssh_key_secret_arn is required when create_ssh_key_secret is false."
    }
  }
}

resource "aws_iam_role_policy_attachment" "autoscaler" {
  role       = aws_iam_role.autoscaler.name
  policy_arn = aws_iam_policy.autoscaler.arn
}

resource "aws_iam_role_policy_attachment" "host_ssm" {
  count = var.create_host && var.enable_ssm_session_manager ? 1 : 0

  role       = aws_iam_role.autoscaler.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}
