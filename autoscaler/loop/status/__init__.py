"""Status: the status endpoint of a running controller. Owns the server (server.py: uvicorn on a
thread), the routes (app.py), the OpenAPI document (openapi.py), health (health.py) and the
Prometheus metrics (metrics.py, metrics_gateway.py, metrics_policy.py).

It reads the tick's reports: it imports state/, steps/ and tick/.
"""
