# The node role: read-only access to the model prefix, the CloudWatch agent's permissions, and
# (opt-in) Session Manager. The autoscaler may pass only this role to the instances it launches.

data "aws_iam_policy_document" "node_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name_prefix          = "${var.name}-node-"
  description          = "igniter ${var.name} GPU nodes: read models from S3, publish CloudWatch metrics"
  assume_role_policy   = data.aws_iam_policy_document.node_assume.json
  permissions_boundary = var.permissions_boundary_arn

  tags = local.tags
}

resource "aws_iam_instance_profile" "node" {
  name_prefix = "${var.name}-node-"
  role        = aws_iam_role.node.name

  tags = local.tags
}

locals {
  model_bucket_arn = "arn:${data.aws_partition.current.partition}:s3:::${var.model_bucket}"
}

data "aws_iam_policy_document" "node_models" {
  statement {
    sid       = "ListModelPrefix"
    actions   = ["s3:ListBucket"]
    resources = [local.model_bucket_arn]

    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [var.model_prefix, "${var.model_prefix}*"]
    }
  }

  statement {
    sid       = "ReadModels"
    actions   = ["s3:GetObject"]
    resources = ["${local.model_bucket_arn}/${var.model_prefix}*"]
  }

  dynamic "statement" {
    for_each = var.model_bucket_kms_key_arn == null ? [] : [var.model_bucket_kms_key_arn]

    content {
      sid       = "DecryptModelsThroughS3"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.name}.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_role_policy" "node_models" {
  name   = "read-models"
  role   = aws_iam_role.node.id
  policy = data.aws_iam_policy_document.node_models.json
}

resource "aws_iam_role_policy_attachment" "node_cloudwatch_agent" {
  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/CloudWatchAgentServerPolicy"
}

resource "aws_iam_role_policy_attachment" "node_ssm" {
  count = var.enable_ssm_session_manager ? 1 : 0

  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}
