"""The building blocks every policy section shares: the frozen base model, the bounded field
types (one per ceiling of autoscaler/config/limits.py) and the validator error that names an exact
field path. Pure."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from autoscaler.config import limits

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
# The ceilings of autoscaler/config/limits.py, one type each (docs/operations.md lists them).
Rate = Annotated[float, Field(ge=0, le=limits.MAX_RATE_RPS)]
Slo = Annotated[float, Field(gt=0, le=limits.MAX_SLO_MS)]
Price = Annotated[float, Field(gt=0, le=limits.MAX_PRICE_PER_HOUR)]
Seconds = Annotated[float, Field(gt=0, le=limits.MAX_SECONDS)]
Delay = Annotated[float, Field(ge=0, le=limits.MAX_SECONDS)]
Timeout = Annotated[float, Field(gt=0, le=limits.MAX_TIMEOUT_S)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class Frozen(BaseModel):
    # allow_inf_nan=False: `.inf` and `.nan` are YAML floats, and no field of a policy means them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Listen = Annotated[str, Field(pattern=r"^[^\s:]+:[0-9]{1,5}$", description="HOST:PORT")]


class FieldError(ValueError):
    """Raised inside validators to report an exact field path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
