# ---------------------------------------------------------------------------------------------
# Identity
# ---------------------------------------------------------------------------------------------

variable "name" {
  description = "Fleet name. It is the value of the `igniter:fleet` tag on every node and the `fleet:` key of the policy; the autoscaler only lists and terminates instances carrying it. Also prefixes resource names."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._-]*$", var.name)) && length(var.name) <= 24
    error_message = "name must match ^[A-Za-z0-9][A-Za-z0-9._-]*$ (the policy's fleet name pattern) and be at most 24 characters (it prefixes IAM role names, whose prefixes AWS limits to 38 characters)."
  }
}

variable "tags" {
  description = "Tags added to every resource this module creates (on top of the provider's default_tags)."
  type        = map(string)
  default     = {}

  validation {
    condition     = !contains([for k in keys(var.tags) : lower(k)], "igniter:fleet")
    error_message = "tags must not set igniter:fleet: the module sets it from var.name."
  }
}

# ---------------------------------------------------------------------------------------------
# Network: bring your own VPC and subnets, or let the module create them
# ---------------------------------------------------------------------------------------------

variable "create_vpc" {
  description = "Create a VPC for the fleet (private subnets in availability_zones, an S3 gateway endpoint, flow logs, optionally a NAT gateway). false: use vpc_id and subnet_ids."
  type        = bool
  default     = true
}

variable "vpc_id" {
  description = "ID of an existing VPC for the fleet. Required when create_vpc is false; ignored otherwise."
  type        = string
  default     = null

  validation {
    condition     = var.vpc_id == null || can(regex("^vpc-[0-9a-f]{8,17}$", var.vpc_id))
    error_message = "vpc_id must look like vpc-0123456789abcdef0."
  }
}

variable "subnet_ids" {
  description = "IDs of existing subnets (in vpc_id) the autoscaler may launch nodes into. Required when create_vpc is false; ignored otherwise. Use private subnets: nodes need no public address."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]{8,17}$", s))])
    error_message = "subnet_ids must look like subnet-0123456789abcdef0."
  }
}

variable "vpc_cidr" {
  description = "CIDR block of the VPC the module creates (create_vpc = true). Subnets are /20s (for a /16) carved from it."
  type        = string
  default     = "10.42.0.0/16"

  validation {
    condition     = can(cidrnetmask(var.vpc_cidr)) && can(regex("/(1[6-9]|20)$", var.vpc_cidr))
    error_message = "vpc_cidr must be an IPv4 CIDR between /16 and /20."
  }
}

variable "availability_zones" {
  description = "Availability zones of the created VPC, one private subnet each (create_vpc = true). Pick zones that offer your GPU types (aws ec2 describe-instance-type-offerings --location-type availability-zone); more zones give the autoscaler more places to find capacity. Listed explicitly so a zone AWS adds later never reshapes the network."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.availability_zones) <= 6 && length(distinct(var.availability_zones)) == length(var.availability_zones)
    error_message = "availability_zones must list at most 6 distinct zones."
  }

  validation {
    condition     = alltrue([for z in var.availability_zones : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$", z))])
    error_message = "availability_zones must be zone names such as us-east-1a."
  }
}

variable "create_nat_gateway" {
  description = "Create a NAT gateway (in one small public subnet) so nodes in the created private subnets can reach package indexes at boot. Set false if your AMI has everything baked in or you route egress another way. Only used when create_vpc is true."
  type        = bool
  default     = true
}

variable "flow_log_retention_days" {
  description = "Retention of the created VPC's flow logs in CloudWatch Logs (only used when create_vpc is true)."
  type        = number
  default     = 365

  validation {
    condition     = contains([365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.flow_log_retention_days)
    error_message = "flow_log_retention_days must be a CloudWatch Logs retention value of at least one year (365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653)."
  }
}

# ---------------------------------------------------------------------------------------------
# Who may reach the nodes
# ---------------------------------------------------------------------------------------------

variable "autoscaler_security_group_ids" {
  description = "Security groups (of the autoscaler host) allowed to reach the nodes on the SSH port and the inference server port range."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.autoscaler_security_group_ids : can(regex("^sg-[0-9a-f]{8,17}$", s))])
    error_message = "autoscaler_security_group_ids must look like sg-0123456789abcdef0."
  }
}

