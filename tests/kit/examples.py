"""How many examples a hypothesis property draws: all of them in `make test`, a share in `make check`.

`make check` is the fast loop (DEVELOPERS.md: within 60 s on 2 quiet cores), and its properties
took a third of its CPU at their full counts. It sets IGNITER_EXAMPLE_SHARE (0.25): each property
then draws that share of the examples its test asks for (`examples`), at least MIN_EXAMPLES, and
one that names no count draws that share of hypothesis's default (the `check` profile). `make test`,
which CI runs, sets nothing: every property draws its full count there.
"""

from __future__ import annotations

import math
import os

from hypothesis import settings

MIN_EXAMPLES = 10
DEFAULT_EXAMPLES = 100  # hypothesis's own default max_examples


def share() -> float:
    """IGNITER_EXAMPLE_SHARE, in (0, 1]; unset: 1. A bad value is a usage error, not a silent 1."""
    text = os.environ.get("IGNITER_EXAMPLE_SHARE", "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise ValueError(f"IGNITER_EXAMPLE_SHARE={text!r}: a number in (0, 1]")
    return value


def examples(n: int) -> int:
    """The max_examples for a property that asks for `n`: all of them, or the share (at least
    MIN_EXAMPLES, never more than `n`)."""
    s = share()
    return n if s >= 1 else min(n, max(MIN_EXAMPLES, math.ceil(n * s)))


def load_profile() -> None:
    """The properties that name no count draw `examples(DEFAULT_EXAMPLES)`; the rest of the
    profile in force stays (CI's derandomized `ci`, where `CI` is set)."""
    if share() < 1:
        settings.register_profile("check", settings.default, max_examples=examples(DEFAULT_EXAMPLES))
        settings.load_profile("check")
