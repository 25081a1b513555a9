"""SlotNames: a new slot's number is the scanning answer (one above the highest of every name ever
taken that starts with its prefix), from names or from the highest number per stem that the
store keeps of them (store_slots.py)."""

from __future__ import annotations

import random

import pytest

from autoscaler.core.layout.slots import SlotNames, _ordinal, numbered, surge_stem, top_numbers
from autoscaler.core.rollout.surge_types import SURGE_SLOT

pytestmark = pytest.mark.unit


def surge_number(slot: str) -> int:
    """A surge slot's number (`<fleet>-<type>-surge<n>`), -1 for any other slot: how the scan read it."""
    m = SURGE_SLOT.search(slot)
    return int(m.group(1)) if m else -1


def scanned(taken: set[str], prefix: str, number=_ordinal) -> str:
    """The answer before SlotNames: a pass over every name for each new slot."""
    n = 1 + max((number(s) for s in taken if s.startswith(prefix)), default=-1)
    taken.add(prefix + str(n))
    return prefix + str(n)


@pytest.mark.parametrize("seed", range(20))
def test_every_name_taken_is_the_scanning_answer(seed: int) -> None:
    rng = random.Random(seed)
    types = ["p3", "p3.2xlarge", "g4dn", "a2-ultragpu-1g"]
    prefixes = [f"f-{t}-{spot}" for t in types for spot in ("", "spot-")] + [f"f-{t}-surge" for t in types]
    names = {f"{rng.choice(prefixes)}{rng.randrange(50)}" for _ in range(rng.randrange(60))}
    names |= {rng.choice(["odd", "7", "f-p3", "f-p3-x", "f-p37", "f-p3-surge"]) for _ in range(3)}
    kept = {n for n in names if rng.random() < 0.5}  # the rest only as the store keeps them: stems' tops
    tops = top_numbers(names - kept)
    mine, theirs = SlotNames(kept, tops=tops), set(names)
    surge_mine, surge_theirs = SlotNames(kept, surge_stem, tops), set(names)
    for _ in range(40):
        p = rng.choice(prefixes)
        if p.endswith("surge"):
            assert surge_mine.take(p) == scanned(surge_theirs, p, surge_number)
        else:
            assert mine.take(p) == scanned(theirs, p)


def test_a_name_is_its_stem_and_trailing_number() -> None:
    assert numbered("f-p3-spot-07") == ("f-p3-spot-", 7) and numbered("f-p3-surge2") == ("f-p3-surge", 2)
    assert numbered("f-p3-x") is None and numbered("12") == ("", 12)
    assert top_numbers(["f-p3-1", "f-p3-4", "f-p3-surge0", "odd"]) == {"f-p3-": 4, "f-p3-surge": 0}


def test_a_spot_name_taken_counts_for_the_on_demand_prefix_too() -> None:
    """`f-p3-` is a prefix of `f-p3-spot-7`: as the scan did, the on-demand numbers go past it."""
    names = SlotNames(["f-p3-2"])
    assert names.take("f-p3-") == "f-p3-3"
    assert names.take("f-p3-spot-") == "f-p3-spot-0"
    names = SlotNames(["f-p3-spot-6"])
    assert names.take("f-p3-") == "f-p3-7" and names.take("f-p3-spot-") == "f-p3-spot-7"
