# ---------------------------------------------------------------------------------------------
# Identity
# ---------------------------------------------------------------------------------------------

variable "name" {
  description = "Fleet name (the policy's `fleet:`). Gateway hosts carry igniter:gateway=<name>, never igniter:fleet (the autoscaler terminates what carries that tag); it also prefixes resource names."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._-]*$", var.name)) && length(var.name) <= 24
    error_message = "name must match ^[A-Za-z0-9][A-Za-z0-9._-]*$ and be at most 24 characters (it prefixes the load balancer's name, which AWS limits to 32)."
  }
}

variable "tags" {
  description = "Tags added to every resource this module creates (on top of the provider's default_tags)."
  type        = map(string)
  default     = {}

  validation {
    condition     = !contains([for k in keys(var.tags) : lower(k)], "igniter:fleet")
    error_message = "tags must not set igniter:fleet: gateway hosts are not fleet instances, and the autoscaler would terminate them."
  }
}

# ---------------------------------------------------------------------------------------------
# Network
# ---------------------------------------------------------------------------------------------

variable "vpc_id" {
  description = "The fleet's VPC (the fleet module's vpc_id output)."
  type        = string

  validation {
    condition     = can(regex("^vpc-[0-9a-f]{8,17}$", var.vpc_id))
    error_message = "vpc_id must be a VPC ID (vpc-...)."
  }
}

variable "subnet_ids" {
  description = "Private subnets for the gateway hosts (the fleet module's subnet_ids); the Auto Scaling group spreads hosts over them."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "subnet_ids must be a non-empty list of subnet IDs."
  }
}

variable "load_balancer_subnet_ids" {
  description = "Subnets for the Network Load Balancer; default subnet_ids (an internal load balancer). Give public subnets with internal = false to serve clients on the internet."
  type        = list(string)
  default     = []
}

variable "internal" {
  description = "Whether the Network Load Balancer is internal (reachable from the VPC and peered networks only)."
  type        = bool
  default     = true
}

variable "client_cidr_blocks" {
  description = "Who may send inference requests to the load balancer. No /0 block: name the networks of your clients."
  type        = list(string)

  validation {
    condition     = length(var.client_cidr_blocks) > 0 && alltrue([for c in var.client_cidr_blocks : can(cidrhost(c, 0)) && !endswith(c, "/0")])
    error_message = "client_cidr_blocks must be a non-empty list of CIDR blocks, none of them /0."
  }
}

variable "listener_port" {
  description = "The load balancer's port for the KServe v2 REST API."
  type        = number
  default     = 80

  validation {
    condition     = var.listener_port >= 1 && var.listener_port <= 65535
    error_message = "listener_port must be a TCP port."
  }
}

variable "certificate_arn" {
  description = "An ACM certificate: the listener then speaks TLS (on listener_port) and the hosts receive plain HTTP inside the VPC. null: a TCP listener."
  type        = string
  default     = null
}

variable "gateway_port" {
  description = "The port HAProxy listens on, on each gateway host (the policy's gateway.listen is 0.0.0.0:<this>)."
  type        = number
  default     = 8000

  validation {
    condition     = var.gateway_port >= 1024 && var.gateway_port <= 65535
    error_message = "gateway_port must be an unprivileged TCP port (1024-65535)."
  }
}

