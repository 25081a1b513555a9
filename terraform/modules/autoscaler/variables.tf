# ---------------------------------------------------------------------------------------------
# The fleet this autoscaler manages (wire these from the fleet module's outputs)
# ---------------------------------------------------------------------------------------------

variable "name" {
  description = "Fleet name (the fleet module's fleet_name). The role may only launch, tag and terminate instances whose igniter:fleet tag equals it."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._-]*$", var.name)) && length(var.name) <= 24
    error_message = "name must match ^[A-Za-z0-9][A-Za-z0-9._-]*$ and be at most 24 characters (it prefixes IAM role names, whose prefixes AWS limits to 38 characters)."
  }
}

variable "launch_template_arns" {
  description = "ARNs of the fleet's launch templates (fleet module output launch_template_arns). The role may launch from these only."
  type        = list(string)

  validation {
    condition     = length(var.launch_template_arns) > 0 && alltrue([for a in var.launch_template_arns : can(regex("^arn:aws[a-z-]*:ec2:[a-z0-9-]+:[0-9]{12}:launch-template/lt-[0-9a-f]+$", a))])
    error_message = "launch_template_arns must be a non-empty list of EC2 launch template ARNs."
  }
}

variable "instance_types" {
  description = "The fleet's instance types (fleet module output instance_types): the only types the role may launch."
  type        = list(string)

  validation {
    condition     = length(var.instance_types) > 0
    error_message = "instance_types must name at least one instance type."
  }
}

variable "node_role_arn" {
  description = "ARN of the fleet's node role (fleet module output node_role_arn): the only role the autoscaler may pass to instances."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", var.node_role_arn))
    error_message = "node_role_arn must be an IAM role ARN."
  }
}

variable "subnet_ids" {
  description = "Subnets the fleet launches into (fleet module output subnet_ids). The role may launch into these only."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "subnet_ids must be a non-empty list of subnet IDs."
  }
}

variable "node_security_group_ids" {
  description = "Security groups of the nodes (fleet module output node_security_group_id). The role may attach only these; the host may reach them."
  type        = list(string)

  validation {
    condition     = length(var.node_security_group_ids) > 0 && alltrue([for s in var.node_security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", s))])
    error_message = "node_security_group_ids must be a non-empty list of security group IDs."
  }
}

variable "gateway_security_group_ids" {
  description = "Security groups of the fleet's gateway hosts (the gateway module's security_group_id): the host may reach their SSH port, over which it drives HAProxy's runtime API."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.gateway_security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", s))])
    error_message = "gateway_security_group_ids must be security group IDs."
  }
}

variable "node_ssh_port" {
  description = "SSH port of the nodes (the policy's agents.port); the host's egress allows it to the node security groups."
  type        = number
  default     = 22

  validation {
    condition     = var.node_ssh_port >= 1 && var.node_ssh_port <= 65535
    error_message = "node_ssh_port must be a TCP port."
  }
}

variable "server_port_range" {
  description = "Inclusive port range of the inference servers on the nodes; the host's egress allows it to the node security groups."
  type = object({
    from = number
    to   = number
  })
  default = { from = 8100, to = 8199 }

  validation {
    condition     = var.server_port_range.from >= 1024 && var.server_port_range.from <= var.server_port_range.to && var.server_port_range.to <= 65535
    error_message = "server_port_range must satisfy 1024 <= from <= to <= 65535."
  }
}

variable "ebs_kms_key_arn" {
  description = "The customer managed KMS key the fleet's node volumes are encrypted with, if any (the fleet module's ebs_kms_key_arn). Launching encrypted volumes needs grants on it; null when nodes use aws/ebs."
  type        = string
  default     = null

  validation {
    condition     = var.ebs_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.ebs_kms_key_arn))
    error_message = "ebs_kms_key_arn must be a KMS key ARN."
  }
}

variable "warm_pool" {
  description = "The policy keeps a warm pool (scaling.warm_pool): the role may also stop and start the fleet's pool instances, and re-tag a pool member for the slot that claims it."
  type        = bool
  default     = false
}

variable "interruption_queue_arn" {
  description = "ARN of the fleet's interruption queue (fleet module output interruption_queue_arn). The role may receive and delete its messages only; null: no queue."
  type        = string
  default     = null

  validation {
    condition     = var.interruption_queue_arn == null || can(regex("^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]+$", var.interruption_queue_arn))
    error_message = "interruption_queue_arn must be an SQS queue ARN."
  }
}

