output "launch_template_names" {
  description = "Launch template name per GPU instance type (the policy's provider.launch_templates)."
  value       = module.fleet.launch_template_names
}

output "policy_snippet" {
  description = "The policy keys Terraform knows (fleet, provider, agents, leader, scaling.status_listen), as an object."
  value       = local.policy_snippet
}

output "policy_snippet_yaml" {
  description = "The same keys as YAML: merge them into your policy (terraform output -raw policy_snippet_yaml)."
  value       = yamlencode(local.policy_snippet)
}

output "ssh_key_secret_arn" {
  description = "Put the autoscaler's SSH private key here: aws secretsmanager put-secret-value --secret-id ARN --secret-string file://KEY."
  value       = module.autoscaler.ssh_key_secret_arn
}

output "autoscaler_role_arn" {
  description = "The autoscaler's least-privilege IAM role."
  value       = module.autoscaler.role_arn
}

output "autoscaler_host_id" {
  description = "Instance ID of the autoscaler host (aws ssm start-session --target ID); null without a host."
  value       = module.autoscaler.host_instance_id
}

output "node_role_arn" {
  description = "IAM role of the GPU nodes."
  value       = module.fleet.node_role_arn
}

output "gateway_url" {
  description = "The fleet's KServe v2 endpoint: <this>/v2/models/<workload>/infer."
  value       = "http://${module.gateway.load_balancer_dns_name}"
}
