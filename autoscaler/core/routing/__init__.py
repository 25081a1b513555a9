"""Routing: the gateway's view of the layout. Owns the routes each served server should have
(weights from the plan, gated on readiness, drains of servers the layout dropped) and the runtime
operations that carry them out, make-before-break (routes.py).

Imports only layout/.
"""
