"""What each chaos probe counted, for `make chaos`'s summary: one JSON line per probe run,
appended to $CHAOS_REPORT when it is set (the quick subset in make test writes nothing)."""

from __future__ import annotations

import json
import os
import time
from typing import Any


def record(probe: str, **counts: Any) -> None:
    path = os.environ.get("CHAOS_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"probe": probe, "at": time.time(), **counts}) + "\n")


def trials(default: int) -> int:
    """How many times a probe repeats: CHAOS_TRIALS (make chaos), else its quick default."""
    return int(os.environ.get("CHAOS_TRIALS", str(default)))