variable "interruption_queue_kms_key_arn" {
  description = "KMS key the interruption queue is encrypted with (fleet module output interruption_queue_kms_key_arn): kms:Decrypt through SQS only. Null for a queue without a customer managed key."
  type        = string
  default     = null

  validation {
    condition     = var.interruption_queue_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.interruption_queue_kms_key_arn))
    error_message = "interruption_queue_kms_key_arn must be a KMS key ARN."
  }
}

variable "tags" {
  description = "Tags added to every resource this module creates. Must not contain igniter:fleet: the host would then count as a fleet node the autoscaler may terminate."
  type        = map(string)
  default     = {}

  validation {
    condition     = !contains([for k in keys(var.tags) : lower(k)], "igniter:fleet")
    error_message = "tags must not set igniter:fleet (the autoscaler owns, and terminates, every instance with that tag)."
  }
}

# ---------------------------------------------------------------------------------------------
# IAM
# ---------------------------------------------------------------------------------------------

variable "trusted_role_arns" {
  description = "IAM roles (besides EC2, for the optional host) allowed to assume the autoscaler role, e.g. a CI role or a role your Kubernetes service account maps to when the autoscaler runs outside this module's host."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for a in var.trusted_role_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", a))])
    error_message = "trusted_role_arns must be IAM role ARNs."
  }
}

variable "permissions_boundary_arn" {
  description = "Optional IAM permissions boundary for the autoscaler role."
  type        = string
  default     = null

  validation {
    condition     = var.permissions_boundary_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:policy/.+$", var.permissions_boundary_arn))
    error_message = "permissions_boundary_arn must be an IAM policy ARN."
  }
}

# ---------------------------------------------------------------------------------------------
# The autoscaler's SSH key (its private half lives in Secrets Manager, never in Terraform state)
# ---------------------------------------------------------------------------------------------

variable "create_ssh_key_secret" {
  description = "Create an empty, KMS-encrypted Secrets Manager secret for the autoscaler's SSH private key, to fill with `aws secretsmanager put-secret-value` (the key never passes through Terraform). false: use ssh_key_secret_arn."
  type        = bool
  default     = true
}

variable "ssh_key_secret_arn" {
  description = "ARN of an existing Secrets Manager secret holding the autoscaler's SSH private key (OpenSSH/PEM text). Required when create_ssh_key_secret is false; ignored otherwise."
  type        = string
  default     = null

  validation {
    condition     = var.ssh_key_secret_arn == null || can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+$", var.ssh_key_secret_arn))
    error_message = "ssh_key_secret_arn must be a Secrets Manager secret ARN."
  }
}

variable "ssh_key_secret_kms_key_arn" {
  description = "Customer managed KMS key of the existing secret in ssh_key_secret_arn, if it has one (the role then gets kms:Decrypt through Secrets Manager only). Ignored when create_ssh_key_secret is true (the created secret gets its own key)."
  type        = string
  default     = null

  validation {
    condition     = var.ssh_key_secret_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.ssh_key_secret_kms_key_arn))
    error_message = "ssh_key_secret_kms_key_arn must be a KMS key ARN."
  }
}

# ---------------------------------------------------------------------------------------------
# Optional host: one small EC2 instance running `igniter run /etc/igniter/policy.yaml`
# ---------------------------------------------------------------------------------------------

variable "create_host" {
  description = "Create an EC2 instance that runs the autoscaler as a systemd service (igniter.service). Off: run it anywhere that can assume the role and reach the nodes."
  type        = bool
  default     = false
}

variable "vpc_id" {
  description = "VPC of the fleet (fleet module output vpc_id); the host and its security group are created in it. Required when create_host is true."
  type        = string
  default     = null

  validation {
    condition     = var.vpc_id == null || can(regex("^vpc-[0-9a-f]{8,17}$", var.vpc_id))
    error_message = "vpc_id must look like vpc-0123456789abcdef0."
  }
}

variable "host_subnet_id" {
  description = "Subnet for the host, normally one of the fleet's private subnets. Required when create_host is true."
  type        = string
  default     = null

  validation {
    condition     = var.host_subnet_id == null || can(regex("^subnet-[0-9a-f]{8,17}$", var.host_subnet_id))
    error_message = "host_subnet_id must look like subnet-0123456789abcdef0."
  }
}

variable "host_instance_type" {
  description = "Instance type of the host. The planner is CPU-only; 2 vCPUs and 4 GiB suit fleets of up to a few hundred workloads."
  type        = string
  default     = "t3.medium"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.host_instance_type))
    error_message = "host_instance_type must be an EC2 instance type such as t3.medium."
  }
}

