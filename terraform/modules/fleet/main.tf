# igniter fleet: the static parts of a GPU inference fleet. The autoscaler owns the instance count;
# this module owns what every instance is launched from (network, security group, IAM, one launch
# template per GPU instance type, and the cloud-init that turns a DLAMI into an igniter node).

data "aws_partition" "current" {}
data "aws_region" "current" {}
data "aws_caller_identity" "current" {}

locals {
  # The ownership tag the autoscaler filters on (autoscaler/fleet/ec2.py); never overridable.
  fleet_tag_key = "igniter:fleet"

  tags = merge(var.tags, { (local.fleet_tag_key) = var.name })

  state_dir = "/var/lib/igniter"
}
