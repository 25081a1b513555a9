terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.40, < 6.0"
    }
  }
}

provider "aws" {
  region = var.region

  # Never put igniter:fleet here: the autoscaler owns (and may terminate) every instance that
  # carries it, and default tags would put it on the autoscaler host too.
  default_tags {
    tags = {
      Project   = "igniter"
      ManagedBy = "terraform"
    }
  }
}
