"""Read YAML documents with errors that name the file and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.errors import InputError


def load_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping; syntax errors carry the line number."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "syntax"
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(path, line, f"YAML syntax error: {problem}") from None
    if data is None:
        raise InputError(path, "", "file is empty")
    if not isinstance(data, dict):
        raise InputError(path, "", f"expected a mapping at the top level, got {type(data).__name__}")
    return data
