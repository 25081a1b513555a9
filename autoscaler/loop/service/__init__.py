"""Service: the long-running process behind `igniter run`. Owns the scheduler (scheduler.py:
APScheduler and signals), leadership and the fence every mutating call passes (leadership.py,
fence.py), the gateway's keeper (keeper.py), the watches between ticks (watch.py: the fast path,
ready_watch.py: event ticks) and the wiring that builds a controller's real dependencies
(wiring.py).

The top room of loop/: it may import every other room, and no room imports it.
"""
