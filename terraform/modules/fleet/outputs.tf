output "fleet_name" {
  description = "The fleet name: the policy's `fleet:` and the igniter:fleet tag value."
  value       = var.name
}

output "fleet_tag_key" {
  description = "Tag key that marks the instances the autoscaler owns."
  value       = local.fleet_tag_key
}

output "region" {
  description = "Region of the fleet: the policy's provider.region."
  value       = data.aws_region.current.name
}

output "vpc_id" {
  description = "VPC the nodes run in (created or given)."
  value       = local.vpc_id
}

output "subnet_ids" {
  description = "Subnets the autoscaler may launch nodes into: the policy's provider.subnets."
  value       = local.subnet_ids
}

output "launch_template_names" {
  description = "Launch template name per instance type: the policy's provider.launch_templates."
  value       = { for type, lt in aws_launch_template.node : type => lt.name }
}

output "launch_template_ids" {
  description = "Launch template ID per instance type."
  value       = { for type, lt in aws_launch_template.node : type => lt.id }
}

output "instance_types" {
  description = "The instance types the fleet has launch templates for: pass them to the autoscaler module."
  value       = keys(aws_launch_template.node)
}

output "launch_template_arns" {
  description = "Launch template ARNs: pass them to the autoscaler module, whose role may launch only from these."
  value       = [for lt in aws_launch_template.node : lt.arn]
}

output "node_security_group_id" {
  description = "Security group of the nodes."
  value       = aws_security_group.node.id
}

output "node_role_arn" {
  description = "IAM role of the nodes: the only role the autoscaler may pass (iam:PassRole)."
  value       = aws_iam_role.node.arn
}

output "node_instance_profile_arn" {
  description = "Instance profile the launch templates attach."
  value       = aws_iam_instance_profile.node.arn
}

output "agent_user" {
  description = "User the autoscaler's key is authorised for, running igniter-agent: the policy's agents.user."
  value       = var.agent_user
}

output "ssh_port" {
  description = "SSH port of the nodes: the policy's agents.port."
  value       = var.ssh_port
}

output "server_base_port" {
  description = "First inference server port: the policy's agents.server_base_port."
  value       = var.server_port_range.from
}

output "state_dir" {
  description = "igniter-agent's state directory on the nodes: the policy's agents.state_dir."
  value       = local.state_dir
}

output "model_dir" {
  description = "Directory on the nodes the models are synced into (workloads[].model_dir lives below it)."
  value       = var.model_dir
}

output "interruption_queue_url" {
  description = "URL of the interruption queue: the policy's scaling.spot.interruption_queue (null without the queue)."
  value       = one(aws_sqs_queue.interruptions[*].url)
}

output "interruption_queue_arn" {
  description = "ARN of the interruption queue: pass it to the autoscaler module, whose role may receive and delete its messages only."
  value       = one(aws_sqs_queue.interruptions[*].arn)
}

output "interruption_queue_kms_key_arn" {
  description = "KMS key of the interruption queue: pass it to the autoscaler module (kms:Decrypt through SQS only)."
  value       = one(aws_kms_key.interruptions[*].arn)
}
