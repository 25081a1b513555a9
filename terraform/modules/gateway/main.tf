# Gateway hosts for one fleet: an Auto Scaling group of hosts running HAProxy behind a Network
# Load Balancer. The hosts come up with a bootstrap configuration that answers 503 on
# /v2/health/ready, so the load balancer sends them nothing until the autoscaler has configured
# them: it discovers them by their igniter:gateway=<name> tag, pins their SSH host keys from
# their consoles (as it does for nodes), and drives HAProxy's runtime API over SSH. No admin port
# is open on the network: the runtime API is a unix socket on each host.

data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  gateway_tag_key = "igniter:gateway"

  # Deliberately not igniter:fleet: every instance carrying that tag is the autoscaler's to
  # terminate, and these hosts are the Auto Scaling group's.
  tags = merge(var.tags, { (local.gateway_tag_key) = var.name })

  lb_subnet_ids = length(var.load_balancer_subnet_ids) > 0 ? var.load_balancer_subnet_ids : var.subnet_ids
  desired       = coalesce(var.desired_capacity, var.min_size)
  tls           = var.certificate_arn != null
}
