"""MIG geometry: the slice profiles a GPU can be cut into and where each may start. Pure.

The shape is what `nvidia-smi mig -lgipp` prints for a GPU: per GPU-instance profile, its allowed
placements as `{starts}:size`, both in memory-slice units (8 on A100/H100/H200). A slice occupies
units [start, start + size); two slices on one GPU may not share a unit, and the compute slices of
the profiles on one GPU add up to at most 7. On an A100, 3g.40gb starts at 0 or 4 and occupies 4
units, so 3g + 3g + 1g is not a valid cut although 3 + 3 + 1 = 7.

The bundled tables (A100 40GB, A100 80GB, H100 80GB, H200 141GB) follow NVIDIA's MIG user guide
("Supported MIG Profiles"); docs/planner.md says which were confirmed from a primary source. The
media-extension profiles (+me) and the compute-instance profiles are left out: they cut no
differently and the planner does not ask for video decoders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Slot = tuple[str, int]  # (slice profile name, start unit)


class SliceProfile(BaseModel):
    """One GPU-instance profile: `1g.10gb` has 1 compute slice, may start at units 0..6, occupies 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=r"^[1-9]g\.[0-9]+gb$")]
    compute_slices: Annotated[int, Field(ge=1, le=8)]
    memory_units: Annotated[int, Field(ge=1, le=8)]
    starts: Annotated[tuple[int, ...], Field(min_length=1)]


class MigGeometry(BaseModel):
    """A GPU's MIG geometry: its slice profiles and its compute/memory slice counts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compute_slices: Annotated[int, Field(ge=1, le=8)] = 7
    memory_units: Annotated[int, Field(ge=1, le=8)] = 8
    profiles: Annotated[tuple[SliceProfile, ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _fits(self) -> MigGeometry:
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError("slice profile names must be unique")
        for p in self.profiles:
            if p.compute_slices > self.compute_slices or any(
                s < 0 or s + p.memory_units > self.memory_units for s in p.starts
            ):
                raise ValueError(f"{p.name}: a start or size runs past the GPU's {self.memory_units} units")
        return self

    def profile(self, name: str) -> SliceProfile:
        found = _by_name(self.profiles).get(name)
        return found if found is not None else next(p for p in self.profiles if p.name == name)

    def has(self, name: str) -> bool:
        return name in _by_name(self.profiles)

    def by_compute(self, compute_slices: int) -> SliceProfile | None:
        """The smallest-memory profile with this many compute slices (1 -> 1g.10gb, not 1g.20gb)."""
        found = [p for p in self.profiles if p.compute_slices == compute_slices]
        return min(found, key=lambda p: (p.memory_units, p.name)) if found else None

    def valid(self, slots: Sequence[Slot]) -> bool:
        """Whether these slices can exist together on one GPU: allowed starts, no shared unit,
        compute within the GPU's."""
        index = _by_name(self.profiles)
        used: set[int] = set()
        compute = 0
        for name, start in slots:
            p = index.get(name)
            if p is None:
                return False
            span = set(range(start, start + p.memory_units))
            if start not in p.starts or used & span:
                return False
            used |= span
            compute += p.compute_slices
        return compute <= self.compute_slices


# A geometry's profiles by name, per profiles tuple (held, so its id is not reused while kept): `valid`
# runs hundreds of thousands of times in a MIG plan at fleet scale. Kept outside the frozen model so
# that equality and hashing stay those of its fields.
_INDEX: dict[int, tuple[tuple[SliceProfile, ...], dict[str, SliceProfile]]] = {}


def _by_name(profiles: tuple[SliceProfile, ...]) -> dict[str, SliceProfile]:
    seen = _INDEX.get(id(profiles))
    if seen is None or seen[0] is not profiles:
        if len(_INDEX) >= 256:
            _INDEX.clear()
        seen = _INDEX[id(profiles)] = (profiles, {p.name: p for p in profiles})
    return seen[1]


def _p(name: str, compute: int, units: int, starts: tuple[int, ...]) -> SliceProfile:
    return SliceProfile(name=name, compute_slices=compute, memory_units=units, starts=starts)


def _ga100_like(mem: tuple[str, str, str, str, str, str]) -> MigGeometry:
    """A100/H100/H200 share one layout (7 compute slices, 8 memory units); only memory sizes differ:
    `mem` names the 1g, 1g-double-memory, 2g, 3g, 4g and 7g profiles."""
    one, one_big, two, three, four, seven = mem
    return MigGeometry(
        profiles=(
            _p(one, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
            _p(one_big, 1, 2, (0, 2, 4, 6)),
            _p(two, 2, 2, (0, 2, 4)),
            _p(three, 3, 4, (0, 4)),
            _p(four, 4, 4, (0,)),
            _p(seven, 7, 8, (0,)),
        )
    )


BUNDLED: dict[str, MigGeometry] = {
    "a100-40gb": _ga100_like(("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")),
    "a100-80gb": _ga100_like(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    "h100-80gb": _ga100_like(("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    "h200-141gb": _ga100_like(("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
}
