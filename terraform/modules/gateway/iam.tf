# The hosts' role: nothing but (opt-in) Session Manager. HAProxy needs no AWS API, and the
# autoscaler drives it over SSH; the role exists so an instance profile can be attached and
# tightened later without replacing hosts.

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "host" {
  name_prefix          = "${var.name}-gateway-"
  description          = "igniter ${var.name} gateway hosts: no AWS permissions (Session Manager opt-in)"
  assume_role_policy   = data.aws_iam_policy_document.assume.json
  permissions_boundary = var.permissions_boundary_arn

  tags = local.tags
}

resource "aws_iam_instance_profile" "host" {
  name_prefix = "${var.name}-gateway-"
  role        = aws_iam_role.host.name

  tags = local.tags
}

resource "aws_iam_role_policy_attachment" "host_ssm" {
  count = var.enable_ssm_session_manager ? 1 : 0

  role       = aws_iam_role.host.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}
