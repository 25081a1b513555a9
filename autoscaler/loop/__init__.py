"""The running service around the pure core, in rooms, each importing only those before it:

- `state/`: what the loop keeps between ticks and across restarts (the SQLite store, the state file,
  the typed controller state).
- `steps/`: the side-effecting steps a tick calls (the actuator, the gateway's step, the warm
  pool's step) and the fault points crash tests stop them at.
- `tick/`: one tick in named steps (observe -> plan -> diff -> act -> record), its records, and
  advisory mode's tick that publishes instead of acting.
- `status/`: the status endpoint (app, OpenAPI, health, metrics, views).
- `service/`: the long-running process (scheduler, leadership and its fence, the keeper, watches)
  and the wiring that builds a controller's real dependencies.
"""
