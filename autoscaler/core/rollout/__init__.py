"""Rollout: the steps from the fleet that runs to the layout. Owns reconcile (reconcile.py: one tick's
actions), the make-before-break rules (rollout.py, each GPU's judged state in judged.py, its records
in rollout_types.py), moves between slots (moves.py), surge capacity and stand-ins (surge.py,
surge_types.py; on ready GPUs borrowing.py, in free share bursting.py), what blocks a move and how
it is resolved (blocking.py), the actions reconcile emits (actions.py), what a fast tick may do
(fast_path.py), and the co-location judge that says whether servers sharing a GPU meet their budgets
(colocation.py).

The top room of core/: it imports layout/ and fleet/, and no other room imports it.
"""
