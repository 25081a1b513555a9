"""State: what the loop keeps between ticks and across restarts. Owns the SQLite store (store.py,
its remembered reads in store_reads.py), the state file as a file (statefile.py) and the typed
cross-tick state (controller_state.py).

The bottom room of loop/: it imports no other room.
"""
