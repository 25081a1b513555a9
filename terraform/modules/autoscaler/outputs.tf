output "role_arn" {
  description = "ARN of the autoscaler's IAM role."
  value       = aws_iam_role.autoscaler.arn
}

output "role_name" {
  description = "Name of the autoscaler's IAM role."
  value       = aws_iam_role.autoscaler.name
}

output "policy_arn" {
  description = "ARN of the autoscaler's least-privilege managed policy (attach it elsewhere if the autoscaler runs outside the host)."
  value       = aws_iam_policy.autoscaler.arn
}

output "policy_json" {
  description = "The autoscaler's IAM policy document, for review."
  value       = data.aws_iam_policy_document.autoscaler.json
}

output "security_group_ids" {
  description = "Security group of the host (empty when create_host is false). Pass it to the fleet module's autoscaler_security_group_ids."
  value       = aws_security_group.host[*].id
}

output "host_instance_id" {
  description = "Instance ID of the autoscaler host (null when create_host is false). Open a shell with `aws ssm start-session --target ID`."
  value       = one(aws_instance.host[*].id)
}

output "ssh_key_secret_arn" {
  description = "Secrets Manager secret holding the autoscaler's SSH private key. Put the key with `aws secretsmanager put-secret-value --secret-id ARN --secret-string file://KEY`."
  value       = local.ssh_key_secret_arn
}

output "ssh_key_file" {
  description = "Where the host writes the SSH key: the policy's agents.key_file."
  value       = local.ssh_key_file
}

output "known_hosts_file" {
  description = "known_hosts file on the host, the policy's agents.known_hosts: the autoscaler pins each node's host keys there, read from the node's console."
  value       = local.known_hosts_file
}

output "policy_file" {
  description = "Policy path igniter.service runs with."
  value       = local.policy_file
}

output "leader_table_name" {
  description = "The leader lease table: the policy's leader.table, with leader.kind dynamodb (null when the module neither created nor was given one)."
  value       = var.create_leader_table ? local.leader_table_name : (var.leader_table_arn == null ? null : element(split("/", var.leader_table_arn), 1))
}

output "leader_table_arn" {
  description = "ARN of the leader lease table (null without one)."
  value       = local.leader_table_arn
}

output "status_listen" {
  description = "The policy's scaling.status_listen on the host: 0.0.0.0:PORT when status_cidr_blocks lets Prometheus in (the security group is the filter), else 127.0.0.1:PORT."
  value       = length(var.status_cidr_blocks) > 0 ? "0.0.0.0:${var.status_port}" : "127.0.0.1:${var.status_port}"
}