variable "autoscaler_security_group_ids" {
  description = "Security groups of the autoscaler (the autoscaler module's security_group_ids): the only sources admitted to the hosts' SSH port, over which the autoscaler drives HAProxy's runtime API."
  type        = list(string)

  validation {
    condition     = alltrue([for s in var.autoscaler_security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", s))])
    error_message = "autoscaler_security_group_ids must be security group IDs."
  }
}

variable "node_security_group_id" {
  description = "The fleet's node security group (the fleet module's node_security_group_id): it is made to admit the gateway hosts on the inference server ports."
  type        = string

  validation {
    condition     = can(regex("^sg-[0-9a-f]{8,17}$", var.node_security_group_id))
    error_message = "node_security_group_id must be a security group ID."
  }
}

variable "server_port_range" {
  description = "The nodes' inference server ports (the fleet module's server_port_range): the only ports the hosts may open to the nodes."
  type        = object({ from = number, to = number })
  default     = { from = 8100, to = 8199 }

  validation {
    condition     = var.server_port_range.from >= 1024 && var.server_port_range.from <= var.server_port_range.to && var.server_port_range.to <= 65535
    error_message = "server_port_range must be a range of unprivileged ports, from <= to."
  }
}

variable "ssh_port" {
  description = "The hosts' SSH port (the policy's agents.port: the autoscaler uses the same transport for nodes and gateways)."
  type        = number
  default     = 22
}

variable "egress_cidr_blocks" {
  description = "Where the hosts may reach HTTPS and HTTP (package mirrors at boot). Narrow it to VPC endpoints or a proxy where you have them."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

# ---------------------------------------------------------------------------------------------
# Hosts
# ---------------------------------------------------------------------------------------------

variable "instance_type" {
  description = "Gateway host instance type. HAProxy needs little: a compute-optimised instance with enough network bandwidth for the fleet's requests."
  type        = string
  default     = "c7i.large"
}

variable "min_size" {
  description = "Fewest gateway hosts; two or more, in two zones, so one host's loss or replacement drops no request."
  type        = number
  default     = 2

  validation {
    condition     = var.min_size >= 1
    error_message = "min_size must be at least 1."
  }
}

variable "max_size" {
  description = "Most gateway hosts the Auto Scaling group may run (an instance refresh briefly runs one more)."
  type        = number
  default     = 4
}

variable "desired_capacity" {
  description = "Gateway hosts to run; null: min_size."
  type        = number
  default     = null
}

variable "ami_ssm_parameter" {
  description = "SSM parameter holding the hosts' AMI (Ubuntu 24.04 LTS: haproxy 2.8 and socat from its archive)."
  type        = string
  default     = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
}

variable "ami_id" {
  description = "An AMI ID to use instead of ami_ssm_parameter (Debian 12 or Ubuntu 22.04+ with cloud-init)."
  type        = string
  default     = null
}

variable "root_volume_size_gb" {
  description = "Root volume size of each host (encrypted gp3)."
  type        = number
  default     = 16
}

variable "ebs_kms_key_arn" {
  description = "KMS key for the hosts' root volumes; null: the account's default EBS key."
  type        = string
  default     = null
}

variable "autoscaler_ssh_public_key" {
  description = "The autoscaler's SSH public key (the same as the fleet module's): authorised for gateway_user alone."
  type        = string

  validation {
    condition     = can(regex("^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/=]+", trimspace(var.autoscaler_ssh_public_key)))
    error_message = "autoscaler_ssh_public_key must be an OpenSSH public key line."
  }
}

variable "gateway_user" {
  description = "The unprivileged user HAProxy runs as and the autoscaler logs in as (the policy's agents.user)."
  type        = string
  default     = "igniter"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,30}$", var.gateway_user)) && var.gateway_user != "root"
    error_message = "gateway_user must be a valid, non-root Linux user name."
  }
}

variable "gateway_dir" {
  description = "Where the configuration and the runtime sockets live on each host (the policy's gateway.remote_dir)."
  type        = string
  default     = "/var/lib/igniter-gateway"
}

variable "enable_ssm_session_manager" {
  description = "Attach AmazonSSMManagedInstanceCore so operators can open a shell without an SSH port."
  type        = bool
  default     = false
}

variable "permissions_boundary_arn" {
  description = "Permissions boundary for the hosts' role, where the account requires one."
  type        = string
  default     = null
}

variable "deletion_protection" {
  description = "Protect the load balancer against deletion (turn it off before destroying the module)."
  type        = bool
  default     = true
}

variable "access_logs_bucket" {
  description = "S3 bucket for the load balancer's access logs (TLS listeners log connections); null: no access logs."
  type        = string
  default     = null
}
