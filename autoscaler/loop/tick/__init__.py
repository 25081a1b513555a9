"""Tick: one control-loop tick in named steps (controller.py), the records it passes around
(records.py: Deps, Observation, TickReport), the observe step (observe.py), the core's inputs
(inputs.py), the forecast and headroom step (tuning.py), out-of-reach reporting (reach.py), what
is serving now (fleet_view.py), the last layout given again (last_layout.py), and advisory mode's
tick, which publishes what it would do instead of doing it (advisory.py).

It imports state/ and steps/.
"""
