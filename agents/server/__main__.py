"""`python -m agents.server --spec JSON`: one inference server (see agents/server/main.py).

Once main() has returned (stats written, connections closed), the process leaves with os._exit:
the interpreter's teardown with torch loaded takes seconds on a busy VM and would only delay the
exit the agent waits for, and with it the port a new server may be waiting to bind.
"""

import os
import sys

from agents.server.main import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
