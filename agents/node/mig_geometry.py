"""MIG geometry of the GPUs the agent can cut: each GPU-instance profile, the compute slices it
has, the memory-slice units it occupies and the start positions it may take.

The agent's own table (it imports nothing from the autoscaler), from NVIDIA's MIG user guide
("Supported MIG Profiles", and `nvidia-smi mig -lgipp`, whose `Placements: {0,4}:4` is the starts
and the size in memory-slice units). A GPU has 8 memory-slice units and 7 compute slices; a
placement occupies units [start, start + size). On every GPU here a 3g slice starts at 0 or 4 and
occupies 4 units, so 3g + 3g + 1g is not a valid cut; 4g starts only at 0; 7g takes all 8 units.
The `+me` profiles (one 1g slice with the media engines) place like their 1g profile.
"""

from __future__ import annotations

from dataclasses import dataclass

UNITS = 8


@dataclass(frozen=True, slots=True)
class SliceProfile:
    """One GPU-instance profile: `3g.40gb` has 3 compute slices and occupies 4 memory units."""

    name: str
    compute: int
    size: int
    starts: tuple[int, ...]

    def units(self, start: int) -> range:
        """The memory-slice units a slice of this profile at `start` occupies."""
        return range(start, start + self.size)


@dataclass(frozen=True, slots=True)
class Geometry:
    """The MIG profiles of one GPU model, by name."""

    key: str
    profiles: dict[str, SliceProfile]

    def profile(self, name: str) -> SliceProfile | None:
        return self.profiles.get(name)


def _geometry(key: str, one: str, one_double: str, two: str, three: str, four: str, seven: str) -> Geometry:
    """The shared A100/H100/H200 layout, named by each model's memory sizes."""
    shapes = (
        SliceProfile(one, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        SliceProfile(one + "+me", 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        SliceProfile(one_double, 1, 2, (0, 2, 4, 6)),
        SliceProfile(two, 2, 2, (0, 2, 4)),
        SliceProfile(three, 3, 4, (0, 4)),
        SliceProfile(four, 4, 4, (0,)),
        SliceProfile(seven, 7, 8, (0,)),
    )
    return Geometry(key, {p.name: p for p in shapes})


GEOMETRIES: dict[str, Geometry] = {
    g.key: g
    for g in (
        _geometry("a100-40gb", "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
        _geometry("a100-80gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        _geometry("h100-80gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        _geometry("h200-141gb", "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    )
}


def geometry_for(gpu_name: str | None) -> Geometry | None:
    """The geometry of a GPU by its NVML name (`NVIDIA A100-SXM4-80GB`, `NVIDIA H100 80GB HBM3`),
    or None for a GPU whose MIG layout the agent does not know (H100 NVL 94GB, A30, ...)."""
    name = (gpu_name or "").upper()
    if "A100" in name:
        return GEOMETRIES["a100-80gb" if "80GB" in name else "a100-40gb"]
    if "H100" in name and "80GB" in name:
        return GEOMETRIES["h100-80gb"]
    if "H200" in name:
        return GEOMETRIES["h200-141gb"]
    return None


def occupied(geometry: Geometry, profile: str, start: int) -> set[int]:
    """The units a valid slice occupies (empty for an unknown profile)."""
    shape = geometry.profile(profile)
    return set(shape.units(start)) if shape is not None else set()
