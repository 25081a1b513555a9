"""iGniter autoscaler: interference-aware provisioning of GPU inference fleets."""

__version__ = "0.1.0"
