"""`python -m autoscaler.demo` (what `make demo` runs): see autoscaler/demo/app.py."""

import sys

from autoscaler.demo.app import main

sys.exit(main())