variable "host_ami_ssm_parameter" {
  description = "SSM public parameter holding the host AMI ID (needs Python 3.11+; the default is Canonical's Ubuntu 24.04 LTS)."
  type        = string
  default     = "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_./-]+$", var.host_ami_ssm_parameter))
    error_message = "host_ami_ssm_parameter must be an SSM parameter path starting with /."
  }
}

variable "host_ami_id" {
  description = "AMI ID for the host, overriding host_ami_ssm_parameter."
  type        = string
  default     = null

  validation {
    condition     = var.host_ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.host_ami_id))
    error_message = "host_ami_id must look like ami-0123456789abcdef0."
  }
}

variable "host_root_volume_size_gb" {
  description = "Size of the host's encrypted gp3 root volume in GiB."
  type        = number
  default     = 30

  validation {
    condition     = var.host_root_volume_size_gb >= 16 && var.host_root_volume_size_gb <= 1024
    error_message = "host_root_volume_size_gb must be between 16 and 1024."
  }
}

variable "igniter_package" {
  description = "pip requirement that installs this project (the igniter CLI) on the host: a version from your index, a git+https URL or an HTTPS wheel URL. Required when create_host is true."
  type        = string
  default     = null

  validation {
    condition     = var.igniter_package == null || (can(regex("^[A-Za-z0-9][A-Za-z0-9_.+:/@=<>!~,%#\\[\\]-]*$", var.igniter_package)) && length(coalesce(var.igniter_package, "x")) <= 512)
    error_message = "igniter_package must be a single pip requirement or URL without spaces, quotes or shell characters."
  }
}

variable "policy_yaml" {
  description = "Optional policy YAML written to /etc/igniter/policy.yaml on the host at first boot (policies carry no secrets). Null: write the policy yourself and restart igniter.service; until then the service stays inactive."
  type        = string
  default     = null
}

variable "enable_ssm_session_manager" {
  description = "Attach AmazonSSMManagedInstanceCore to the host so operators reach it with Session Manager (the host has no inbound SSH)."
  type        = bool
  default     = true
}

variable "status_port" {
  description = "Port of the autoscaler's status endpoint on the host: the PORT of the policy's scaling.status_listen (see the status_listen output)."
  type        = number
  default     = 9464

  validation {
    condition     = var.status_port >= 1024 && var.status_port <= 65535
    error_message = "status_port must be between 1024 and 65535."
  }
}

variable "status_cidr_blocks" {
  description = "CIDR blocks (e.g. your Prometheus) allowed to reach the host's status port, where the policy's scaling.status_listen must then bind 0.0.0.0 or the host's private address (the status_listen output). /healthz and /metrics answer anyone the rule lets in; /v1/* needs the bearer token of scaling.status_token_file when one is set. Empty: no inbound traffic at all, and the endpoint stays on 127.0.0.1. /0 blocks are refused."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.status_cidr_blocks : can(cidrhost(c, 0)) && !endswith(c, "/0")])
    error_message = "status_cidr_blocks must be valid CIDR blocks, none of them /0."
  }
}

variable "egress_cidr_blocks" {
  description = "Where the host may open HTTPS (AWS APIs, package index) and HTTP (OS mirrors) connections."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = length(var.egress_cidr_blocks) > 0 && alltrue([for c in var.egress_cidr_blocks : can(cidrhost(c, 0))])
    error_message = "egress_cidr_blocks must be a non-empty list of valid CIDR blocks."
  }
}

# ---------------------------------------------------------------------------------------------
# The leader lease (policy `leader: {kind: dynamodb, table: ...}`)
# ---------------------------------------------------------------------------------------------

variable "create_leader_table" {
  description = "Create the DynamoDB table of the leader lease (one item per fleet; on-demand billing, so an idle lease costs nothing measurable) and let the role use this fleet's item. false: use leader_table_arn, or no lease permissions at all when that is null (policy leader.kind local)."
  type        = bool
  default     = true
}

variable "leader_table_name" {
  description = "Name of the lease table to create (the policy's leader.table). Null: <name>-leader."
  type        = string
  default     = null

  validation {
    condition     = var.leader_table_name == null || can(regex("^[A-Za-z0-9_.-]{3,255}$", var.leader_table_name))
    error_message = "leader_table_name must be 3-255 characters of A-Z, a-z, 0-9, '_', '.' and '-'."
  }
}

variable "leader_table_arn" {
  description = "ARN of an existing lease table (partition key `fleet`, a string), e.g. one shared by several fleets; used when create_leader_table is false. The role may still use only this fleet's item."
  type        = string
  default     = null

  validation {
    condition     = var.leader_table_arn == null || can(regex("^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$", var.leader_table_arn))
    error_message = "leader_table_arn must be a DynamoDB table ARN."
  }
}
