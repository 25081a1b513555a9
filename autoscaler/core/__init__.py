"""The pure core: what the fleet should be, and the steps that get it there. Pure.

Inputs in, values out, time passed in: nothing here reads a clock, a socket or a cloud API
(tests/test_architecture.py enforces). Its rooms, each importing only those before it:

- `layout/`: a plan given stable names (slots, servers, ports), and which running servers stay.
- `capacity/`: how much to plan for (forecast, headroom, coverage, scaling, the SLO guard).
- `fleet/`: the life of one instance (lifecycle records, notices, disruption budgets).
- `rollout/`: the steps from the fleet that runs to the layout (reconcile, moves, surge).
- `routing/`: the gateway's weights and drains for what runs.
"""