variable "allowed_cidr_blocks" {
  description = "Extra CIDR blocks allowed to reach the nodes on the SSH port and the inference server port range (an autoscaler outside AWS, a load balancer's subnets, a bastion). World-open blocks (/0) are refused."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.allowed_cidr_blocks : can(cidrhost(c, 0))])
    error_message = "allowed_cidr_blocks must be valid CIDR blocks, e.g. 10.0.0.0/16."
  }

  validation {
    condition     = alltrue([for c in var.allowed_cidr_blocks : !endswith(c, "/0")])
    error_message = "allowed_cidr_blocks must not contain a /0 block (0.0.0.0/0 or ::/0): the nodes are never world-reachable."
  }
}

variable "ssh_port" {
  description = "TCP port sshd listens on; the autoscaler reaches igniter-agent over it (the policy's agents.port)."
  type        = number
  default     = 22

  validation {
    condition     = var.ssh_port >= 1 && var.ssh_port <= 65535 && floor(var.ssh_port) == var.ssh_port
    error_message = "ssh_port must be a TCP port (1-65535)."
  }
}

variable "server_port_range" {
  description = "Inclusive TCP port range the inference servers listen on. `from` is the policy's agents.server_base_port."
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

variable "egress_cidr_blocks" {
  description = "Where nodes may open HTTPS (443) and HTTP (80) connections: package indexes and mirrors, S3, CloudWatch. Narrow it (e.g. to a proxy) if your network allows."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = length(var.egress_cidr_blocks) > 0 && alltrue([for c in var.egress_cidr_blocks : can(cidrhost(c, 0))])
    error_message = "egress_cidr_blocks must be a non-empty list of valid CIDR blocks."
  }
}

# ---------------------------------------------------------------------------------------------
# Launch templates
# ---------------------------------------------------------------------------------------------

variable "instance_types" {
  description = "GPU instance types to create a launch template for (one each). List the same types in the policy's instance_types."
  type        = list(string)
  default     = ["g4dn.xlarge", "g4dn.12xlarge", "p3.2xlarge", "p3.8xlarge", "g5.xlarge"]

  validation {
    condition     = length(var.instance_types) > 0 && length(distinct(var.instance_types)) == length(var.instance_types)
    error_message = "instance_types must be a non-empty list without duplicates."
  }

  validation {
    condition     = alltrue([for t in var.instance_types : can(regex("^(g|p)[0-9][a-z0-9-]*\\.[a-z0-9]+$", t))])
    error_message = "instance_types must be EC2 GPU instance types of the g or p families, e.g. g4dn.xlarge or p3.2xlarge."
  }
}

variable "mig_instance_types" {
  description = "Instance types (also listed in instance_types) whose GPUs are cut into MIG slices: their nodes turn MIG mode on at boot, before igniter-agent starts, and the agent cuts the slices the autoscaler plans. Only A100, H100 and H200 types support MIG: p4d.24xlarge (8 x A100 40GB), p4de.24xlarge (8 x A100 80GB), p5.4xlarge (1 x H100 80GB), p5.48xlarge (8 x H100 80GB), p5e.48xlarge and p5en.48xlarge (8 x H200 141GB). V100 (p3), T4 (g4dn), A10G (g5) and L4 (g6) do not."
  type        = list(string)
  default     = []

  validation {
    condition = alltrue([for t in var.mig_instance_types : contains(
      ["p4d.24xlarge", "p4de.24xlarge", "p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"], t
    )])
    error_message = "mig_instance_types may only name MIG-capable types: p4d.24xlarge, p4de.24xlarge, p5.4xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge."
  }
}

