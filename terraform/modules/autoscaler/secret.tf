# The autoscaler's SSH private key lives in Secrets Manager. The module creates an empty secret
# (unless given one); the operator puts the key with `aws secretsmanager put-secret-value`, so the
# private key never enters Terraform state. The host fetches it at every service start.

locals {
  create_secret = var.create_ssh_key_secret

  ssh_key_secret_arn  = local.create_secret ? aws_secretsmanager_secret.ssh_key[0].arn : var.ssh_key_secret_arn
  ssh_key_kms_key_arn = local.create_secret ? aws_kms_key.ssh_key[0].arn : var.ssh_key_secret_kms_key_arn
}

resource "aws_kms_key" "ssh_key" {
  count = local.create_secret ? 1 : 0

  description             = "igniter ${var.name}: encrypts the autoscaler's SSH key secret"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.ssh_key_kms[0].json

  tags = local.tags
}

data "aws_iam_policy_document" "ssh_key_kms" {
  count = local.create_secret ? 1 : 0

  # The standard key-policy root statement: IAM policies in this account govern use of the key
  # (the autoscaler role gets kms:Decrypt through Secrets Manager only, in iam.tf).
  #checkov:skip=CKV_AWS_109:This is a KMS key policy, not an identity policy: its resource "*" means this key only, and the account-root statement is what lets IAM policies govern the key.
  #checkov:skip=CKV_AWS_111:This is a KMS key policy, not an identity policy: its resource "*" means this key only, and the account-root statement is what lets IAM policies govern the key.
  #checkov:skip=CKV_AWS_356:This is a KMS key policy, not an identity policy: its resource "*" means this key only (KMS requires "*" in key policies).
  statement {
    sid       = "AccountAdministersKey"
    actions   = ["kms:*"]
    resources = ["*"]

    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account}:root"]
    }
  }
}

resource "aws_secretsmanager_secret" "ssh_key" {
  #checkov:skip=CKV2_AWS_57:An SSH key cannot be rotated by a Secrets Manager rotation Lambda alone: its public half is baked into the fleet's launch templates (authorised_keys). Rotate by generating a new pair, putting the private key here and re-applying the fleet with the new public key (docs/deploy.md, "Rotating the SSH key").
  count = local.create_secret ? 1 : 0

  name_prefix             = "igniter/${var.name}/autoscaler-ssh-key-"
  description             = "igniter ${var.name}: the autoscaler's SSH private key (put it with put-secret-value; its public half is the fleet module's autoscaler_ssh_public_key)"
  kms_key_id              = aws_kms_key.ssh_key[0].arn
  recovery_window_in_days = 7

  tags = local.tags
}
