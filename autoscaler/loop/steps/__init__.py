"""Steps: the side-effecting parts of a tick, each behind its interface and the fence. Owns the
actuator (actuator.py: reconcile's actions, intent first), the gateway's observe and drain steps
(gateway_step.py), the warm pool's step (pool_step.py) and the fault points crash tests kill or
hold a process at (faults.py).

It imports state/ only.
"""
