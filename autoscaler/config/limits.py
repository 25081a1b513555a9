"""Sane ceilings on what a policy, profile or trace may say: a value past one is a typo or a unit
mix-up, never a real fleet, and the planner's arithmetic is only tested below them.

Every number must also be finite (`.inf` and `.nan` are YAML floats; a rate of 1e300 overflowed
the planner's integer maths). docs/operations.md lists these limits; each error names the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

MAX_RATE_RPS = 10_000_000.0  # one workload's request rate (ten million requests a second)
MAX_SLO_MS = 600_000.0  # ten minutes: past that it is a batch job, not an inference SLO
MAX_PRICE_PER_HOUR = 1_000.0  # one instance (the largest EC2 GPU instances cost about 100 $/h)
MAX_FLEET_COST_PER_HOUR = 10_000_000.0  # scaling.max_cost_per_hour
MAX_SECONDS = 30 * 86400.0  # any duration or delay: thirty days
MAX_INTERVAL_S = 86400.0  # a tick at least once a day
MAX_TIMEOUT_S = 3600.0  # network and command timeouts
MAX_INSTANCES = 10_000  # a plan above this is refused unless scaling.max_cost_per_hour caps it
MAX_INSTANCES_CEILING = 1_000_000  # what scaling.max_instances may be raised to
MAX_TRACE_TIME_S = 10 * 365 * 86400.0  # a trace's time_s column: ten years
MAX_SIM_TICKS = 500_000  # ticks one simulation replays: a year at a 60 s interval
MAX_PROFILE_MS = 3_600_000.0  # a profile's times (latencies, idle times): an hour
MAX_PROFILE_NUMBER = 1e12  # any other number of a profile (bytes, watts, MHz, counts)
MAX_INT_DIGITS = 30  # an integer in a YAML or JSON input: past this it is no count or id of ours
MAX_DEPTH = 64  # how deep a YAML or JSON input may nest (a policy needs 5)


def non_finite(value: Any, path: str = "") -> Iterator[str]:
    """Field paths (`models.resnet50.power_w[1][2]`) of every NaN or infinite float in a nested
    mapping/sequence, in document order."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from non_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for i, item in enumerate(value):
            yield from non_finite(item, f"{path}[{i}]")


def above_ceiling(value: Any, path: str = "") -> Iterator[tuple[str, float, float]]:
    """(field path, value, ceiling) of every number in a profile past its ceiling: times (a key
    ending in `_ms`, not a rate `..._per_ms`) past MAX_PROFILE_MS, anything else past
    MAX_PROFILE_NUMBER."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        key = re.sub(r"\[\d+\]", "", path.rsplit(".", 1)[-1])
        ceiling = MAX_PROFILE_MS if key.endswith("_ms") and "_per_ms" not in key else MAX_PROFILE_NUMBER
        if abs(value) > ceiling:
            yield path, float(value), ceiling
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from above_ceiling(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for i, item in enumerate(value):
            yield from above_ceiling(item, f"{path}[{i}]")
