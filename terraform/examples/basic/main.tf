# A complete fleet: a new VPC, the node launch templates (one per default GPU instance type), the
# autoscaler's role, secret and host, and the gateway (HAProxy hosts behind a Network Load Balancer). After `terraform apply`, merge the policy_snippet output
# into a policy and start the service (docs/deploy.md).

module "fleet" {
  source = "../../modules/fleet"

  name                      = var.fleet_name
  availability_zones        = var.availability_zones
  model_bucket              = var.model_bucket
  model_prefix              = var.model_prefix
  igniter_package           = var.igniter_package
  autoscaler_ssh_public_key = var.autoscaler_ssh_public_key
  allowed_cidr_blocks       = var.allowed_cidr_blocks

  # Only the autoscaler host may reach the nodes (plus allowed_cidr_blocks).
  autoscaler_security_group_ids = module.autoscaler.security_group_ids
}

module "autoscaler" {
  source = "../../modules/autoscaler"

  name                    = module.fleet.fleet_name
  launch_template_arns    = module.fleet.launch_template_arns
  instance_types          = module.fleet.instance_types
  node_role_arn           = module.fleet.node_role_arn
  subnet_ids              = module.fleet.subnet_ids
  node_security_group_ids = [module.fleet.node_security_group_id]
  node_ssh_port           = module.fleet.ssh_port

  # Spot interruption and maintenance notices: receive and delete on this queue only.
  interruption_queue_arn         = module.fleet.interruption_queue_arn
  warm_pool                      = true # the policy's scaling.warm_pool: stop/start the fleet's pool instances
  interruption_queue_kms_key_arn = module.fleet.interruption_queue_kms_key_arn

  create_host     = var.create_autoscaler_host
  vpc_id          = module.fleet.vpc_id
  host_subnet_id  = module.fleet.subnet_ids[0]
  igniter_package = var.igniter_package

  # The host drives the gateway hosts' HAProxy over SSH.
  gateway_security_group_ids = [module.gateway.security_group_id]
}

module "gateway" {
  source = "../../modules/gateway"

  name                          = module.fleet.fleet_name
  vpc_id                        = module.fleet.vpc_id
  subnet_ids                    = module.fleet.subnet_ids
  client_cidr_blocks            = var.gateway_client_cidr_blocks
  autoscaler_security_group_ids = module.autoscaler.security_group_ids
  node_security_group_id        = module.fleet.node_security_group_id
  autoscaler_ssh_public_key     = var.autoscaler_ssh_public_key
  gateway_user                  = module.fleet.agent_user
  ssh_port                      = module.fleet.ssh_port
}

# The part of the policy Terraform knows. Merge it into a policy that adds instance_types and
# workloads; tests/terraform checks the merged result with the policy loader.
locals {
  policy_snippet = {
    fleet = module.fleet.fleet_name
    provider = {
      kind             = "ec2"
      region           = module.fleet.region
      launch_templates = module.fleet.launch_template_names
      subnets          = module.fleet.subnet_ids
    }
    agents = {
      transport        = "ssh"
      user             = module.fleet.agent_user
      port             = module.fleet.ssh_port
      key_file         = module.autoscaler.ssh_key_file
      known_hosts      = module.autoscaler.known_hosts_file
      state_dir        = module.fleet.state_dir
      server_base_port = module.fleet.server_base_port
    }
    leader = {
      kind  = "dynamodb"
      table = module.autoscaler.leader_table_name
    }
    scaling = {
      status_listen = module.autoscaler.status_listen
      spot          = { interruption_queue = module.fleet.interruption_queue_url }
    }
    gateway = module.gateway.policy_snippet.gateway
  }
}
