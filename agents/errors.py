"""The agent's input errors: `FILE: field.path: message`, printed on one line with exit 2.

The agent's own small copy of the autoscaler's rule (autoscaler/config/errors.py): a GPU VM
installs only the agent, so the agent imports nothing from the autoscaler.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError


class InputError(Exception):
    """Bad input (an assignment, a model.yaml, a flag): the CLI prints it and exits 2."""

    def __init__(self, source: str | Path, field: str, message: str) -> None:
        self.source = str(source)
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.source}: {self.field}" if self.field else self.source
        return f"{where}: {self.message}"


def field_path(loc: Sequence[int | str]) -> str:
    """A pydantic location as `servers[2].port`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def from_validation(source: str | Path, exc: ValidationError, prefix: Iterable[int | str] = ()) -> InputError:
    """The first pydantic error as an InputError naming its field (unknown keys first: a typo
    also makes the real field missing, and the typo is the thing to fix)."""
    errors = exc.errors(include_url=False)
    err = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = [p for p in (*prefix, *err["loc"]) if p not in ("function-after", "function-before")]
    kind = err.get("type", "")
    message = {"extra_forbidden": "unknown key (check the spelling)", "missing": "required field is missing"}.get(kind)
    text = str(err.get("msg", "invalid value")).removeprefix("Value error, ")  # our validators' own words
    return InputError(source, field_path(loc), message or text)
