"""MIG geometry: the bundled tables cut GPUs the way `nvidia-smi mig -lgipp` says."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from autoscaler.config.mig import BUNDLED, MigGeometry, SliceProfile
from autoscaler.model.mig import cuts

pytestmark = pytest.mark.unit

A100 = BUNDLED["a100-80gb"]
PARVA = frozenset({"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})


def test_a100_3g_starts_at_0_or_4_and_3g_3g_1g_is_not_a_cut():
    three = A100.profile("3g.40gb")
    assert (three.compute_slices, three.memory_units, three.starts) == (3, 4, (0, 4))
    assert A100.valid([("3g.40gb", 0), ("3g.40gb", 4)])
    assert not any(A100.valid([("3g.40gb", 0), ("3g.40gb", 4), ("1g.10gb", s)]) for s in range(8))
    assert not A100.valid([("3g.40gb", 2)])
    assert A100.valid([("4g.40gb", 0), ("3g.40gb", 4)])
    assert not A100.valid([("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6), ("1g.10gb", 7)])


@pytest.mark.parametrize("gpu", sorted(BUNDLED))
def test_every_bundled_gpu_has_seven_compute_slices_and_one_whole_gpu_profile(gpu):
    geo = BUNDLED[gpu]
    assert {p.compute_slices for p in geo.profiles} == {1, 2, 3, 4, 7}
    assert geo.by_compute(7) is not None and geo.by_compute(7).starts == (0,)
    assert len([p for p in geo.profiles if p.compute_slices == 1]) == 2  # 1g and its double-memory twin


def test_maximal_cuts_are_valid_maximal_and_cover_all_compute_mixes():
    found = cuts(A100, PARVA)
    assert len(found) == 19
    for cut in found:
        assert A100.valid(cut)
        assert not any(A100.valid((*cut, (p, s))) for p in PARVA for s in A100.profile(p).starts)
    mixes = {tuple(sorted(A100.profile(n).compute_slices for n, _ in c)) for c in found}
    assert (3, 3) in mixes and (3, 4) in mixes and (2, 2, 3) in mixes and (7,) in mixes


def test_geometry_rejects_a_start_past_the_gpu():
    with pytest.raises(ValidationError, match="runs past"):
        MigGeometry(profiles=(SliceProfile(name="3g.40gb", compute_slices=3, memory_units=4, starts=(6,)),))
