# Spot interruption and maintenance notices for the autoscaler (autoscaler/fleet/interruptions.py).
# EventBridge sends the four kinds of events that say an instance is going away to one SQS queue:
#   - EC2 Spot Instance Interruption Warning (EC2 takes the instance two minutes later),
#   - EC2 Instance Rebalance Recommendation (elevated risk of interruption),
#   - EC2 Instance State-change Notification (stopping, stopped, shutting-down, terminated),
#   - AWS Health Event, EC2 scheduledChange (retirement, maintenance).
# The autoscaler reads the queue every tick (the policy's scaling.spot.interruption_queue is the
# output interruption_queue_url) and deletes each message once handled. The rules match every
# instance of the region (EventBridge cannot filter on instance tags): the autoscaler ignores
# notices about instances it does not own. Messages older than 5 minutes are worth nothing (a spot
# warning gives two) and expire.

locals {
  interruption_events = {
    spot-interruption = { source = ["aws.ec2"], detail-type = ["EC2 Spot Instance Interruption Warning"] }
    rebalance         = { source = ["aws.ec2"], detail-type = ["EC2 Instance Rebalance Recommendation"] }
    state-change = {
      source      = ["aws.ec2"]
      detail-type = ["EC2 Instance State-change Notification"]
      detail      = { state = ["stopping", "stopped", "shutting-down", "terminated"] }
    }
    scheduled-change = {
      source      = ["aws.health"]
      detail-type = ["AWS Health Event"]
      detail      = { service = ["EC2"], eventTypeCategory = ["scheduledChange"] }
    }
  }
}

resource "aws_kms_key" "interruptions" {
  count = var.create_interruption_queue ? 1 : 0

  description             = "igniter ${var.name}: encrypts the interruption queue"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.interruptions_key[0].json

  tags = local.tags
}

data "aws_iam_policy_document" "interruptions_key" {
  count = var.create_interruption_queue ? 1 : 0

  #checkov:skip=CKV_AWS_109:This is a KMS key policy, not an identity policy: its resource "*" means this key only, and the account-root statement is what lets IAM policies govern the key.
  #checkov:skip=CKV_AWS_111:This is a KMS key policy, not an identity policy: its resource "*" means this key only, and the account-root statement is what lets IAM policies govern the key.
  #checkov:skip=CKV_AWS_356:This is a KMS key policy, not an identity policy: its resource "*" means this key only (KMS requires "*" in key policies).
  statement {
    sid       = "AccountAdministersKey"
    actions   = ["kms:*"]
    resources = ["*"]

    principals {
      type        = "AWS"
      identifiers = ["arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }

  # EventBridge encrypts what it sends to the queue with this key; only for this fleet's rules.
  statement {
    sid       = "EventBridgeSendsToTheQueue"
    actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${data.aws_partition.current.partition}:events:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:rule/${var.name}-*"]
    }
  }
}

resource "aws_sqs_queue" "interruptions" {
  count = var.create_interruption_queue ? 1 : 0

  name                              = "${var.name}-interruptions"
  message_retention_seconds         = 300
  visibility_timeout_seconds        = 60
  kms_master_key_id                 = aws_kms_key.interruptions[0].arn
  kms_data_key_reuse_period_seconds = 300

  tags = local.tags
}

data "aws_iam_policy_document" "interruptions_queue" {
  count = var.create_interruption_queue ? 1 : 0

  statement {
    sid       = "EventBridgeRulesOfThisFleetSend"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.interruptions[0].arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for rule in aws_cloudwatch_event_rule.interruptions : rule.arn]
    }
  }

  statement {
    sid       = "DenyUnencryptedTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [aws_sqs_queue.interruptions[0].arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sqs_queue_policy" "interruptions" {
  count = var.create_interruption_queue ? 1 : 0

  queue_url = aws_sqs_queue.interruptions[0].id
  policy    = data.aws_iam_policy_document.interruptions_queue[0].json
}

resource "aws_cloudwatch_event_rule" "interruptions" {
  # Patterns as JSON strings: for_each needs one value type, and the four patterns differ in shape.
  for_each = { for name, pattern in local.interruption_events : name => jsonencode(pattern) if var.create_interruption_queue }

  name          = "${var.name}-${each.key}"
  description   = "igniter ${var.name}: ${each.key} events to the interruption queue"
  event_pattern = each.value

  tags = local.tags
}

resource "aws_cloudwatch_event_target" "interruptions" {
  for_each = aws_cloudwatch_event_rule.interruptions

  rule      = each.value.name
  target_id = "interruption-queue"
  arn       = aws_sqs_queue.interruptions[0].arn
}

# EC2 launches spot instances through its service-linked role AWSServiceRoleForEC2Spot, one per
# account, which EC2 creates on the first spot launch only if the caller may create it (the
# autoscaler's role may not). Create it here once per account, or with
# `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`.
resource "aws_iam_service_linked_role" "spot" {
  count = var.create_spot_service_linked_role ? 1 : 0

  aws_service_name = "spot.amazonaws.com"
  description      = "EC2 Spot launches spot instances for the igniter autoscaler"

  tags = local.tags
}
