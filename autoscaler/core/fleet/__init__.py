"""Fleet: the life of one instance as the autoscaler records it. Owns the lifecycle records and
their states and transitions (lifecycle.py), what an instance that is going away (spot
interruption, rebalance, scheduled event) still counts for (going_away.py), and the disruption
budget that bounds voluntary replacements (disruption.py), and the warm pool's decisions: which
launches start a stopped, pre-initialised instance, and what the pool needs (warm_pool.py).

Imports only layout/ (the servers a record's slot holds).
"""
