"""State: what the loop keeps between ticks and across restarts. Owns the SQLite store (store.py,
its remembered reads in store_reads.py), the state file as a file (statefile.py), the typed
cross-tick state (controller_state.py) and the fitted GPU profiles kept between processes
(fit_files.py).

The bottom room of loop/: it imports no other room.
"""
