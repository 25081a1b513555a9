"""GPU profiles: load and validate the measurements the performance model is fitted from.

Two kinds: the fitted kind (the iGniter profile; its format, agents/profiler/schema.py, belongs to
the profiler that writes it) and `kind: measured` (rows per model and MIG slice, config/measured.py,
written by `igniter profile import`). This module reads either for the autoscaler, with errors that
name the file and the field.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from agents.profiler.schema import ModelProfile, Profile
from autoscaler.config.errors import InputError, from_validation
from autoscaler.config.limits import above_ceiling, non_finite
from autoscaler.config.measured import MeasuredProfile
from autoscaler.config.yamlio import load_mapping

__all__ = ["AnyProfile", "MeasuredProfile", "ModelProfile", "Profile", "load_any_profile", "load_profile"]

AnyProfile = Profile | MeasuredProfile


def load_profile(path: str | Path) -> Profile:
    """Load and validate one fitted profile; errors name the file and the field."""
    profile = load_any_profile(path)
    if isinstance(profile, MeasuredProfile):
        raise InputError(path, "kind", "a measured (MIG) profile has no fitted model; this needs a fitted profile")
    return profile


def load_any_profile(path: str | Path) -> AnyProfile:
    """Load and validate a profile of either kind (`kind: measured` or the fitted kind)."""
    resolved = Path(path).resolve()
    try:
        stamp = resolved.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _load_cached(resolved, stamp)


@lru_cache(maxsize=64)
def _load_cached(path: Path, _stamp: int) -> AnyProfile:
    data = load_mapping(path, fast=True)  # machine-written and large (an imported MIG profile: 150 KB)
    kind: type[Profile] | type[MeasuredProfile] = MeasuredProfile if data.get("kind") == "measured" else Profile
    try:
        profile = kind.model_validate(data)
    except ValidationError as exc:
        raise from_validation(path, exc) from None
    dumped = profile.model_dump()
    bad = next(non_finite(dumped), None)
    if bad is not None:
        raise InputError(path, bad, "must be a finite number (not .inf or .nan)")
    for field, value, ceiling in above_ceiling(dumped):
        raise InputError(path, field, f"{value:g} is above the ceiling {ceiling:g} (docs/operations.md, Limits)")
    return profile