variable "ami_ssm_parameter" {
  description = "SSM public parameter holding the GPU AMI ID (an AWS Deep Learning AMI with the NVIDIA driver, CUDA, the AWS CLI and Python 3.11+). The default is the Base OSS NVIDIA driver DLAMI on Ubuntu 24.04. Note that current OSS-driver DLAMIs list G4dn and G5 but not P3 (V100) as supported: for p3 types set ami_ids_by_instance_type to an AMI whose driver still supports Volta."
  type        = string
  default     = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_./-]+$", var.ami_ssm_parameter))
    error_message = "ami_ssm_parameter must be an SSM parameter path starting with /."
  }
}

variable "ami_id" {
  description = "AMI ID for every launch template, overriding the SSM lookup (e.g. an image you baked with the project and models preinstalled). Null: use ami_ssm_parameter."
  type        = string
  default     = null

  validation {
    condition     = var.ami_id == null || can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must look like ami-0123456789abcdef0."
  }
}

variable "ami_ids_by_instance_type" {
  description = "Per-instance-type AMI IDs that override both ami_id and the SSM lookup, e.g. { \"p3.2xlarge\" = \"ami-...\" } for a V100-capable driver."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for v in values(var.ami_ids_by_instance_type) : can(regex("^ami-[0-9a-f]{8,17}$", v))])
    error_message = "ami_ids_by_instance_type values must look like ami-0123456789abcdef0."
  }
}

variable "root_device_name" {
  description = "Root device name of the AMI (/dev/sda1 for the Ubuntu DLAMIs). The root volume is created encrypted with this name."
  type        = string
  default     = "/dev/sda1"

  validation {
    condition     = can(regex("^/dev/(sd[a-z][0-9]*|xvd[a-z][0-9]*)$", var.root_device_name))
    error_message = "root_device_name must be a device like /dev/sda1 or /dev/xvda."
  }
}

variable "root_volume_size_gb" {
  description = "Size of each node's encrypted gp3 root volume in GiB (the DLAMI, PyTorch and the synced models live on it)."
  type        = number
  default     = 200

  validation {
    condition     = var.root_volume_size_gb >= 100 && var.root_volume_size_gb <= 16384
    error_message = "root_volume_size_gb must be between 100 and 16384 (the DLAMI alone needs about 100 GiB)."
  }
}

variable "ebs_kms_key_arn" {
  description = "KMS key ARN to encrypt node volumes with. Null: the account's default EBS key (aws/ebs). If set, also pass it to the autoscaler module so its role may use it at launch."
  type        = string
  default     = null

  validation {
    condition     = var.ebs_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.ebs_kms_key_arn))
    error_message = "ebs_kms_key_arn must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)."
  }
}

# ---------------------------------------------------------------------------------------------
# What runs on a node (rendered into cloud-init user data)
# ---------------------------------------------------------------------------------------------

variable "igniter_package" {
  description = "pip requirement that installs this project (igniter-agent) on the nodes: a version from your package index (igniter-autoscaler==0.1.0), a VCS URL (git+https://github.com/ORG/REPO@TAG) or an HTTPS URL of a wheel."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9_.+:/@=<>!~,%#\\[\\]-]*$", var.igniter_package)) && length(var.igniter_package) <= 512
    error_message = "igniter_package must be a single pip requirement or URL without spaces, quotes or shell characters."
  }
}

variable "autoscaler_ssh_public_key" {
  description = "OpenSSH public key of the autoscaler (the pair of the private key in the autoscaler module's secret). Authorised for agent_user on every node."
  type        = string

  validation {
    condition     = can(regex("^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521) [A-Za-z0-9+/]+={0,3}( [A-Za-z0-9@._:+-]*)?$", trimspace(var.autoscaler_ssh_public_key)))
    error_message = "autoscaler_ssh_public_key must be one OpenSSH public key line (ssh-ed25519 AAAA... [comment]), comment limited to letters, digits and @._:+-."
  }
}

