"""The building blocks every policy section shares: the frozen base model, the bounded field
types (one per ceiling of autoscaler/config/limits.py) and the validator error that names an exact
field path. Pure."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from autoscaler.config import limits

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
Pos = Annotated[float, Field(gt=0, strict=True)]
NonNeg = Annotated[float, Field(ge=0, strict=True)]
# The ceilings of autoscaler/config/limits.py, one type each (docs/operations.md lists them).
# Strict: an int or a float is a number; `true` (YAML's bool) and "5" (a string) are not.
Rate = Annotated[float, Field(ge=0, le=limits.MAX_RATE_RPS, strict=True)]
Slo = Annotated[float, Field(gt=0, le=limits.MAX_SLO_MS, strict=True)]
Price = Annotated[float, Field(gt=0, le=limits.MAX_PRICE_PER_HOUR, strict=True)]
Seconds = Annotated[float, Field(gt=0, le=limits.MAX_SECONDS, strict=True)]
Delay = Annotated[float, Field(ge=0, le=limits.MAX_SECONDS, strict=True)]
Timeout = Annotated[float, Field(gt=0, le=limits.MAX_TIMEOUT_S, strict=True)]
Fraction = Annotated[float, Field(ge=0, le=1, strict=True)]


class Frozen(BaseModel):
    # allow_inf_nan=False: `.inf` and `.nan` are YAML floats, and no field of a policy means them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _port_in_range(value: str) -> str:
    """HOST:PORT with a TCP port (1-65535): `127.0.0.1:99999` fails here, not when it is bound."""
    port = int(value.rsplit(":", 1)[1])
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is not a TCP port (1-65535)")
    return value


Listen = Annotated[str, Field(pattern=r"^[^\s:]+:[0-9]{1,5}$", description="HOST:PORT"), AfterValidator(_port_in_range)]


class FieldError(ValueError):
    """Raised inside validators to report an exact field path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
