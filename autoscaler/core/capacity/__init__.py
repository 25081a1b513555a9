"""Capacity: how much each workload is planned for. Owns the demand forecast (forecast.py), the
headroom learned from forecast errors and bursts (headroom.py), how often ready capacity covered
demand (coverage.py), target tracking and step scaling (scaling.py) and the SLO guard that raises
rates when latency breaches (slo_guard.py).

Works on rates and samples alone: it imports no other room of core/.
"""
