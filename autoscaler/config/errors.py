"""User-facing input errors: always name the file and the field, never show a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError
from pydantic_core import ErrorDetails


class InputError(Exception):
    """Bad input from a user: the CLI prints it as `FILE: field.path: message` and exits 2."""

    def __init__(self, source: str | Path, field: str, message: str) -> None:
        self.source = str(source)
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.source}: {self.field}" if self.field else self.source
        return f"{where}: {self.message}"


def field_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic location tuple as `workloads[2].slo_ms`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _describe(err: ErrorDetails) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required field is missing"
    if kind == "value_error" and (err.get("ctx") or {}).get("error") is not None:
        return str(err["ctx"]["error"])  # a validator's own message, without pydantic's "Value error, "
    if kind == "finite_number":
        return "must be a finite number (not .inf or .nan)"
    ctx = err.get("ctx") or {}
    if kind == "less_than_equal" and isinstance(ctx.get("le"), int | float):
        return f"{err.get('input')} is above the ceiling {ctx['le']:,} (docs/operations.md, Limits)"
    if kind == "value_error":  # a validator's own message; pydantic prefixes "Value error, "
        return str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    return str(err.get("msg", "invalid value"))


def _suggest(err: ErrorDetails, errors: list[ErrorDetails]) -> str:
    """For an unknown key, name the missing sibling it was probably meant to be."""
    parent, key = tuple(err["loc"][:-1]), str(err["loc"][-1])
    missing = [str(e["loc"][-1]) for e in errors if e.get("type") == "missing" and tuple(e["loc"][:-1]) == parent]
    close = difflib.get_close_matches(key, missing, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def from_validation(source: str | Path, exc: ValidationError, prefix: Iterable[int | str] = ()) -> InputError:
    """Turn pydantic's most useful error into an InputError naming the field path.

    Unknown keys come first: a typo (`slo:`) also makes the real field missing, and the typo is
    the thing to fix.
    """
    errors = exc.errors(include_url=False)
    extras = [e for e in errors if e.get("type") == "extra_forbidden"]
    err = extras[0] if extras else errors[0]
    loc = [p for p in (*prefix, *err["loc"]) if p not in ("function-after", "function-before")]
    hint = (_suggest(err, errors) or " (check the spelling)") if extras else ""
    return InputError(source, field_path(loc), _describe(err) + hint)
