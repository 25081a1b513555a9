output "load_balancer_dns_name" {
  description = "Where clients send requests: http://<this>:<listener_port>/v2/models/<workload>/infer."
  value       = aws_lb.gateway.dns_name
}

output "load_balancer_arn" {
  description = "ARN of the gateway's Network Load Balancer."
  value       = aws_lb.gateway.arn
}

output "security_group_id" {
  description = "The gateway hosts' security group (the node security group admits it on the server ports)."
  value       = aws_security_group.host.id
}

output "autoscaling_group_name" {
  description = "The Auto Scaling group of gateway hosts."
  value       = aws_autoscaling_group.hosts.name
}

output "gateway_tag" {
  description = "The tag the autoscaler finds gateway hosts by (gateway.discover)."
  value       = { key = local.gateway_tag_key, value = var.name }
}

output "policy_snippet" {
  description = "The policy's gateway section for these hosts (merge it into the policy next to the fleet module's snippet)."
  value = {
    gateway = {
      kind       = "haproxy"
      listen     = "0.0.0.0:${var.gateway_port}"
      discover   = true
      remote_dir = var.gateway_dir
    }
  }
}
