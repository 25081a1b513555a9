variable "region" {
  description = "AWS region of the fleet."
  type        = string
  default     = "us-east-1"

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", var.region))
    error_message = "region must be an AWS region name such as us-east-1."
  }
}

variable "availability_zones" {
  description = "Zones of the fleet's VPC (one private subnet each). Pick zones offering your GPU types: p3 is not in every zone."
  type        = list(string)
  default     = ["us-east-1a", "us-east-1b", "us-east-1c"]
}

variable "fleet_name" {
  description = "Fleet name: the policy's `fleet:` and the igniter:fleet tag value."
  type        = string
  default     = "igniter"
}

variable "model_bucket" {
  description = "Existing S3 bucket holding the models; nodes get read-only access to model_prefix."
  type        = string
}

variable "model_prefix" {
  description = "Key prefix of the models in model_bucket, ending with a slash."
  type        = string
  default     = "models/"
}

variable "igniter_package" {
  description = "pip requirement installing this project on the nodes and the host, e.g. git+https://github.com/ORG/REPO@v0.1.0 or igniter-autoscaler==0.1.0 from your index."
  type        = string
}

variable "autoscaler_ssh_public_key" {
  description = "OpenSSH public key of the autoscaler; its private half goes into the secret output as ssh_key_secret_arn."
  type        = string
}

variable "allowed_cidr_blocks" {
  description = "Extra CIDR blocks allowed to reach the nodes' SSH and inference ports (e.g. your load balancer subnets). Never /0."
  type        = list(string)
  default     = []
}

variable "create_autoscaler_host" {
  description = "Run the autoscaler on a small EC2 host in the fleet's VPC (true), or elsewhere with the role this example creates (false)."
  type        = bool
  default     = true
}

variable "gateway_client_cidr_blocks" {
  description = "Who may send inference requests to the gateway's load balancer (internal by default). Never /0."
  type        = list(string)
  default     = ["10.0.0.0/8"]
}
