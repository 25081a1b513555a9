# The fleet's network: an existing VPC and subnets (create_vpc = false, vpc_id, subnet_ids) or a
# new VPC with one private subnet per listed availability zone. Created subnets never map public
# addresses; egress goes through an optional NAT gateway, and S3 (model sync) through a free
# gateway endpoint.

locals {
  create_vpc = var.create_vpc
  vpc_id     = local.create_vpc ? aws_vpc.this[0].id : var.vpc_id
  subnet_ids = local.create_vpc ? aws_subnet.private[*].id : var.subnet_ids
  azs        = local.create_vpc ? var.availability_zones : []
  create_nat = local.create_vpc && var.create_nat_gateway
}

# Confirms the listed zones exist in the region and are available (and pins the zone set).
data "aws_availability_zones" "listed" {
  count = local.create_vpc ? 1 : 0
  state = "available"

  filter {
    name   = "zone-name"
    values = var.availability_zones
  }

  lifecycle {
    precondition {
      condition     = length(var.availability_zones) > 0
      error_message = "availability_zones must list at least one zone when create_vpc is true."
    }

    postcondition {
      condition     = length(self.names) == length(var.availability_zones)
      error_message = "Every zone in availability_zones must exist, and be available, in the provider's region."
    }
  }
}

resource "aws_vpc" "this" {
  count = local.create_vpc ? 1 : 0

  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true

  tags = merge(local.tags, { Name = var.name })

  # Check the zones before creating anything.
  depends_on = [data.aws_availability_zones.listed]
}

# Lock down the VPC's default security group: no rules at all, so nothing that lands in it by
# accident can talk to anything.
resource "aws_default_security_group" "this" {
  count  = local.create_vpc ? 1 : 0
  vpc_id = aws_vpc.this[0].id

  tags = merge(local.tags, { Name = "${var.name}-default-deny" })
}

resource "aws_subnet" "private" {
  count = local.create_vpc ? length(var.availability_zones) : 0

  vpc_id                  = aws_vpc.this[0].id
  availability_zone       = local.azs[count.index]
  cidr_block              = cidrsubnet(var.vpc_cidr, 4, count.index)
  map_public_ip_on_launch = false

  tags = merge(local.tags, { Name = "${var.name}-private-${local.azs[count.index]}" })
}

resource "aws_route_table" "private" {
  count  = local.create_vpc ? 1 : 0
  vpc_id = aws_vpc.this[0].id

  tags = merge(local.tags, { Name = "${var.name}-private" })
}

resource "aws_route_table_association" "private" {
  count = local.create_vpc ? length(var.availability_zones) : 0

  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[0].id
}

# Model sync traffic to S3 stays on the AWS network and needs no NAT.
resource "aws_vpc_endpoint" "s3" {
  count = local.create_vpc ? 1 : 0

  vpc_id            = aws_vpc.this[0].id
  service_name      = "com.amazonaws.${data.aws_region.current.name}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = [aws_route_table.private[0].id]

  tags = merge(local.tags, { Name = "${var.name}-s3" })
}

# --- Optional NAT: one public subnet holding only the NAT gateway -----------------------------

resource "aws_subnet" "public" {
  count = local.create_nat ? 1 : 0

  vpc_id                  = aws_vpc.this[0].id
  availability_zone       = local.azs[0]
  cidr_block              = cidrsubnet(var.vpc_cidr, 4, 15)
  map_public_ip_on_launch = false

  tags = merge(local.tags, { Name = "${var.name}-nat" })
}

resource "aws_internet_gateway" "this" {
  count  = local.create_nat ? 1 : 0
  vpc_id = aws_vpc.this[0].id

  tags = merge(local.tags, { Name = var.name })
}

resource "aws_eip" "nat" {
  count  = local.create_nat ? 1 : 0
  domain = "vpc"

  tags = merge(local.tags, { Name = "${var.name}-nat" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_nat_gateway" "this" {
  count = local.create_nat ? 1 : 0

  allocation_id = aws_eip.nat[0].id
  subnet_id     = aws_subnet.public[0].id

  tags = merge(local.tags, { Name = var.name })
}

resource "aws_route_table" "public" {
  count  = local.create_nat ? 1 : 0
  vpc_id = aws_vpc.this[0].id

  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this[0].id
  }

  tags = merge(local.tags, { Name = "${var.name}-public" })
}

resource "aws_route_table_association" "public" {
  count = local.create_nat ? 1 : 0

  subnet_id      = aws_subnet.public[0].id
  route_table_id = aws_route_table.public[0].id
}

resource "aws_route" "private_nat" {
  count = local.create_nat ? 1 : 0

  route_table_id         = aws_route_table.private[0].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.this[0].id
}

# --- Flow logs of the created VPC, to a KMS-encrypted log group -------------------------------

resource "aws_kms_key" "logs" {
  count = local.create_vpc ? 1 : 0

  description             = "igniter ${var.name}: encrypts the VPC flow log group"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.logs_key[0].json

  tags = local.tags
}

data "aws_iam_policy_document" "logs_key" {
  count = local.create_vpc ? 1 : 0

  # Standard key-policy root statement: lets IAM policies in this account govern the key. In a
  # key policy "*" means "this key", nothing else.
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

  statement {
    sid       = "CloudWatchLogsUsesKeyForThisFleet"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]

    principals {
      type        = "Service"
      identifiers = ["logs.${data.aws_region.current.name}.amazonaws.com"]
    }

    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${data.aws_partition.current.partition}:logs:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:log-group:/igniter/${var.name}/*"]
    }
  }
}

resource "aws_cloudwatch_log_group" "flow" {
  count = local.create_vpc ? 1 : 0

  name              = "/igniter/${var.name}/vpc-flow-logs"
  retention_in_days = var.flow_log_retention_days
  kms_key_id        = aws_kms_key.logs[0].arn

  tags = local.tags
}

resource "aws_flow_log" "this" {
  count = local.create_vpc ? 1 : 0

  vpc_id          = aws_vpc.this[0].id
  traffic_type    = "ALL"
  log_destination = aws_cloudwatch_log_group.flow[0].arn
  iam_role_arn    = aws_iam_role.flow[0].arn

  tags = local.tags
}

data "aws_iam_policy_document" "flow_assume" {
  count = local.create_vpc ? 1 : 0

  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["vpc-flow-logs.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

resource "aws_iam_role" "flow" {
  count = local.create_vpc ? 1 : 0

  name_prefix          = "${var.name}-flow-"
  assume_role_policy   = data.aws_iam_policy_document.flow_assume[0].json
  permissions_boundary = var.permissions_boundary_arn

  tags = local.tags
}

data "aws_iam_policy_document" "flow" {
  count = local.create_vpc ? 1 : 0

  statement {
    sid       = "WriteFlowLogsToItsGroup"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
    resources = ["${aws_cloudwatch_log_group.flow[0].arn}:*"]
  }
}

resource "aws_iam_role_policy" "flow" {
  count = local.create_vpc ? 1 : 0

  name   = "write-flow-logs"
  role   = aws_iam_role.flow[0].id
  policy = data.aws_iam_policy_document.flow[0].json
}
