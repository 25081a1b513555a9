"""`python -m agents.server --spec JSON`: one inference server (see agents/server/main.py)."""

import sys

from agents.server.main import main

sys.exit(main())
