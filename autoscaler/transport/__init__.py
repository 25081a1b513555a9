"""Transports: how the autoscaler reaches the agent on each instance."""