variable "agent_user" {
  description = "Unprivileged user that runs igniter-agent and its inference servers; the autoscaler's key is authorised for it alone (with the `restrict` option: no forwarding, no pty), so the key grants no sudo. The policy's agents.user."
  type        = string
  default     = "igniter"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.agent_user)) && !contains(["root", "ubuntu", "ec2-user"], var.agent_user)
    error_message = "agent_user must be a Linux user name, and not root or the AMI's sudo-capable default user."
  }
}

variable "model_bucket" {
  description = "Name of the S3 bucket holding the models (model.pt + model.yaml per model directory). Nodes get read-only access to model_prefix in it."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.model_bucket))
    error_message = "model_bucket must be an S3 bucket name (3-63 lowercase letters, digits, dots and hyphens)."
  }
}

variable "model_prefix" {
  description = "Key prefix of the models in model_bucket; synced to model_dir on every node at boot and every model_sync_interval. Ends with a slash."
  type        = string
  default     = "models/"

  validation {
    condition     = can(regex("^([A-Za-z0-9!_.*'()-]+/)+$", var.model_prefix))
    error_message = "model_prefix must be a relative key prefix ending with a slash, e.g. models/ or team-a/models/."
  }
}

variable "model_bucket_kms_key_arn" {
  description = "KMS key ARN the model bucket is encrypted with, if it uses SSE-KMS with a customer managed key (nodes then get kms:Decrypt through S3 only). Null for SSE-S3."
  type        = string
  default     = null

  validation {
    condition     = var.model_bucket_kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+$", var.model_bucket_kms_key_arn))
    error_message = "model_bucket_kms_key_arn must be a KMS key ARN."
  }
}

variable "model_dir" {
  description = "Directory on the nodes the models are synced into; point the policy's workloads[].model_dir below it."
  type        = string
  default     = "/var/lib/igniter/models"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_./-]+$", var.model_dir))
    error_message = "model_dir must be an absolute path of letters, digits, _ . / -."
  }
}

variable "model_sync_interval" {
  description = "How often nodes re-sync models from S3 after boot, as a systemd time span (e.g. 15min, 1h)."
  type        = string
  default     = "15min"

  validation {
    condition     = can(regex("^[0-9]+(s|min|h)$", var.model_sync_interval))
    error_message = "model_sync_interval must be a systemd time span such as 30s, 15min or 1h."
  }
}

variable "install_cloudwatch_agent" {
  description = "Install and start the CloudWatch agent on nodes, publishing GPU utilisation, GPU memory and power to the Igniter/Nodes namespace."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------------------------------------
# IAM
# ---------------------------------------------------------------------------------------------

variable "enable_ssm_session_manager" {
  description = "Attach AmazonSSMManagedInstanceCore to the node role so operators can open shells with Session Manager (no inbound port). Off by default: the node role then only reads models and publishes metrics."
  type        = bool
  default     = false
}

variable "create_interruption_queue" {
  description = "Create the SQS queue and the EventBridge rules that send it spot interruption warnings, rebalance recommendations, instance state changes and AWS Health scheduled changes (output interruption_queue_url: the policy's scaling.spot.interruption_queue)."
  type        = bool
  default     = true
}

variable "create_spot_service_linked_role" {
  description = "Create the account's EC2 Spot service-linked role (AWSServiceRoleForEC2Spot), which spot launches need. Off by default: there is one per account, and creating it twice fails."
  type        = bool
  default     = false
}

variable "permissions_boundary_arn" {
  description = "Optional IAM permissions boundary for the roles this module creates."
  type        = string
  default     = null

  validation {
    condition     = var.permissions_boundary_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:policy/.+$", var.permissions_boundary_arn))
    error_message = "permissions_boundary_arn must be an IAM policy ARN."
  }
}
