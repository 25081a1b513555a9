# The leader lease (policy `leader: {kind: dynamodb, table: <leader_table_name>}`): one item per
# fleet, keyed by the fleet's name, written only with conditional writes (autoscaler/leader/
# dynamodb.py). Every `igniter run` for the fleet, on this host or another, reads it; the one that
# holds it leads and the others stand by. The role may touch its own fleet's item only (iam.tf).

locals {
  leader_table_name = coalesce(var.leader_table_name, "${var.name}-leader")
  leader_table_arn  = var.create_leader_table ? aws_dynamodb_table.leader[0].arn : var.leader_table_arn
}

resource "aws_dynamodb_table" "leader" {
  #checkov:skip=CKV_AWS_119:The lease item holds the fleet's name, the holder's host:pid and a counter, nothing secret; it is encrypted at rest with the AWS owned key, and a customer managed key would add six KMS permissions to the autoscaler's role for no data that needs them.
  count = var.create_leader_table ? 1 : 0

  name         = local.leader_table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "fleet"

  attribute {
    name = "fleet"
    type = "S"
  }

  server_side_encryption {
    enabled = true
  }

  point_in_time_recovery {
    enabled = true
  }

  tags = local.tags
}
